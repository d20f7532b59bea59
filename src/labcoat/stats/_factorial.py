"""Factorial designs: several interventions share runs and each effect stays attributable.

- design: full_factorial (2^k runs), fractional_factorial (2^(k-p) runs from
  generators, or the smallest standard design of a requested resolution),
  full_factorial_levels (multi-level full factorials as level dictionaries)
- analysis: factorial_effects (`_factorial_effects`: main effects and declared
  interactions by OLS on every seed of every run, t intervals)
- planning: suggest_fractional (`_factorial_plan`: runs x seeds against
  one-at-a-time arms, minimum detectable effect, what the design can and cannot
  attribute)

Conventions (Box, Hunter & Hunter 2005, "Statistics for Experimenters", 2nd ed.,
ch. 5-6; Montgomery 2013, "Design and Analysis of Experiments", 8th ed., ch. 6-8):
two-level factors are coded -1 (the first level, the baseline) and +1; runs are in
standard (Yates) order, the first factor alternating fastest, so run 0 is the
all-baseline run. An effect is the average response at +1 minus the average at -1
(for an interaction, at its product column +1 minus -1), which is twice the OLS
coefficient of the coded variable. A fractional design aliases effects: the
estimate of A in a design with I = ABD estimates A + BD. Words, aliases and
resolution follow Box & Hunter (1961) and Wu & Hamada (2009), "Experiments:
Planning, Analysis, and Optimization", 2nd ed., ch. 5.

Effect names: a main effect is its factor's name; an interaction joins its
factors' names in factor order, with "*" ("lr*wd"), or with nothing when every
factor name is a single character ("AB"), as in the textbooks. A leading "-"
marks a word or alias with a negative sign (I = -ABCD; A = -BCD).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Below this many residual degrees of freedom the variance estimate behind every
# interval is itself rough (a chi-square with < 5 df spans roughly 0.2x-2.6x of
# sigma^2 at 95%) and t quantiles grow fast (t_0.975 = 2.57 at 5 df, 2.78 at 4).
FEW_DF = 5
# 2^16 runs (x k columns of int64) is already far beyond any ML experiment; the cap
# keeps a typo (k = 40) from allocating terabytes.
_MAX_RUNS = 2**16
_MAX_GENERATORS = 16
_MAX_LEVEL_COMBINATIONS = 10**6
_NAME = re.compile(r"^[^\s*=,+\-][^\s*=,]*$")

# Standard generators of 2^(k-p) designs, in the textbook letters A, B, C, ... (the
# generated factors are the last p): Montgomery (2013), Table 8.14 "Selected 2^(k-p)
# fractional factorial designs" (also reproduced in the R package qualityTools,
# `fracChoose`). For each (k, p) the design has the highest resolution possible in
# 2^(k-p) runs and minimum aberration among those (Fries & Hunter 1980, "Minimum
# aberration 2^(k-p) designs", Technometrics 22:601-608); tests/stats/test_factorial.py
# checks both properties by exhaustive search over all generator sets. Half fractions
# (p = 1) use the k-factor interaction, the unique resolution-k half fraction.
_STANDARD: dict[tuple[int, int], tuple[str, ...]] = {
    (3, 1): ("C = AB",),
    (4, 1): ("D = ABC",),
    (5, 1): ("E = ABCD",),
    (5, 2): ("D = AB", "E = AC"),
    (6, 1): ("F = ABCDE",),
    (6, 2): ("E = ABC", "F = BCD"),
    (6, 3): ("D = AB", "E = AC", "F = BC"),
    (7, 1): ("G = ABCDEF",),
    (7, 2): ("F = ABCD", "G = ABDE"),
    (7, 3): ("E = ABC", "F = BCD", "G = ACD"),
    (7, 4): ("D = AB", "E = AC", "F = BC", "G = ABC"),
    (8, 1): ("H = ABCDEFG",),
    (8, 2): ("G = ABCD", "H = ABEF"),
    (8, 3): ("F = ABC", "G = ABD", "H = BCDE"),
    (8, 4): ("E = BCD", "F = ACD", "G = ABC", "H = ABD"),
}
_STANDARD_MAX_K = 8
_LETTERS = "ABCDEFGH"  # textbook factor letters for k <= 8 (I is reserved for the identity)


# --- words: effects as bit masks over the factors --------------------------------


def _order(mask: int) -> int:
    return mask.bit_count()


def _indices(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def _separator(names: Sequence[str]) -> str:
    return "" if all(len(name) == 1 for name in names) else "*"


def _label(mask: int, names: Sequence[str], sign: int = 1) -> str:
    text = _separator(names).join(names[i] for i in _indices(mask))
    return text if sign > 0 else "-" + text


def _word_order(label: str, names: Sequence[str]) -> int:
    """Number of factors in a word or effect label such as "-ABCD" or "lr*wd"."""
    text = label.lstrip("-")
    return len(text.split("*")) if _separator(names) else len(text)


def _roman(number: int) -> str:
    numerals = ((10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))
    out = []
    for value, numeral in numerals:
        count, number = divmod(number, value)
        out.append(numeral * count)
    return "".join(out)


def _check_names(names: Sequence[str], what: str) -> list[str]:
    if isinstance(names, str):
        raise ValueError(
            f"{what} must be a list of names like ['lr', 'wd'], got the string {names!r}"
        )
    out = list(names)
    if not out:
        raise ValueError(f"{what} is empty: give at least one factor name")
    for name in out:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"{what} has the name {name!r}: names must be non-empty strings without "
                "spaces, '*', '=' or ',' and must not start with '+' or '-' (e.g. 'lr', "
                "'weight_decay')"
            )
    repeated = sorted({name for name in out if out.count(name) > 1})
    if repeated:
        raise ValueError(f"{what} repeats {', '.join(map(repr, repeated))}; give each name once")
    return out


# --- designs ---------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FactorialDesign:
    """A two-level full or regular fractional factorial design (coded -1 / +1).

    factors: the k factor names; column j of `runs` is factors[j].
    runs: (n_runs, k) int array of -1 (baseline, the first level) and +1, read-only,
        in standard order (first base factor alternating fastest; run 0 is all
        baseline). n_runs = 2^(k-p) for p generators.
    generators: the p generators, e.g. ["D = ABC"] or ["dropout = warmup*lr*wd"];
        empty for a full factorial.
    defining_relation: the 2^p - 1 words w with I = w (generator words first, then
        their products), e.g. ["ABCD"]; a leading "-" marks I = -w. Empty for a full
        factorial.
    resolution: the length of the shortest word (Box & Hunter 1961); None for a full
        factorial, where nothing is aliased.
    aliases: each main effect and two-factor interaction -> the effects of order at
        most 3 that share its column (with sign), e.g. {"A": ["BCD"], "AB": ["CD"]}
        for D = ABC. Interactions of four or more factors are left out.
    """

    factors: list[str]
    runs: np.ndarray
    generators: list[str]
    defining_relation: list[str]
    resolution: int | None
    aliases: dict[str, list[str]]

    @property
    def n_runs(self) -> int:
        return int(self.runs.shape[0])

    @property
    def k(self) -> int:
        return len(self.factors)

    @property
    def p(self) -> int:
        """Number of generators: the design is a 1/2^p fraction of the 2^k factorial."""
        return len(self.generators)

    @property
    def word_length_pattern(self) -> tuple[int, ...]:
        """(A_3, A_4, ..., A_k): the number of defining words of each length.

        Minimum aberration (Fries & Hunter 1980) prefers, among designs of one size,
        the pattern that is smallest in the first place where two patterns differ.
        All zeros for a full factorial.
        """
        lengths = [_word_order(word, self.factors) for word in self.defining_relation]
        return tuple(lengths.count(length) for length in range(3, self.k + 1))

    def assign_levels(self, levels: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
        """The runs as level settings: one dict factor -> level per run, in run order.

        levels: factor -> (baseline, treatment), the values coded -1 and +1, e.g.
        {"lr": (1e-3, 3e-3), "warmup": ("off", "on")}.
        """
        missing = [name for name in self.factors if name not in levels]
        extra = [name for name in levels if name not in self.factors]
        if missing or extra:
            raise ValueError(
                f"levels must name exactly the design's factors {self.factors}; "
                + (f"missing {missing}" if missing else "")
                + ("; " if missing and extra else "")
                + (f"unknown {extra}" if extra else "")
            )
        pairs = {}
        for name in self.factors:
            value = levels[name]
            if isinstance(value, str | bytes) or len(value) != 2:
                raise ValueError(
                    f"levels[{name!r}] = {value!r} must be two levels (baseline, treatment)"
                )
            pairs[name] = tuple(value)
        return [{name: pairs[name][0 if code < 0 else 1]
                 for name, code in zip(self.factors, row, strict=True)}
                for row in self.runs.tolist()]

    def describe(self) -> str:
        """In words: what the design can and cannot attribute, and why (its aliasing)."""
        names = ", ".join(self.factors)
        if self.resolution is None:
            return (
                f"full 2^{self.k} factorial: {self.n_runs} runs for {self.k} factor"
                f"{'s' if self.k > 1 else ''} ({names}). Nothing is aliased: every main "
                "effect and every interaction has its own contrast, so each is attributable "
                "(given enough seeds to separate it from noise)."
            )
        lines = [
            f"2^({self.k}-{self.p}) fractional factorial, resolution {_roman(self.resolution)}: "
            f"{self.n_runs} runs for {self.k} factors ({names}) instead of {2**self.k}.",
            f"Generators: {', '.join(self.generators)}. Defining relation: I = "
            + " = ".join(self.defining_relation) + ".",
        ]
        if self.resolution == 3:
            lines.append(
                "Resolution III: no main effect is aliased with another main effect, but main "
                "effects are aliased with two-factor interactions: a main effect is "
                "attributable only if the interactions aliased with it are negligible."
            )
        elif self.resolution == 4:
            lines.append(
                "Resolution IV: main effects are aliased only with interactions of three or "
                "more factors, so each main effect is attributable if those are negligible; "
                "two-factor interactions are aliased with each other, so one is attributable "
                "only if the others in its chain are negligible."
            )
        else:
            lines.append(
                f"Resolution {_roman(self.resolution)}: main effects are aliased only with "
                f"interactions of {self.resolution - 1} or more factors and two-factor "
                f"interactions only with interactions of {self.resolution - 2} or more, so "
                "all of them are attributable if interactions of three or more factors are "
                "negligible."
            )
        chains, clear = self._chains()
        if not chains:
            lines.append(
                "Can attribute, assuming interactions of three or more factors are "
                "negligible: every main effect and every two-factor interaction (all clear)."
            )
        elif clear:
            lines.append(
                "Can attribute (clear: no main effect or two-factor interaction among its "
                "aliases; Wu & Hamada 2009, ch. 5), assuming interactions of three or more "
                "factors are negligible: " + ", ".join(clear) + "."
            )
        else:
            lines.append(
                "Can attribute: no main effect or two-factor interaction is clear; each is "
                "aliased with another one of them (below)."
            )
        if chains:
            lines.append(
                "Cannot attribute separately (each chain is estimated only as the signed sum "
                "of its members): " + "; ".join(" = ".join(chain) for chain in chains) + "."
            )
        return "\n".join(lines)

    def _chains(self) -> tuple[list[list[str]], list[str]]:
        """Alias chains among main effects and two-factor interactions, and the clear ones."""
        low_order = list(self.aliases)
        member = set(low_order)
        seen: set[str] = set()
        chains, clear = [], []
        for key in low_order:
            if key in seen:
                continue
            chain = [key] + [a for a in self.aliases[key] if a.lstrip("-") in member]
            seen.update(a.lstrip("-") for a in chain)
            if len(chain) > 1:
                chains.append(chain)
            else:
                clear.append(key)
        return chains, clear


def full_factorial(factors: Sequence[str]) -> FactorialDesign:
    """The 2^k full factorial in k two-level factors: runs (2^k, k) of -1 / +1.

    Standard order (Box, Hunter & Hunter 2005, ch. 5): factors[0] alternates
    -1, +1 every run, factors[1] every two runs, ...; run 0 is all baseline.
    """
    return _build(_check_names(factors, "factors"), [])


def fractional_factorial(
    factors: Sequence[str],
    *,
    generators: Sequence[str] | None = None,
    resolution: int | None = None,
) -> FactorialDesign:
    """A regular 2^(k-p) fractional factorial: runs (2^(k-p), k) of -1 / +1.

    generators: p strings "X = word", X a factor and word a product of two or more
        other factors: "D = ABC" (single-letter names may be run together),
        "dropout = warmup*lr*wd" or "dropout = warmup lr wd"; "D = -ABC" takes the
        other half. The factors on the right must be base factors (not themselves
        generated); base factors are those not on the left of any generator and
        form a full factorial in standard order.
    resolution: without generators, the smallest standard design whose resolution
        is at least this (3: main effects clear of each other; 4: also of two-factor
        interactions; 5: two-factor interactions clear of each other), with the
        generators of Montgomery (2013) Table 8.14 for k <= 8 (minimum aberration);
        the full factorial when no fraction reaches it. With generators, a check:
        raises if the generated design's resolution is lower.

    Raises ValueError for generators that alias two main effects (resolution II),
    since such a design can never attribute either effect.
    """
    names = _check_names(factors, "factors")
    if resolution is not None:
        if isinstance(resolution, bool) or not isinstance(resolution, int | np.integer):
            raise ValueError(f"resolution={resolution!r} must be a whole number, e.g. 3, 4 or 5")
        if resolution < 3:
            raise ValueError(
                f"resolution={resolution} would alias main effects with each other, so no "
                "effect could be attributed; ask for 3 (main effects clear of each other), "
                "4 (also clear of two-factor interactions) or 5 (two-factor interactions "
                "clear of each other)"
            )
    if generators is None:
        if resolution is None:
            raise ValueError(
                "give generators=['D = ABC', ...] or resolution=3, 4 or 5 (or call "
                "full_factorial for all 2^k runs)"
            )
        return _build(names, _standard_generators(names, int(resolution)))
    if isinstance(generators, str):
        raise ValueError(
            f"generators must be a list of strings like ['D = ABC'], got the string "
            f"{generators!r}"
        )
    design = _build(names, [_parse_generator(text, names) for text in generators])
    if resolution is not None and design.resolution is not None \
            and design.resolution < resolution:
        shortest = min(design.defining_relation, key=lambda w: _word_order(w, names))
        raise ValueError(
            f"generators {list(generators)} give a resolution {_roman(design.resolution)} "
            f"design (I = {shortest}), below the requested resolution {resolution}; drop "
            "generators= to get the standard design of that resolution"
        )
    return design


def defining_words(factors: Sequence[str], generators: Sequence[str]) -> list[frozenset[str]]:
    """The words of the defining relation as sets of factor names, shortest first.

    The one parser of generators and the one defining relation labcoat has: the design
    schema, its expansion into runs and the review's aliasing rules all read them from
    here (`fractional_factorial` builds on the same). Signs do not change which effects
    are aliased, so they are dropped. Raises ValueError naming a bad generator.
    """
    names = _check_names(factors, "factors")
    parsed = [_parse_generator(text, names) for text in generators]
    words = {frozenset(names[i] for i in _indices(mask)) for _, mask in _relation(parsed)}
    return sorted(words, key=lambda w: (len(w), sorted(w)))


def full_factorial_levels(levels: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of factor levels (any number of levels per factor).

    levels: factor -> its levels, baseline first, e.g.
        {"optimizer": ["adamw", "lion", "sgd"], "lr": [1e-3, 3e-3]}.
    Returns prod(len(levels[f])) dicts factor -> level, in a stable order: the
    first factor changes fastest (standard order, as in `full_factorial`), so the
    first combination is all baselines.
    """
    if not isinstance(levels, Mapping):
        raise ValueError(
            f"levels must be a mapping factor -> list of levels, got {type(levels).__name__}"
        )
    names = _check_names(list(levels), "levels")
    lists = []
    for name in names:
        values = levels[name]
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise ValueError(
                f"levels[{name!r}] = {values!r} must be a list of levels, baseline first"
            )
        values = list(values)
        if len(values) < 2:
            raise ValueError(
                f"factor {name!r} has {len(values)} level(s); a factor needs at least 2 "
                "(baseline first); drop it or add a level"
            )
        for i, j in itertools.combinations(range(len(values)), 2):
            if values[i] == values[j]:
                raise ValueError(f"factor {name!r} repeats the level {values[i]!r}; "
                                 "give each level once")
        lists.append(values)
    total = math.prod(len(values) for values in lists)
    if total > _MAX_LEVEL_COMBINATIONS:
        raise ValueError(
            f"the full factorial of {names} has {total} combinations, more than "
            f"{_MAX_LEVEL_COMBINATIONS}; use fewer factors or levels, or a fractional design"
        )
    # itertools.product varies its last argument fastest: reverse so the first factor does.
    out = []
    for combination in itertools.product(*reversed(lists)):
        row = dict(zip(reversed(names), combination, strict=True))
        out.append({name: row[name] for name in names})
    return out


def _standard_generators(names: list[str], resolution: int) -> list[tuple[int, int, int]]:
    """Generators of the smallest standard design with resolution >= resolution."""
    k = len(names)
    if k > _STANDARD_MAX_K:
        raise ValueError(
            f"no stored standard design for {k} factors (the table covers up to "
            f"{_STANDARD_MAX_K}, Montgomery 2013 Table 8.14); pass generators= "
            "explicitly (e.g. from Montgomery Table 8.14 or Wu & Hamada 2009, Appendix "
            f"5A), split the candidates into groups of at most {_STANDARD_MAX_K}, or use "
            f"full_factorial ({2**k} runs)"
        )
    letters = list(_LETTERS[:k])
    # Largest p first: the fewest runs. For each size the table holds the highest
    # resolution there is, so the first that reaches `resolution` is the smallest design.
    for p in range(k - 1, 0, -1):
        table = _STANDARD.get((k, p))
        if table is None:
            continue
        parsed = [_parse_generator(text, letters) for text in table]
        if _resolution(_relation(parsed)) >= resolution:
            return parsed
    return []


def _parse_generator(text: str, names: list[str]) -> tuple[int, int, int]:
    """'D = ABC' -> (index of D, mask of A, B, C, sign)."""
    example = "e.g. 'D = ABC' or 'dropout = warmup*lr*wd'"
    if not isinstance(text, str) or text.count("=") != 1:
        raise ValueError(f"generator {text!r} must read 'factor = product', {example}")
    left, right = (part.strip() for part in text.split("="))
    if left not in names:
        raise ValueError(
            f"generator {text!r}: {left!r} is not a factor; factors are {', '.join(names)}"
        )
    sign = 1
    if right[:1] in "+-" and right:
        sign = -1 if right[0] == "-" else 1
        right = right[1:].strip()
    tokens = _split_product(right, names, text)
    mask = 0
    for token in tokens:
        index = names.index(token)
        if mask >> index & 1:
            raise ValueError(
                f"generator {text!r} repeats {token!r} (and {token}*{token} = I); give each "
                "factor once"
            )
        mask |= 1 << index
    target = names.index(left)
    if mask >> target & 1:
        raise ValueError(f"generator {text!r} defines {left!r} in terms of itself")
    if len(tokens) < 2:
        raise ValueError(
            f"generator {text!r} sets {left!r} equal to a single factor, so their effects "
            "could never be told apart; use a product of two or more factors"
        )
    return target, mask, sign


def _split_product(text: str, names: list[str], generator: str) -> list[str]:
    if "*" in text:
        tokens = [token.strip() for token in text.split("*")]
    elif len(text.split()) > 1:
        tokens = text.split()
    elif text in names:
        tokens = [text]
    elif text and all(len(name) == 1 for name in names):
        tokens = list(text)  # "ABC" with single-letter factor names
    else:
        tokens = [text]
    for token in tokens:
        if token not in names:
            raise ValueError(
                f"generator {generator!r}: {token!r} is not a factor (factors are "
                f"{', '.join(names)}); separate long names with '*', e.g. "
                "'dropout = warmup*lr*wd'"
            )
    return tokens


def _relation(generators: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """The defining relation: (sign, word mask) for every non-empty product of generator
    words, generator words first (the word of 'D = ABC' is ABCD, since D * D = I)."""
    words: list[tuple[int, int]] = []
    for target, mask, sign in generators:
        word = (sign, mask | 1 << target)
        words += [word] + [(s * word[0], m ^ word[1]) for s, m in words]
    # Re-order by the number of generators in the product, keeping generators first.
    return sorted(words, key=lambda w: _generator_count(w[1], generators))


def _generator_count(word: int, generators: list[tuple[int, int, int]]) -> int:
    return sum(word >> target & 1 for target, _, _ in generators)


def _resolution(words: list[tuple[int, int]]) -> int:
    return min((_order(mask) for _, mask in words), default=10**9)


def _build(names: list[str], generators: list[tuple[int, int, int]]) -> FactorialDesign:
    k = len(names)
    targets = [target for target, _, _ in generators]
    repeated = sorted({names[t] for t in targets if targets.count(t) > 1})
    if repeated:
        raise ValueError(f"generators define {', '.join(map(repr, repeated))} more than once; "
                         "give one generator per generated factor")
    generated_mask = sum(1 << t for t in targets)
    for target, mask, _ in generators:
        if mask & generated_mask:
            used = [names[i] for i in _indices(mask & generated_mask)]
            base = [names[i] for i in range(k) if not generated_mask >> i & 1]
            raise ValueError(
                f"the generator of {names[target]!r} uses {', '.join(map(repr, used))}, which "
                f"is itself generated; write every generator in terms of the base factors "
                f"{', '.join(base)}"
            )
    p = len(generators)
    if p > _MAX_GENERATORS:
        raise ValueError(f"{p} generators is more than {_MAX_GENERATORS}; use fewer factors")
    base = [i for i in range(k) if not generated_mask >> i & 1]
    if 2 ** len(base) > _MAX_RUNS:
        raise ValueError(
            f"{2 ** len(base)} runs (2^{len(base)}) is more than {_MAX_RUNS}; use fewer "
            "factors or more generators"
        )
    words = _relation(generators)
    if words and _resolution(words) < 3:
        sign, mask = min(words, key=lambda w: _order(w[1]))
        pair = [names[i] for i in _indices(mask)]
        raise ValueError(
            f"these generators alias the main effects of {pair[0]!r} and {pair[1]!r} "
            f"(I = {_label(mask, names, sign)}): every run sets them equal"
            f"{'' if sign > 0 else ' and opposite'}, so neither effect could ever be "
            "attributed; give the generated factors different products"
        )

    # Base factors in standard order: base factor j is +1 where bit j of the run index is
    # set (Box, Hunter & Hunter 2005, ch. 5); generated columns are signed products.
    n_runs = 2 ** len(base)
    index = np.arange(n_runs)
    runs = np.empty((n_runs, k), dtype=np.int64)
    for j, column in enumerate(base):
        runs[:, column] = np.where(index >> j & 1, 1, -1)
    for target, mask, sign in generators:
        runs[:, target] = sign * np.prod(runs[:, _indices(mask)], axis=1)
    runs.setflags(write=False)

    keys = [1 << i for i in range(k)] + [(1 << i) | (1 << j)
                                          for i, j in itertools.combinations(range(k), 2)]
    # Only words of length <= 5 can alias an effect of order <= 2 with one of order <= 3.
    short = [(s, m) for s, m in words if _order(m) <= 5]
    aliases = {}
    for key in keys:
        found = [(s, key ^ m) for s, m in short if _order(key ^ m) <= 3]
        found.sort(key=lambda a: (_order(a[1]), _indices(a[1])))
        aliases[_label(key, names)] = [_label(m, names, s) for s, m in found]
    return FactorialDesign(
        factors=list(names),
        runs=runs,
        generators=[f"{names[t]} = {'-' if s < 0 else ''}{_label(m, names)}"
                    for t, m, s in generators],
        defining_relation=[_label(m, names, s) for s, m in words],
        resolution=_resolution(words) if words else None,
        aliases=aliases,
    )
