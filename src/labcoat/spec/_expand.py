"""Expansion of a design into trials, and the design's identity hash.

Arms (or the runs of a factorial design) x seeds x scales. With factors, every
combination of levels is a run (`fraction:` keeps the half, quarter, ... of a
two-level design defined by its generators); the all-baseline run is the
control when it is part of the design.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any

from labcoat.spec._schema import Design, Scalar, factor_arm_name

# Seeds of different arms when `paired_seeds: false`: arm i gets seed + i * OFFSET.
UNPAIRED_SEED_OFFSET = 100_003
DEFAULT_EVAL_BUDGET = 0.05  # {eval_budget} when the design gives none: 5% of training time
# Past this many trials a design is more likely a typo (`seeds: 100000`) than a plan: the
# runner asks for --yes and lint warns (a declared `budget: {max_trials: N}` sets the bound).
LARGE_DESIGN = 2000


@dataclass(frozen=True, kw_only=True)
class TrialSpec:
    """One trial to run: an arm at a seed (and scale), with its parameters and command."""

    key: str  # unique within the experiment, e.g. "warmup-s1"
    arm: str
    seed: int
    params: dict[str, Scalar]
    command: list[str]  # argv, no shell
    factors: dict[str, str] = field(default_factory=dict)  # factor -> level name
    scale: str | None = None


@dataclass(frozen=True)
class ArmSpec:
    name: str
    control: bool
    params: dict[str, Scalar]
    factors: dict[str, str]


def arm_specs(design: Design) -> list[ArmSpec]:
    """The arms to run, control first: declared arms, or the runs of the factorial."""
    if design.factors is None:
        arms = design.arms or {}
        ordered = sorted(arms, key=lambda a: (not arms[a].control, list(arms).index(a)))
        return [ArmSpec(a, arms[a].control, dict(arms[a].params), {}) for a in ordered]
    specs = []
    for levels in factorial_runs(design):
        params = {(design.factors[f].param or f): design.factors[f].named_levels()[lv]
                  for f, lv in levels.items()}
        baseline = all(lv == next(iter(design.factors[f].named_levels()))
                       for f, lv in levels.items())
        specs.append(ArmSpec(factor_arm_name(levels), baseline, params, levels))
    return sorted(specs, key=lambda s: not s.control)


def factorial_runs(design: Design) -> list[dict[str, str]]:
    """Level names of every run: the full product, or the fraction the generators define
    (Box, Hunter & Hunter 2005, ch. 6: a generated factor's level is the product of the
    coded levels of its word, -1 = baseline)."""
    factors = design.factors or {}
    names = {f: list(factor.named_levels()) for f, factor in factors.items()}
    if not design.fraction:
        return [dict(zip(names, combo, strict=True))
                for combo in itertools.product(*names.values())]
    from labcoat import stats  # the one parser of generators (only fractions pay for scipy)

    fraction = stats.fractional_factorial(list(factors), generators=design.fraction)
    runs = [{f: names[f][0 if coded < 0 else 1] for f, coded in zip(factors, row, strict=True)}
            for row in fraction.runs.tolist()]
    # in the order of the full product of the base factors (first factor slowest)
    generated = {g.split("=", 1)[0].strip() for g in design.fraction}
    base = [f for f in factors if f not in generated]
    return sorted(runs, key=lambda run: [names[f].index(run[f]) for f in base])


def trial_count(design: Design) -> int:
    """How many trials `expand` would make, without making them (arms x seeds x scales)."""
    arms = len(design.arms or {}) if design.factors is None else len(factorial_runs(design))
    return arms * len(design.seeds) * max(1, len(design.scales))


def size_problem(design: Design) -> str | None:
    """Why the design is too large to start without asking: past its declared budget of
    trials, or past LARGE_DESIGN; None if it is not."""
    count = trial_count(design)
    limit = design.budget.max_trials if design.budget and design.budget.max_trials else None
    if count <= (limit or LARGE_DESIGN):
        return None
    bound = (f"its budget of {limit:,} (`budget: max_trials`)" if limit
             else f"the {LARGE_DESIGN:,} labcoat starts without asking")
    scales = f" x {len(design.scales)} scales" if design.scales else ""
    arms = count // len(design.seeds) // max(1, len(design.scales))
    return (f"the design expands to {count:,} trials ({arms} arms x {len(design.seeds):,} "
            f"seeds{scales}), past {bound}; lower `seeds:` (or arms, scales)")


def expand(design: Design, *, python: str | None = None) -> list[TrialSpec]:
    """Arms x seeds x scales, control first; `python` fills {python} (default: this one)."""
    trials = []
    scales = design.scales or [None]
    for index, arm in enumerate(arm_specs(design)):
        for seed in design.seeds:
            seed_value = seed if design.paired_seeds else seed + index * UNPAIRED_SEED_OFFSET
            for scale in scales:
                params = {**design.params, **arm.params, **(scale.params if scale else {}),
                          "seed": seed_value}
                key = f"{arm.name}-s{seed_value}" + (f"-{scale.name}" if scale else "")
                values = {**params, "arm": arm.name, "trial": key, "experiment": design.name,
                          "scale": scale.name if scale else "",
                          "eval_every": design.eval.every if design.eval else "",
                          "eval_items": design.eval.items_per_task if design.eval else "",
                          "ranks": design.ranks or 1,
                          "eval_budget": _eval_budget(design),
                          "python": python or sys.executable}
                trials.append(TrialSpec(key=key, arm=arm.name, seed=seed_value, params=params,
                                        command=render_command(design.command, values),
                                        factors=arm.factors,
                                        scale=scale.name if scale else None))
    return trials


def render_command(template: str, values: dict[str, Any]) -> list[str]:
    """Split the template into argv first, then fill placeholders per argument.

    Splitting first means a value with spaces stays one argument and is never
    interpreted by a shell.
    """
    return [part.format_map({k: _text(v) for k, v in values.items()})
            for part in shlex.split(template)]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# Optional sections added after the first schema: left out of the hash when absent.
LATER_SECTIONS = ("data", "resources", "ranks", "reference", "shrink")


def _eval_budget(design: Design) -> float:
    """{eval_budget}: the declared fraction, else the default 5% of training time."""
    budget = design.eval.budget if design.eval else None
    return DEFAULT_EVAL_BUDGET if budget is None else budget


def design_hash(design: Design) -> str:
    """sha256 of the validated design: comments and key order do not change it, nor do
    sections added to the schema later while a design leaves them out (`data`, `resources`,
    `ranks`, `eval.budget`, a hypothesis' `bounds` and `predict`)."""
    exclude: dict[str, Any] = {name: True for name in LATER_SECTIONS
                               if getattr(design, name) is None}
    if design.eval is not None and design.eval.budget is None:
        exclude["eval"] = {"budget"}  # added later: designs without it keep their hash
    dumped = design.model_dump(mode="json", exclude=exclude or None)
    for h in [dumped["hypothesis"] or {}, *dumped["hypotheses"]]:
        for later in ("bounds", "predict"):
            if h.get(later, 0) is None:
                del h[later]  # added later: designs without it keep their hash
    canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
