"""Training and eval curves for plots: per arm with a seed band, and per trial.

Per arm, each trial's metric is first averaged in equal step buckets by the
database (`store.metric_buckets`), then the arm's line is the mean over its
trials of those bucket means and its band runs from the lowest to the highest
trial: a description of seed-to-seed spread, not a test (steps of one run are
not independent samples; the verdict compares runs, see stats._curves). One
trial's curve is its own points, thinned by LTTB for the browser.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from labcoat import store
from labcoat.report._lttb import downsample
from labcoat.store import Experiment, Trial

BUCKETS = 200  # per arm curve: a plot is a few hundred pixels wide
TRIAL_POINTS = 1000  # per trial curve, after LTTB


def arm_curves(session: Session, experiment: Experiment, metric: str, *,
               buckets: int = BUCKETS) -> dict[str, dict[str, Any]]:
    """{arm: {"step", "mean", "low", "high": lists, "trials": n}} for one metric; trials
    that logged nothing of it are left out, and so are arms without any."""
    arm_of = {t.id: t.arm for t in experiment.trials}
    rows = store.metric_buckets(session, list(arm_of), metric, buckets)
    per_arm: dict[str, dict[int, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list))
    counted: dict[str, set[int]] = defaultdict(set)
    for trial_id, bucket, step, mean, _low, _high in rows:
        if mean is not None:
            per_arm[arm_of[trial_id]][bucket].append((step, mean))
            counted[arm_of[trial_id]].add(trial_id)
    out = {}
    for arm in dict.fromkeys(t.arm for t in experiment.trials):
        if arm not in per_arm:
            continue
        by_bucket = per_arm[arm]
        order = sorted(by_bucket)
        values = [np.array([v for _, v in by_bucket[b]]) for b in order]
        out[arm] = {"step": [float(np.mean([s for s, _ in by_bucket[b]])) for b in order],
                    "mean": [float(v.mean()) for v in values],
                    "low": [float(v.min()) for v in values],
                    "high": [float(v.max()) for v in values],
                    "trials": len(counted[arm])}
    return out


def trial_curves(session: Session, trial: Trial, *, points: int = TRIAL_POINTS
                 ) -> dict[str, dict[str, list[float | None]]]:
    """{metric: {"step", "value"}} of one trial, each reduced to at most `points` by LTTB
    (a NaN is kept, as None, so the plot shows the gap)."""
    out = {}
    for name in store.metric_names(session, [trial.id]):
        steps, values = store.metric_series(session, [trial.id], name).get(trial.id, ([], []))
        x, y = downsample(np.array(steps, dtype=float), np.array(values, dtype=float), points)
        out[name] = {"step": x.tolist(),
                     "value": [v if np.isfinite(v) else None for v in y.tolist()]}
    return out
