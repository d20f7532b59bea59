"""Error rates of the report's verdicts (`stats.verdict` and the `--until-decisive` rule).

Simulated experiments, judged exactly as the report judges them, with every rate printed
with its Monte-Carlo SE sqrt(p (1 - p) / S) over S simulated experiments:

- fixed n: Welch's test (`stats.welch`) at 2, 3, 5, 10 seeds per arm; the paired t test
  (`stats.paired_t`) at 3, 5, 10 seeds with a seed effect both arms share (correlation
  0.8); then `stats.verdict(diff, alpha=0.05, smallest_effect=...)`;
- a family: three variants against one control, Welch, `stats.adjust(diffs, "holm")` and
  `stats.verdict(adj.difference, family_size=3)` (as `report._adjust_and_judge`), against
  the same verdicts unadjusted;
- sequential: `stats.SequentialTest`'s decision (t-mixture, paired by seed, a look every
  2 seeds per arm from max(3, min_seeds) = 5 up to a budget of 20 or 50; "no effect" ->
  "no-effect", "budget spent" -> "inconclusive", "supported" inside +-delta ->
  "negligible", as `report._judge_sequentially`) against the old report's verdict: a
  fixed-n Welch verdict on the same, optionally stopped, seeds. The sequential core is
  vectorized (`_paths`, as benchmarks/sequential.py); the first `--check` experiments of
  every cell are replayed through the public SequentialTest, round by round, and must
  agree;
- factorial: the 2^(3-1) fraction I = ABC (C = AB), 4 runs x 3 seeds,
  `stats.factorial_effects`, with a true AB interaction (aliased with C) and no main
  effect: how often the old rule (p < alpha in the predicted direction) says "supported"
  against the verdict's "aliased"; and a true A = +delta cancelled by BC = -delta.

Welch and paired t differences are computed for all experiments at once with the
library's formulas (`welch_many`, `paired_many`) and compared with `stats.welch` /
`stats.paired_t` on a sample (the disagreements are counted and printed); the first 1000
experiments at effect 0 of every fixed-n row go through the library, and its
StatsWarnings ("few-runs", "outlier-seed") are counted. `stats.verdict`, `stats.adjust`
and `stats.factorial_effects` are called as they are, once per experiment.

Units: one seed SD. Each arm's per-seed values have SD 1 (before collapses); the effect
for power is 1 SD; the smallest effect worth having is delta = 3 SD (a seed SD of 0.3
points against a smallest effect of 1 point), so delta / 3 = 1 SD and 2 delta = 6 SD.
Scenarios (the true mean difference is the stated one in all four):
- normal: N(0, 1) seed noise;
- skewed: lognormal(0, 1) seed noise, centred and scaled to mean 0, SD 1 (skewness 6.2);
- bounded: accuracies near 0.9, each run the mean of `items` Bernoulli items (items drawn
  per experiment from 50, 100, 200, 400), its true accuracy 0.9 + training noise of half
  the binomial SD; the best arm sits at 0.9, the others below it by the effect (so no
  run's true accuracy leaves [0, 1]); values reported in units of the run SD at 0.9. The
  paired correlation is 0.8 on the training noise only: 0.16 overall;
- collapsed: normal, but every run (each arm, each seed) independently collapses with
  probability 0.07 to 10 SD below its value (both arms alike).

Experiments per cell: S = 2000 for the rates without a smallest effect (type-I, power,
FWER, the factorial's "supported"/"aliased") and for every sequential decision; S_t = 700
for the fixed-n verdicts with a smallest effect (no-effect, negligible, the family's and
the factorial's TOST columns, the old Welch-after-stopping's), since each verdict with
smallest_effect costs ~1 ms (scipy freezing a t distribution in `equivalence_p`).

    nice -n 10 .venv/bin/python benchmarks/verdicts.py            # S = 2000, S_t = 700, ~5-7 min
    nice -n 10 .venv/bin/python benchmarks/verdicts.py --short    # S = 200, S_t = 60, < 1 min
    .venv/bin/python benchmarks/verdicts.py --quick              # a smoke run, seconds
"""

from __future__ import annotations

import math
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import _harness as bench
import numpy as np
from scipy import stats as sps

from labcoat import stats
from labcoat.stats import Difference
from labcoat.stats._sequential import (
    _BUDGET,
    _NO_EFFECT,
    _REFUTED,
    _SUPPORTED,
    _first_decision,
    _intersect,
    _looks,
    _paths,
    _t_min_seeds,
)

ALPHA = 0.05
DELTA = 3.0  # smallest effect worth having, in seed SDs
EFFECT = 1.0  # the effect for power (= DELTA / 3)
RHO = 0.8  # correlation of the two arms at one seed, paired designs
COLLAPSE_P, COLLAPSE_SHIFT = 0.07, -10.0
ACCURACY, ITEMS = 0.9, (50, 100, 200, 400)
ROUND, MIXTURE_G = 2, 1.0
SCENARIOS = ("normal", "skewed", "bounded", "collapsed")
SKEW_MEAN, SKEW_SD = math.exp(0.5), math.sqrt((math.e - 1) * math.e)  # lognormal(0, 1)
WARN_SIMS = 1000  # experiments per fixed-n row whose StatsWarnings are counted (at effect 0)
SEQ_CODES = {_SUPPORTED: "supported", _REFUTED: "refuted", _NO_EFFECT: "no-effect",
             _BUDGET: "inconclusive"}


# --- data ------------------------------------------------------------------------------


def unit_noise(kind: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Mean 0, SD 1: standard normal, or a centred standardized lognormal(0, 1)."""
    if kind == "skewed":
        return (rng.lognormal(0.0, 1.0, shape) - SKEW_MEAN) / SKEW_SD
    return rng.standard_normal(shape)


def draw(scenario: str, rng: np.random.Generator, means: np.ndarray, sims: int, n: int,
         rho: float = 0.0) -> np.ndarray:
    """Per-seed values (sims, k, n) of k arms (or factorial runs) with true means `means`
    (k,) in seed SDs; arms share a seed component of correlation rho."""
    k = means.size
    shared = unit_noise(scenario, rng, (sims, 1, n))
    own = unit_noise(scenario, rng, (sims, k, n))
    z = math.sqrt(rho) * shared + math.sqrt(1 - rho) * own
    if scenario != "bounded":
        values = means[None, :, None] + z
        if scenario == "collapsed":
            values += np.where(rng.random(values.shape) < COLLAPSE_P, COLLAPSE_SHIFT, 0.0)
        return values
    items = rng.choice(ITEMS, size=(sims, 1, 1))
    binomial_sd = np.sqrt(ACCURACY * (1 - ACCURACY) / items)
    training_sd = binomial_sd / 2
    unit = np.sqrt(binomial_sd**2 + training_sd**2)
    # The best arm at 0.9; 0.9 + 4.7 training SDs still lies below 1.
    p = ACCURACY + unit * (means - means.max())[None, :, None] + training_sd * z
    accuracy = rng.binomial(np.broadcast_to(items, p.shape), np.clip(p, 0.0, 1.0)) / items
    return (accuracy - ACCURACY) / unit


# --- tallies ---------------------------------------------------------------------------


@dataclass
class Rate:
    hits: float = 0.0
    sims: int = 0

    def add(self, hit: float) -> None:
        self.hits += hit
        self.sims += 1

    @property
    def p(self) -> float:
        return self.hits / self.sims if self.sims else math.nan

    @property
    def se(self) -> float:
        return math.sqrt(self.p * (1 - self.p) / self.sims) if self.sims else math.nan

    def show(self, bound: float | None = None) -> str:
        """'0.049 ± 0.005'; with a bound (an error rate's promise): ' (!)' when the rate
        exceeds it by more than 2 SE, ' (?)' when it exceeds it within 2 SE."""
        if not self.sims:
            return "-"
        text = f"{self.p:.3f} ± {self.se:.3f}"
        if bound is not None and self.p > bound:
            text = f"**{text}** " + ("(!)" if self.p > bound + 2 * self.se else "(?)")
        return text


@dataclass
class Cell:
    rates: dict[str, Rate] = field(default_factory=dict)
    warned: Counter = field(default_factory=Counter)  # StatsWarning kind -> experiments
    warn_sims: int = 0  # experiments whose warnings were collected
    seeds: list[float] = field(default_factory=list)
    checked: int = 0  # vectorized differences compared with the library's
    mismatched: int = 0

    def rate(self, name: str) -> Rate:
        return self.rates.setdefault(name, Rate())


def judged(f: Callable[..., Difference], *args: object, **kwargs: object
           ) -> tuple[Difference, set[str]]:
    """f(*args) and the kinds of the StatsWarnings it emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = f(*args, **kwargs)
    return result, {getattr(w.message, "kind", "other") for w in caught
                    if issubclass(w.category, stats.StatsWarning)}


def welch_many(a: np.ndarray, b: np.ndarray, ci: float = 0.95) -> list[Difference]:
    """stats.welch on each row of a: (sims, n_a) and b: (sims, n_b), vectorized (the same
    formulas; `checked` compares them with the library on a sample)."""
    na, nb = a.shape[1], b.shape[1]
    va, vb = a.var(axis=1, ddof=1) / na, b.var(axis=1, ddof=1) / nb
    estimate = b.mean(axis=1) - a.mean(axis=1)
    se = np.sqrt(va + vb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
        p = 2 * sps.t.sf(np.abs(estimate / se), df)
        half = sps.t.ppf(0.5 + ci / 2, df) * se
    out = []
    for e, s_, d, p_, h in zip(estimate.tolist(), se.tolist(), df.tolist(), p.tolist(),
                                half.tolist(), strict=True):
        if s_ == 0:
            out.append(Difference(e, e, e, 0.0, 1.0 if e == 0 else 0.0, "welch", na + nb,
                                  ci=ci))
        else:
            out.append(Difference(e, e - h, e + h, s_, p_, "welch", na + nb, df=d, ci=ci))
    return out


def paired_many(a: np.ndarray, b: np.ndarray, ci: float = 0.95) -> list[Difference]:
    """stats.paired_t on each row of a, b: (sims, n), vectorized (correlation left NaN:
    the verdict does not read it)."""
    n = a.shape[1]
    d = b - a
    estimate = d.mean(axis=1)
    se = d.std(axis=1, ddof=1) / np.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * sps.t.sf(np.abs(estimate / se), n - 1)
    half = float(sps.t.ppf(0.5 + ci / 2, n - 1)) * se
    out = []
    for e, s_, p_, h in zip(estimate.tolist(), se.tolist(), p.tolist(), half.tolist(),
                            strict=True):
        if s_ == 0:
            out.append(Difference(e, e, e, 0.0, 1.0 if e == 0 else 0.0, "paired-t", n,
                                  df=n - 1, ci=ci))
        else:
            out.append(Difference(e, e - h, e + h, s_, p_, "paired-t", n, df=n - 1, ci=ci))
    return out


def same(ours: Difference, theirs: Difference) -> bool:
    """The fields the verdict reads agree to rounding."""
    return all(math.isclose(getattr(ours, f), getattr(theirs, f), rel_tol=1e-9, abs_tol=1e-12)
               or (math.isinf(getattr(ours, f)) and getattr(ours, f) == getattr(theirs, f))
               for f in ("estimate", "low", "high", "se", "p_value", "df"))


def check_against(cell: Cell, f: Callable[..., Difference], a: np.ndarray, b: np.ndarray,
                  ours: Difference, collect: bool) -> None:
    """Compare one vectorized difference with the library's f(a, b); with collect, count
    the kinds of StatsWarning f emits (few-runs, outlier-seed)."""
    theirs, kinds = judged(f, a, b)
    cell.checked += 1
    cell.mismatched += not same(ours, theirs)
    if collect:
        cell.warn_sims += 1
        cell.warned.update(kinds)


def said(decision: str, *which: str) -> float:
    return float(decision in which)


# --- fixed n ---------------------------------------------------------------------------


def fixed_n(scenario: str, rng: np.random.Generator, n: int, paired: bool, sims: int,
            tost_sims: int, check: int) -> Cell:
    """Welch or paired t verdicts; the rates that need smallest_effect (TOST) on the first
    tost_sims experiments only (each such verdict costs ~1 ms, mostly scipy freezing t).
    Differences are vectorized; at effect 0 the library's test runs on the first
    WARN_SIMS experiments (its warnings counted), elsewhere on the first `check`."""
    cell = Cell()
    test, many = (stats.paired_t, paired_many) if paired else (stats.welch, welch_many)
    for effect in (0.0, EFFECT, DELTA, 2 * DELTA):
        count = sims if effect in (0.0, EFFECT) else tost_sims
        values = draw(scenario, rng, np.array([0.0, effect]), count, n, RHO if paired else 0.0)
        diffs = many(values[:, 0], values[:, 1])
        compare = WARN_SIMS if effect == 0 else check
        for i, d in enumerate(diffs):
            if i < compare:
                check_against(cell, test, values[i, 0], values[i, 1], d, effect == 0)
            plain = stats.verdict(d, alpha=ALPHA).decision if count == sims else None
            with_delta = (stats.verdict(d, alpha=ALPHA, smallest_effect=DELTA).decision
                          if i < tost_sims else None)
            record(cell, effect, plain, with_delta)
    return cell


def record(cell: Cell, effect: float, plain: str | None, with_delta: str | None) -> None:
    """The rates of one experiment's verdicts without and with delta (None: not judged)."""
    if plain is not None:
        if effect == 0:
            cell.rate("type1").add(said(plain, "supported", "refuted"))
        elif effect == EFFECT:
            cell.rate("power").add(said(plain, "supported"))
    if with_delta is None:
        return
    if effect == 0:
        cell.rate("no-effect@0").add(said(with_delta, "no-effect"))
    elif effect == EFFECT:
        cell.rate("negligible@delta/3").add(said(with_delta, "negligible"))
    elif effect == DELTA:
        cell.rate("no-effect@delta").add(said(with_delta, "no-effect"))
        cell.rate("negligible@delta").add(said(with_delta, "negligible"))
    elif effect == 2 * DELTA:
        cell.rate("negligible@2delta").add(said(with_delta, "negligible"))


# --- sequential ------------------------------------------------------------------------


def sequential(scenario: str, rng: np.random.Generator, max_seeds: int, sims: int,
               tost_sims: int, check: int) -> tuple[Cell, Cell, int]:
    """The sequential decision (all sims, vectorized) and the old fixed-n Welch verdict on
    the stopped seeds (with delta: the first tost_sims); and how many of the first `check`
    experiments per cell the public SequentialTest decides differently."""
    seq, old = Cell(), Cell()
    looks = _looks(max(3, _t_min_seeds(ALPHA, MIXTURE_G)), ROUND, max_seeds)
    disagreements = 0
    for effect in (0.0, EFFECT, DELTA, 2 * DELTA):
        values = draw(scenario, rng, np.array([0.0, effect]), sims, max_seeds)
        control, variant = values[:, 0], values[:, 1]
        _, low, high, _ = _paths(variant - control, ALPHA, "t-mixture", MIXTURE_G, None)
        low, high, _ = _intersect(low, high)
        for delta in (None, DELTA):
            used, codes, _ = _first_decision(low, high, looks, +1, delta)
            stopped: dict[int, Difference] = {}
            for n_used in np.unique(used):  # Welch on the seeds each experiment stopped at
                rows = np.flatnonzero(used == n_used)
                for i, d in zip(rows, welch_many(control[rows, :n_used],
                                                 variant[rows, :n_used]), strict=True):
                    stopped[int(i)] = d
            for i in range(sims):
                n = int(used[i])
                decision = SEQ_CODES[int(codes[i])]
                if i < check:
                    disagreements += replay(control[i], variant[i], looks, delta) != (
                        n, decision)
                if decision == "supported" and delta and high[i, n - 1] < delta:
                    decision = "negligible"  # as report._judge_sequentially
                fixed = None
                if (delta is None and effect in (0.0, EFFECT)) or (delta and i < tost_sims):
                    welch = stopped[i]
                    if i < check:
                        check_against(old, stats.welch, control[i, :n], variant[i, :n],
                                      welch, False)
                    fixed = stats.verdict(welch, alpha=ALPHA, smallest_effect=delta).decision
                if delta is None:
                    record(seq, effect, decision, None)
                    if fixed is not None:
                        record(old, effect, fixed, None)
                    if effect == 0:
                        seq.seeds.append(n)
                else:
                    record(seq, effect, None, decision)
                    if fixed is not None:
                        record(old, effect, None, fixed)
    return seq, old, disagreements


def replay(control: np.ndarray, variant: np.ndarray, looks: np.ndarray,
           delta: float | None) -> tuple[int, str]:
    """Seeds used and decision of the public SequentialTest, looking at `looks`."""
    test = stats.SequentialTest(alpha=ALPHA, direction="increase", smallest_effect=delta,
                                max_seeds=int(looks[-1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)
        for n in looks:
            result = test.update(control[:n], variant[:n])
            if result.stop:
                break
    decision = {"no effect": "no-effect", "budget spent": "inconclusive"}.get(
        result.decision, result.decision)
    return result.n, decision


# --- a family of three ------------------------------------------------------------------


def family(scenario: str, rng: np.random.Generator, n: int, sims: int,
           tost_sims: int, check: int) -> Cell:
    cell = Cell()
    for effect in (0.0, EFFECT, DELTA):
        count = tost_sims if effect == DELTA else sims
        values = draw(scenario, rng, np.array([0.0, effect, effect, effect]), count, n)
        columns = [welch_many(values[:, 0], values[:, j]) for j in (1, 2, 3)]
        for i, arms in enumerate(values):
            diffs = [column[i] for column in columns]
            if i < check:
                for j, d in enumerate(diffs, start=1):
                    check_against(cell, stats.welch, arms[0], arms[j], d, False)
            holm = [a.difference for a in stats.adjust(diffs, "holm")]
            for label, judged_diffs, m in (("holm", holm, 3), ("none", diffs, 1)):
                if effect != DELTA:
                    plain = [stats.verdict(d, alpha=ALPHA, family_size=m).decision
                             for d in judged_diffs]
                    if effect == 0:
                        cell.rate(f"fwer {label}").add(
                            float(any(x in ("supported", "refuted") for x in plain)))
                    else:
                        cell.rate(f"power {label}").add(
                            sum(x == "supported" for x in plain) / 3)
                if i >= tost_sims or (effect == 0 and label == "none"):
                    continue
                tost = [stats.verdict(d, alpha=ALPHA, smallest_effect=DELTA,
                                      family_size=m).decision for d in judged_diffs]
                if effect == 0:
                    cell.rate("no-effect@0 holm").add(sum(x == "no-effect" for x in tost) / 3)
                elif effect == DELTA:
                    cell.rate(f"any no-effect@delta {label}").add(
                        float(any(x == "no-effect" for x in tost)))
    return cell


# --- factorial -------------------------------------------------------------------------

CASES = (("no effect", {}), ("AB = 1 SD", {"AB": 1.0}), ("AB = 2 SD", {"AB": 2.0}),
         ("A = +delta, BC = -delta", {"A": DELTA, "BC": -DELTA}))


def factorial(scenario: str, rng: np.random.Generator, sims: int,
              tost_sims: int) -> dict[str, Cell]:
    design = stats.fractional_factorial(["A", "B", "C"], generators=["C = AB"])
    runs = design.runs
    column = {"A": runs[:, 0], "B": runs[:, 1], "C": runs[:, 2],
              "AB": runs[:, 0] * runs[:, 1], "BC": runs[:, 1] * runs[:, 2]}
    out = {}
    for name, effects in CASES:
        # An effect is twice its coefficient (factorial_effects' convention): y = sum e/2 x.
        means = sum((e / 2 * column[t] for t, e in effects.items()), np.zeros(len(runs)))
        cell = Cell()
        for i, values in enumerate(draw(scenario, rng, means.astype(float), sims, 3)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", stats.StatsWarning)
                fx = stats.factorial_effects(runs, values, factors=["A", "B", "C"])
            for term in ("A", "C"):
                d = fx[term]
                old = d.p_value < ALPHA and d.estimate > 0
                new = stats.verdict(d, alpha=ALPHA, aliases=d.aliases).decision
                cell.rate(f"{term} old supported").add(float(old))
                cell.rate(f"{term} aliased").add(said(new, "aliased"))
                cell.rate(f"{term} supported").add(said(new, "supported"))
            if i < tost_sims:  # A with delta: "no-effect" would be wrong when BC cancels A
                d = fx["A"]
                tost = stats.verdict(d, alpha=ALPHA, smallest_effect=DELTA,
                                     aliases=d.aliases).decision
                cell.rate("A no-effect").add(said(tost, "no-effect"))
                cell.rate("A aliased delta").add(said(tost, "aliased"))
                # The same estimate read as if unaliased: what a full factorial would say.
                bare = stats.verdict(d, alpha=ALPHA, smallest_effect=DELTA).decision
                cell.rate("A no-effect bare").add(said(bare, "no-effect"))
        out[name] = cell
    return out


# --- output ----------------------------------------------------------------------------


def fixed_table(scenario: str, rows: list[tuple[str, Cell]]) -> list[str]:
    lines = [f"### {scenario}", "",
             "| design | type-I: S or R at 0 (≤ α) | power: S at 1 SD "
             "| no-effect at δ (≤ α) | no-effect at 0 | negligible at δ/3 "
             "| negligible at δ (≤ α) | negligible at 2δ | warned at 0 | mean seeds at 0 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, cell in rows:
        r = cell.rates
        warned = ", ".join(f"{k} {v / cell.warn_sims:.1%}"
                           for k, v in sorted(cell.warned.items()))
        seeds = f"{np.mean(cell.seeds):.1f}" if cell.seeds else "-"
        lines.append(
            f"| {label} | {r['type1'].show(ALPHA)} | {r['power'].show()} "
            f"| {r['no-effect@delta'].show(ALPHA)} | {r['no-effect@0'].show()} "
            f"| {r['negligible@delta/3'].show()} | {r['negligible@delta'].show(ALPHA)} "
            f"| {r['negligible@2delta'].show()} | {warned or '-'} | {seeds} |")
    return lines + [""]


def family_table(rows: list[tuple[str, int, Cell]]) -> list[str]:
    lines = ["### A family: 3 variants vs one control (Welch), Holm vs unadjusted", "",
             "| scenario | seeds/arm | FWER, Holm (≤ α) | FWER, unadjusted "
             "| power per comparison, Holm | power, unadjusted "
             "| any no-effect at δ: Holm, TOST α/3 (≤ α) | any no-effect at δ: TOST α each "
             "| no-effect at 0 per comparison, Holm |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for scenario, n, cell in rows:
        r = cell.rates
        lines.append(
            f"| {scenario} | {n} | {r['fwer holm'].show(ALPHA)} | {r['fwer none'].show(ALPHA)} "
            f"| {r['power holm'].show()} | {r['power none'].show()} "
            f"| {r['any no-effect@delta holm'].show(ALPHA)} "
            f"| {r['any no-effect@delta none'].show(ALPHA)} | {r['no-effect@0 holm'].show()} |")
    return lines + [""]


def factorial_table(rows: list[tuple[str, dict[str, Cell]]]) -> list[str]:
    lines = ["### Factorial 2^(3-1), I = ABC (C = AB), 4 runs x 3 seeds, each effect judged "
             "alone", "",
             "| scenario | truth | C: old rule \"supported\" | C: verdict \"aliased\" "
             "| C: verdict \"supported\" | A: old rule \"supported\" | A: verdict \"aliased\" "
             "| A with δ: \"no-effect\" | A with δ: \"aliased\" "
             "| A with δ, aliases ignored: \"no-effect\" |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for scenario, cells in rows:
        for name, cell in cells.items():
            r = cell.rates
            lines.append(
                f"| {scenario} | {name} | {r['C old supported'].show()} "
                f"| {r['C aliased'].show()} | {r['C supported'].show()} "
                f"| {r['A old supported'].show()} | {r['A aliased'].show()} "
                f"| {r['A no-effect'].show()} | {r['A aliased delta'].show()} "
                f"| {r['A no-effect bare'].show()} |")
    return lines + [""]


def main() -> None:
    parser = bench.parser("Error rates of the report's verdicts.")
    parser.add_argument("--sims", type=int, default=2000,
                        help="simulated experiments per cell for the rates without a smallest "
                        "effect, and for every sequential decision (default 2000)")
    parser.add_argument("--tost-sims", type=int, default=700,
                        help="experiments per cell for the fixed-n rates that need TOST "
                        "(each such verdict costs ~1 ms; default 700)")
    parser.add_argument("--short", action="store_true",
                        help="200 and 60 experiments per cell (< 1 minute; what this "
                        "script's --quick was before the harness)")
    parser.add_argument("--check", type=int, default=None,
                        help="experiments per sequential cell replayed through "
                        "SequentialTest (default 30; 5 with --short, 2 with --quick)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sims, tost = (20, 10) if args.quick else (200, 60) if args.short else (args.sims,
                                                                             args.tost_sims)
    tost = min(tost, sims)
    check = args.check if args.check is not None else (
        2 if args.quick else 5 if args.short else 30)
    start = time.perf_counter()
    out = [f"S = {sims} simulated experiments per cell (S = {tost} for the fixed-n verdicts "
           f"with a smallest effect: no-effect, negligible, and the family's and the "
           f"factorial's TOST columns); alpha = {ALPHA}; delta = {DELTA:g} SD; power at "
           f"{EFFECT:g} SD; seed {args.seed}. (!): above the bound by more than 2 SE; (?): "
           "above it within 2 SE.", ""]
    families, factorials, replays, tables = [], [], [], []
    for s, scenario in enumerate(SCENARIOS):
        rows = []
        for n in (2, 3, 5, 10):
            rng = np.random.default_rng([args.seed, s, 0, n])
            rows.append((f"Welch, {n} seeds/arm",
                         fixed_n(scenario, rng, n, False, sims, tost, check)))
        for n in (3, 5, 10):
            rng = np.random.default_rng([args.seed, s, 1, n])
            rows.append((f"paired t, {n} seeds (corr {RHO:g})",
                         fixed_n(scenario, rng, n, True, sims, tost, check)))
        for budget in (20, 50):
            rng = np.random.default_rng([args.seed, s, 2, budget])
            seq, old, bad = sequential(scenario, rng, budget, sims, tost, check)
            replays.append((scenario, budget, bad))
            rows.append((f"sequential, 5..{budget} seeds/arm", seq))
            rows.append((f"old: Welch after stopping, 5..{budget}", old))
        out += fixed_table(scenario, rows)
        tables.append(rows)
        for n in (5, 10):
            rng = np.random.default_rng([args.seed, s, 3, n])
            families.append((scenario, n, family(scenario, rng, n, sims, tost, check)))
        rng = np.random.default_rng([args.seed, s, 4])
        factorials.append((scenario, factorial(scenario, rng, sims, tost)))
        print(f"[{scenario} done, {time.perf_counter() - start:.0f} s]", flush=True)
    out += family_table(families) + factorial_table(factorials)
    cells = [c for rows in tables for _, c in rows] + [c for _, _, c in families]
    checked, bad = sum(c.checked for c in cells), sum(c.mismatched for c in cells)
    out.append(f"Vectorized Welch / paired t against stats.welch / stats.paired_t: {bad} of "
               f"{checked} differences disagree (estimate, interval, se, p, df; rel 1e-9).")
    out.append(f"SequentialTest replays (the first {check} experiments of each of the 8 cells "
               "per row, vectorized core vs the public class, round by round): "
               + ", ".join(f"{sc} 5..{b}: {bad} of {8 * check} disagree"
                           for sc, b, bad in replays))
    out.append(f"\nwall time {time.perf_counter() - start:.0f} s")
    print("\n".join(out))
    bench.save(args, {"sims": sims, "tost_sims": tost, "seconds": time.perf_counter() - start,
                      "replay_mismatches": bad})


if __name__ == "__main__":
    main()
