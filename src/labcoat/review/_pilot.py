"""Variances from pilot data: an earlier experiment in the store, for power and planning."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from labcoat import spec, stats, store
from labcoat.errors import LabcoatError
from labcoat.spec import Hypothesis
from labcoat.store import Experiment, Trial


@dataclass(frozen=True)
class Pilot:
    """What a pilot says about one hypothesis' metric.

    seed_sd: pooled per-seed SD of the metric across arms (None: fewer than 2 seeds in an arm).
    omega2: variance of the per-item score difference between two arms (Miller 2024),
      from the pilot's final eval items averaged over seeds; None without item data.
    items_per_task: items the pilot evaluated per task.
    paired_sd: SD of the per-seed differences variant - control on the seeds both ran (same
      seed and scale), what a paired t test (`seed_analysis: paired`) divides by. Pooled over
      the variants: sqrt(sum_v (n_v - 1) s_v^2 / sum_v (n_v - 1)), the variance of each
      variant's differences weighted by its degrees of freedom, like `seed_sd`. Pooled
      rather than the largest because with a few seeds the largest of several noisy SDs
      overstates the noise; a variant much noisier than the others still shows in the
      report's own power note. None when no variant shares 2 seeds with the control, or the
      pilot's control arm is unknown (no stored design).
    paired_seeds: the most seeds a variant shares with the control (0 without paired_sd).
    never_logged: why the pilot's finished trials give no value of the metric at all (see
      `never_logged`); None when some did, or the pilot has no finished trial.
    finished: the pilot's finished trials.
    """

    experiment: str
    seed_sd: float | None
    seeds: int
    omega2: float | None
    items_per_task: int | None
    paired_sd: float | None = None
    paired_seeds: int = 0
    never_logged: str | None = None
    finished: int = 0


def pilot_for(session: Session, experiment: Experiment, hypothesis: Hypothesis) -> Pilot:
    done = [t for t in experiment.trials if t.status == "done"]
    ids = [t.id for t in done]
    per_item: dict[str, dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    per_trial: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    arm_of = {t.id: t.arm for t in done}
    for row in store.final_eval_items(session, ids):
        per_item[arm_of[row.trial_id]][(row.task, row.item)].append(row.score)
        per_trial[row.trial_id][row.task].append(row.score)
    if hypothesis.source == "items":
        values = {tid: float(np.mean([np.mean(s) for s in tasks.values()]))
                  for tid, tasks in per_trial.items()}
    else:
        values = store.last_values(session, ids, hypothesis.metric)
    by_arm: dict[str, list[float]] = defaultdict(list)
    for tid, value in values.items():
        by_arm[arm_of[tid]].append(value)
    paired_sd, paired_seeds = _paired_sd(done, values, _control(experiment))
    missing = never_logged(session, done, hypothesis) if done and not values else None
    return Pilot(experiment.name, _pooled_sd(by_arm), min(map(len, by_arm.values()), default=0),
                 _omega2(per_item), _items_per_task(per_item), paired_sd, paired_seeds,
                 missing, len(done))


def never_logged(session: Session, done: list[Trial], hypothesis: Hypothesis) -> str:
    """Why finished trials give no value for a hypothesis: its metric was never logged (and
    what was), or no per-item scores for `source: items`. Said by the report's verdict and by
    `labcoat lint` on a pilot; call it when none of `done` has a value."""
    if hypothesis.source == "items":
        return (f"none of the {len(done)} finished trials logged per-item scores "
                "(run.log_items), which source: items judges; log them, or use source: "
                "scalar with a metric the script logs")
    logged = store.metric_names(session, [t.id for t in done])
    shown = ", ".join(logged[:8]) + (", ..." if len(logged) > 8 else "") if logged else "none"
    return (f"metric {hypothesis.metric!r} was never logged by the {len(done)} finished "
            f"trials (they logged: {shown}); fix the hypothesis' metric or the script's "
            "run.log")


def _control(experiment: Experiment) -> str | None:
    """The pilot's control arm, from its stored design (None if it has none or is unreadable)."""
    if not experiment.design_yaml:
        return None
    try:
        return spec.parse_design(experiment.design_yaml, f"design of {experiment.name}").control
    except LabcoatError:
        return None


def _paired_sd(trials: list[Trial], values: dict[int, float],
               control: str | None) -> tuple[float | None, int]:
    """Pooled SD of the per-seed differences variant - control (see `Pilot.paired_sd`)."""
    by_arm: dict[str, dict[tuple, float]] = defaultdict(dict)
    for t in trials:
        if t.id in values and t.seed is not None:
            by_arm[t.arm][(t.seed, t.scale)] = values[t.id]
    if control is None or control not in by_arm:
        return None, 0
    base = by_arm[control]
    ss, df, most = 0.0, 0, 0
    for arm, runs in by_arm.items():
        shared = sorted(set(runs) & set(base), key=repr)
        if arm == control or len(shared) < 2:
            continue
        diffs = np.array([runs[k] - base[k] for k in shared])
        ss += float(np.sum((diffs - diffs.mean()) ** 2))
        df += len(shared) - 1
        most = max(most, len(shared))
    if df == 0:
        return None, 0
    return float(np.sqrt(ss / df)), most


def _pooled_sd(by_arm: dict[str, list[float]]) -> float | None:
    groups = [np.asarray(v) for v in by_arm.values() if len(v) >= 2]
    if not groups:
        return None
    ss = sum(float(np.sum((g - g.mean()) ** 2)) for g in groups)
    df = sum(len(g) - 1 for g in groups)
    return float(np.sqrt(ss / df)) if df > 0 else None


def _omega2(per_item: dict[str, dict[tuple[str, str], list[float]]]) -> float | None:
    """Paired item-difference variance between the first two arms; with one arm, twice the
    item variance (the difference of two independent models: conservative)."""
    arms = list(per_item)
    if not arms:
        return None
    if len(arms) == 1:
        scores = np.array([np.mean(v) for v in per_item[arms[0]].values()])
        return float(2 * scores.var(ddof=1)) if scores.size > 1 else None
    a, b = per_item[arms[0]], per_item[arms[1]]
    shared = sorted(set(a) & set(b))
    if len(shared) < 2:
        return None
    xa = np.array([np.mean(a[k]) for k in shared])
    xb = np.array([np.mean(b[k]) for k in shared])
    return float(stats.pilot_variances(xa, xb).omega2)


def _items_per_task(per_item: dict[str, dict[tuple[str, str], list[float]]]) -> int | None:
    if not per_item:
        return None
    counts: dict[str, int] = defaultdict(int)
    for task, _ in next(iter(per_item.values())):
        counts[task] += 1
    return min(counts.values()) if counts else None
