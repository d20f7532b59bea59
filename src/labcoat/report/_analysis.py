"""From stored results to the answer: per-arm intervals, comparisons and a verdict.

The verdict is judged on seeds (Welch's test on each trial's final primary
metric): seeds are the unit an intervention is replicated over. The paired
item-level comparison is shown beside it; it is far tighter but only measures
eval noise for these particular trained models, not training noise.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy.orm import Session

from labcoat import spec, stats, store
from labcoat.spec import Hypothesis
from labcoat.stats import Difference, Interval
from labcoat.store import Experiment, Trial

MACRO = "macro"


@dataclass
class ArmResult:
    arm: str
    trials: list[str]
    values: list[float]  # the primary metric of each finished trial
    overall: Interval | None
    per_task: dict[str, Interval] = field(default_factory=dict)


@dataclass
class Comparison:
    variant: str
    control: str
    seeds: Difference | None  # Welch on per-trial values (verdict)
    items: Difference | None  # paired on shared items (eval noise only)
    per_task: dict[str, tuple[Difference | None, Difference | None]] = field(default_factory=dict)
    p_adjusted: float | None = None
    verdict: str = "inconclusive"
    reason: str = ""


@dataclass
class Analysis:
    experiment: str
    status: str
    hypothesis: Hypothesis | None
    control: str | None
    arms: list[ArmResult]
    comparisons: list[Comparison]
    tasks: list[str]
    excluded: list[tuple[str, str]]  # (trial, why) not counted
    note: str = ""


def analyze(session: Session, experiment: Experiment) -> Analysis:
    """Everything the report shows, computed from the store."""
    status = store.experiment_status(experiment)
    excluded = [(t.key, _why_excluded(t)) for t in experiment.trials if t.status != "done"]
    done = [t for t in experiment.trials if t.status == "done"]
    if not experiment.design_yaml:
        return Analysis(experiment.name, status, None, None, [], [], [], excluded,
                        note="ad-hoc experiment: no design, so no hypothesis to judge")
    design = spec.parse_design(experiment.design_yaml, f"design of {experiment.name}")
    hypothesis = design.hypothesis
    values, items = _trial_values(session, done, hypothesis)
    tasks = sorted({task for per_trial in items.values() for task in per_trial})
    by_arm: dict[str, list[Trial]] = defaultdict(list)
    for trial in done:
        if trial.id in values:
            by_arm[trial.arm].append(trial)
    arms = [_arm_result(arm, by_arm.get(arm, []), values, items, tasks) for arm in design.arms]
    comparisons = [
        _compare(design.control, arm, by_arm, values, items, tasks, hypothesis)
        for arm in design.arms if arm != design.control
    ]
    _adjust_and_judge(comparisons, hypothesis)
    return Analysis(experiment.name, status, hypothesis, design.control, arms, comparisons,
                    tasks, excluded)


def _why_excluded(trial: Trial) -> str:
    attempt = store.last_attempt(trial)
    if trial.status == "failed" and attempt is not None:
        return f"failed ({attempt.cause})"
    return trial.status


ItemScores = dict[int, dict[str, dict[str, float]]]  # trial id -> task -> item -> score


def _trial_values(session: Session, trials: list[Trial], hypothesis: Hypothesis
                  ) -> tuple[dict[int, float], ItemScores]:
    """Each trial's primary metric, and its final per-item scores (if any)."""
    ids = [t.id for t in trials]
    items: ItemScores = defaultdict(lambda: defaultdict(dict))
    for row in store.final_eval_items(session, ids):
        items[row.trial_id][row.task][row.item] = row.score
    if hypothesis.source == "items":
        values = {tid: float(np.mean([np.mean(list(s.values())) for s in per_task.values()]))
                  for tid, per_task in items.items()}
    else:
        values = store.last_values(session, ids, hypothesis.metric)
    return values, items


def _task_mean(items: ItemScores, trial_id: int, task: str) -> float | None:
    scores = items.get(trial_id, {}).get(task)
    return float(np.mean(list(scores.values()))) if scores else None


def _arm_result(arm: str, trials: list[Trial], values: dict[int, float], items: ItemScores,
                tasks: list[str]) -> ArmResult:
    arm_values = [values[t.id] for t in trials]
    per_task = {}
    for task in tasks:
        means = [m for t in trials if (m := _task_mean(items, t.id, task)) is not None]
        if means:
            per_task[task] = stats.mean_interval(means)
    overall = stats.mean_interval(arm_values) if arm_values else None
    return ArmResult(arm, [t.key for t in trials], arm_values, overall, per_task)


def _compare(control: str, variant: str, by_arm: dict[str, list[Trial]],
             values: dict[int, float], items: ItemScores, tasks: list[str],
             hypothesis: Hypothesis) -> Comparison:
    a, b = by_arm.get(control, []), by_arm.get(variant, [])
    comparison = Comparison(variant, control, None, None)
    if len(a) < 2 or len(b) < 2:
        comparison.reason = (f"needs at least 2 finished seeds per arm (have {len(a)} {control}, "
                             f"{len(b)} {variant})")
        return comparison
    comparison.seeds = stats.welch([values[t.id] for t in a], [values[t.id] for t in b])
    paired_tasks = []
    for task in tasks:
        seed_diff = _welch_task(a, b, items, task)
        item_diff = _paired_task(a, b, items, task)
        comparison.per_task[task] = (seed_diff, item_diff)
        if item_diff is not None:
            paired_tasks.append(item_diff)
    if paired_tasks and hypothesis.source == "items":
        comparison.items = stats.macro_average(paired_tasks)
    return comparison


def _welch_task(a: list[Trial], b: list[Trial], items: ItemScores, task: str
                ) -> Difference | None:
    xa = [m for t in a if (m := _task_mean(items, t.id, task)) is not None]
    xb = [m for t in b if (m := _task_mean(items, t.id, task)) is not None]
    return stats.welch(xa, xb) if len(xa) >= 2 and len(xb) >= 2 else None


def _paired_task(a: list[Trial], b: list[Trial], items: ItemScores, task: str
                 ) -> Difference | None:
    """Per-item scores averaged over each arm's seeds, compared on the items all share."""
    score_sets = [items.get(t.id, {}).get(task, {}) for t in a + b]
    shared = sorted(set.intersection(*(set(s) for s in score_sets))) if score_sets else []
    if len(shared) < 2:
        return None
    mean_a = np.mean([[items[t.id][task][i] for i in shared] for t in a], axis=0)
    mean_b = np.mean([[items[t.id][task][i] for i in shared] for t in b], axis=0)
    return stats.paired_difference(mean_a, mean_b)


def _adjust_and_judge(comparisons: list[Comparison], hypothesis: Hypothesis) -> None:
    tested = [c for c in comparisons if c.seeds is not None]
    adjusted = stats.holm([c.seeds.p_value for c in tested]) if tested else []
    for comparison, p in zip(tested, adjusted, strict=True):
        comparison.p_adjusted = p
        comparison.verdict, comparison.reason = _verdict(comparison.seeds, p, hypothesis,
                                                         len(comparisons) > 1)


def _verdict(diff: Difference, p: float, hypothesis: Hypothesis, corrected: bool
             ) -> tuple[str, str]:
    wanted = 1 if hypothesis.direction == "increase" else -1
    p_text = f"p={p:.3g}" + (" Holm-adjusted" if corrected else "")
    effect = (f"difference {diff.estimate:+.4g}, {diff.ci:.0%} CI "
              f"[{diff.low:+.4g}, {diff.high:+.4g}] over {diff.n} seeds, {p_text}")
    if p < hypothesis.alpha and np.sign(diff.estimate) == wanted:
        return "supported", f"{effect} < {hypothesis.alpha:g}, in the predicted direction"
    if p < hypothesis.alpha:
        return "refuted", f"{effect} < {hypothesis.alpha:g}, opposite to the predicted direction"
    return "inconclusive", (
        f"{effect} >= {hypothesis.alpha:g}: the data cannot tell the arms apart; "
        "more seeds would narrow the interval"
    )
