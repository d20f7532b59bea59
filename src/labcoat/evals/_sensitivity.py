"""Prompt-format sensitivity: per-template scores with CIs, the spread across templates,
and conclusions ("B beats A") that flip or lose significance with the template.

Everything is paired over items: each arm answered the same items under every
template, so item difficulty cancels both in the spread (labcoat.stats.
spread_of_means) and in each template's B - A (labcoat.stats.paired_difference,
Miller 2024). A conclusion is judged per template at the unadjusted CI level, as
someone who ran only that template would have judged it:

- "flips sign": significant under some template while another template's
  estimate has the opposite sign;
- "loses significance": significant under some templates, not under others;
- "consistent": the same significant sign under every template, or significant
  under none.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from labcoat import stats
from labcoat.evals._prompts import TemplateScores
from labcoat.stats import Difference, Interval, Spread, StatsWarning


@dataclass
class ArmSensitivity:
    arm: str
    per_template: dict[str, Interval]
    spread: Spread


@dataclass
class TemplateComparison:
    """variant - control under each template, and whether the conclusion holds."""

    variant: str
    control: str
    per_template: dict[str, Difference]
    verdict: str  # "consistent", "flips sign", "loses significance"
    reason: str


@dataclass
class Sensitivity:
    templates: list[str]
    items: int
    arms: list[ArmSensitivity]
    comparisons: list[TemplateComparison]
    warnings: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[TemplateComparison]:
        return [c for c in self.comparisons if c.verdict != "consistent"]


def format_sensitivity(scores: Mapping[str, TemplateScores], *, control: str | None = None,
                       ci: float = 0.95, seed: int = 0) -> Sensitivity:
    """Per arm: template means with CIs and their spread; each other arm against `control`
    (default: the first arm) under each template.

    scores: {arm: TemplateScores}; only the (task, item) rows and templates that every
    arm has are used.
    """
    if not scores:
        raise ValueError("no arms to analyze")
    arms = list(scores)
    control = control or arms[0]
    if control not in scores:
        raise ValueError(f"control {control!r} is not one of the arms {', '.join(arms)}")
    names = [t for t in scores[control].templates if all(t in s.templates for s in
                                                         scores.values())]
    if len(names) < 2:
        raise ValueError("prompt sensitivity needs 2 or more templates scored by every arm")
    keys = _shared_keys(scores)
    if len(keys) < 2:
        raise ValueError("the arms share fewer than 2 items; score the same items in every arm")
    matrices = {arm: _matrix(s, keys, names) for arm, s in scores.items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StatsWarning)
        per_arm = [ArmSensitivity(arm, {name: stats.eval_mean(m[:, j], ci=ci)
                                        for j, name in enumerate(names)},
                                  stats.spread_of_means(m, ci=ci, seed=seed))
                   for arm, m in matrices.items()]
        comparisons = [_compare(matrices[control], matrices[arm], names, arm, control, ci)
                       for arm in arms if arm != control]
    found = [str(w.message) for w in caught if issubclass(w.category, StatsWarning)]
    return Sensitivity(names, len(keys), per_arm, comparisons, list(dict.fromkeys(found)))


def _shared_keys(scores: Mapping[str, TemplateScores]) -> list[tuple[str, str]]:
    first = next(iter(scores.values()))
    keys = list(zip(first.tasks, first.items, strict=True))
    others = [set(zip(s.tasks, s.items, strict=True)) for s in scores.values()]
    return [k for k in keys if all(k in o for o in others)]


def _matrix(s: TemplateScores, keys: list[tuple[str, str]], names: list[str]) -> np.ndarray:
    row = {k: i for i, k in enumerate(zip(s.tasks, s.items, strict=True))}
    col = [s.templates.index(n) for n in names]
    return s.scores[np.ix_([row[k] for k in keys], col)]


def _compare(a: np.ndarray, b: np.ndarray, names: list[str], variant: str, control: str,
             ci: float) -> TemplateComparison:
    diffs = {name: stats.paired_difference(a[:, j], b[:, j], ci=ci)
             for j, name in enumerate(names)}
    significant = [n for n, d in diffs.items() if d.excludes_zero()]
    verdict, reason = "consistent", ""
    if significant:
        sign = np.sign(diffs[significant[0]].estimate)
        against = [n for n, d in diffs.items() if np.sign(d.estimate) == -sign]
        if against:
            verdict = "flips sign"
            reason = (f"{variant} - {control} is {_signed(diffs[significant[0]])} under "
                      f"{significant[0]} but {_signed(diffs[against[0]])} under {against[0]}")
        elif len(significant) < len(names):
            lost = [n for n in names if n not in significant]
            verdict = "loses significance"
            reason = (f"significant under {', '.join(significant)} but not under "
                      f"{', '.join(lost)}")
        else:
            reason = f"significant with the same sign under all {len(names)} templates"
    else:
        reason = f"not significant under any of the {len(names)} templates"
    return TemplateComparison(variant, control, diffs, verdict, reason)


def _signed(d: Difference) -> str:
    return f"{d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
