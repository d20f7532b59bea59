"""Checks across the fields of a design: what makes a design file wrong, not just weak.

Each problem names its rule, the key path in the file and the fix. `load_design`
refuses a design with any of them; `labcoat lint` lists them beside its
findings about weak designs.
"""

from __future__ import annotations

import re
import shlex
import string
from dataclasses import dataclass

from labcoat.spec._schema import BUILTIN_PLACEHOLDERS, Design

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    rule: str
    path: Path_
    message: str


def design_problems(design: Design) -> list[Problem]:
    """Every cross-field error of `design`, in file order as far as possible."""
    problems: list[Problem] = []
    problems += _arms_or_factors(design)
    problems += _params(design)
    problems += _command(design)
    problems += _hypotheses(design)
    problems += _fraction(design)
    problems += _shrink(design)
    return problems


def _arms_or_factors(design: Design) -> list[Problem]:
    if design.arms is None and design.factors is None:
        return [Problem("no-arms", (), "the design declares neither `arms:` nor `factors:`; add "
                        "arms (one with `control: true`) or factors with levels")]
    if design.arms is not None and design.factors is not None:
        return [Problem("arms-and-factors", ("factors",), "declare either `arms:` or `factors:`, "
                        "not both (a factorial design makes its own arms)")]
    if design.arms is None:
        return []
    problems = []
    if len(design.arms) < 2:
        problems.append(Problem("single-arm", ("arms",), "one arm leaves nothing to compare; add "
                                "a variant arm, or a control to compare against"))
    for name in design.arms:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", str(name)):
            problems.append(Problem("bad-arm-name", ("arms", name), f"arm name {name!r} may use "
                                    "only letters, digits, '.', '_', '-'"))
    controls = [name for name, arm in design.arms.items() if arm.control]
    if not controls:
        problems.append(Problem("no-control", ("arms",), "exactly one arm must be the control, "
                                "found none; mark the baseline arm with `control: true`"))
    elif len(controls) > 1:
        problems.append(Problem("two-controls", ("arms", controls[1], "control"),
                                f"exactly one arm must be the control, found {len(controls)} "
                                f"({', '.join(controls)}); keep `control: true` on one"))
    return problems


def _params(design: Design) -> list[Problem]:
    problems = []
    known = ", ".join(design.params) or "none declared"

    def undeclared(path: Path_, owner: str, key: str) -> Problem:
        return Problem("undeclared-param", path, f"{owner} sets {key!r}, which is not in params "
                       f"(known: {known}); declare it under `params:` or fix the spelling")

    for key in design.params:
        if key in BUILTIN_PLACEHOLDERS:
            problems.append(Problem("reserved-param", ("params", key), f"param {key!r} is "
                                    f"reserved (labcoat fills it in: "
                                    f"{', '.join(BUILTIN_PLACEHOLDERS)}); rename it"))
    for name, arm in (design.arms or {}).items():
        problems += [undeclared(("arms", name, "params", k), f"arm {name!r}", k)
                     for k in arm.params if k not in design.params]
    for name, factor in (design.factors or {}).items():
        param = factor.param or name
        if param not in design.params:
            problems.append(undeclared(("factors", name), f"factor {name!r}", param))
    for i, scale in enumerate(design.scales):
        problems += [undeclared(("scales", i, "params", k), f"scale {scale.name!r}", k)
                     for k in scale.params if k not in design.params]
    return problems


def _command(design: Design) -> list[Problem]:
    try:
        shlex.split(design.command)
        fields = placeholders(design.command)
    except ValueError as e:
        return [Problem("bad-command", ("command",), str(e))]
    known = set(design.params) | set(BUILTIN_PLACEHOLDERS)
    problems = [Problem("unknown-placeholder", ("command",), f"command uses {{{f}}}, which is "
                        f"not a param; add `{f}` under `params:` or use one of "
                        f"{', '.join(sorted(known))}")
                for f in fields if f not in known]
    declared = {"eval_every": design.eval and design.eval.every,
                "eval_items": design.eval and design.eval.items_per_task}
    for name, value in declared.items():
        if name in fields and not value:
            key = "every" if name == "eval_every" else "items_per_task"
            problems.append(Problem("undeclared-eval", ("command",), f"command uses {{{name}}} "
                                    f"but the design declares no `eval: {{{key}: ...}}`"))
    if design.eval and design.eval.budget is not None and "eval_budget" not in fields:
        problems.append(Problem("unused-eval-budget", ("eval", "budget"), "the design declares "
                                "`eval.budget` but the command never passes {eval_budget}, so "
                                "trials would not get it; add e.g. `--eval-budget {eval_budget}` "
                                "to the command or remove `budget`"))
    return problems


def _hypotheses(design: Design) -> list[Problem]:
    problems = []
    targets = set(design.arms or {}) | set(design.factors or {})
    ids = [h.id for h in design.all_hypotheses]
    for i, h in enumerate(design.hypotheses):
        path = ("hypotheses", i)
        if h.id and ids.count(h.id) > 1:
            problems.append(Problem("duplicate-hypothesis", path + ("id",), f"hypothesis id "
                                    f"{h.id!r} is used twice; give each hypothesis its own id"))
    for i, h in enumerate(design.all_hypotheses):
        path = ("hypothesis",) if design.hypothesis and i == 0 else (
            "hypotheses", i - bool(design.hypothesis))
        for name in h.compare or []:
            if name not in targets:
                problems.append(Problem("unknown-comparison", path + ("compare",), f"hypothesis "
                                        f"{h.id} compares {name!r}, which is not an arm or factor"
                                        f" (known: {', '.join(sorted(targets)) or 'none'})"))
    return problems


def _fraction(design: Design) -> list[Problem]:
    problems = []
    factors = design.factors or {}
    for i, pair in enumerate(design.interactions):
        for name in pair:
            if name not in factors:
                problems.append(Problem("bad-interaction", ("interactions", i), f"interaction "
                                        f"names {name!r}, which is not a factor"))
    if not design.fraction:
        return problems
    two_level = [f for f, factor in factors.items() if len(factor.named_levels()) == 2]
    if len(two_level) != len(factors):
        problems.append(Problem("bad-fraction", ("fraction",), "a fractional factorial needs "
                                "two-level factors; give each factor exactly two levels"))
    # stats owns the grammar of generators and the defining relation (one parser): a
    # generator on its own first, so the error names its line; then the set together
    # (e.g. two generators that alias two main effects)
    from labcoat import stats  # only designs with `fraction:` pay for scipy

    for i, text in enumerate(design.fraction):
        try:
            stats.fractional_factorial(list(factors), generators=[text])
        except ValueError as e:
            problems.append(Problem("bad-fraction", ("fraction", i), str(e)))
    if not problems:
        try:
            stats.fractional_factorial(list(factors), generators=design.fraction)
        except ValueError as e:
            problems.append(Problem("bad-fraction", ("fraction",), str(e)))
    return problems


def _shrink(design: Design) -> list[Problem]:
    """The `shrink:` block names declared params: numbers at or above their floors, and
    features distinct from them."""
    if design.shrink is None:
        return []
    problems = []
    known = ", ".join(design.params) or "none declared"
    for name, floor in design.shrink.params.items():
        path = ("shrink", "params", name)
        value = design.params.get(name)
        if name not in design.params:
            problems.append(Problem("shrink-param", path, f"shrink names {name!r}, which is not "
                                    f"in params (known: {known}); declare it or fix the spelling"))
        elif isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(Problem("shrink-param", path, f"shrink param {name!r} is "
                                    f"{value!r}, not a number: only numbers halve (list "
                                    "on/off params under `features:`)"))
        elif floor <= 0 or value < floor:
            problems.append(Problem("shrink-param", path, f"shrink floor {floor!r} of {name!r} "
                                    f"must be > 0 and at most its value {value!r}"))
    for name in design.shrink.off_values():
        path = ("shrink", "features", name) if isinstance(design.shrink.features, dict) \
            else ("shrink", "features")
        if name not in design.params:
            problems.append(Problem("shrink-feature", path, f"shrink feature {name!r} is not in "
                                    f"params (known: {known}); declare it or fix the spelling"))
        elif name in design.shrink.params:
            problems.append(Problem("shrink-feature", path, f"{name!r} is both a shrink param "
                                    "and a feature; keep it in one of the two"))
    return problems


def placeholders(template: str) -> list[str]:
    """The {names} a command template uses; positional `{}` is rejected."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as e:
        raise ValueError(
            f"command template is malformed ({e}); write literal braces as {{{{ }}}}"
        ) from None
    for field in fields:
        if not field.isidentifier():
            raise ValueError(f"command placeholder {{{field}}} must be a parameter name")
    return fields
