"""Training and eval curves for plots: per arm with a seed band, and per trial.

Per arm, the steps to draw are chosen by LTTB on the arm's longest trial (its
shape, spikes included, survives), and every trial of the arm is then read at
those steps only, by index seeks (`store.metric_at_steps`): the page costs the
same for 1,000 or 1,000,000 points per trial. At each step the line is the mean
over the trials that logged it and the band runs from the lowest to the highest
trial: a description of seed-to-seed spread, not a test (steps of one run are
not independent samples; the verdict compares runs, see stats._curves). One
trial's curve is all its points thinned by LTTB.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from labcoat import store
from labcoat.analysis._lttb import downsample
from labcoat.store import Experiment, Trial

ARM_POINTS = 200  # per arm curve: a plot is a few hundred pixels wide
TRIAL_POINTS = 1000  # per trial curve


def arm_curves(session: Session, experiment: Experiment, metric: str, *,
               points: int = ARM_POINTS) -> dict[str, dict[str, Any]]:
    """{arm: {"step", "mean", "low", "high": lists, "trials": n}} for one metric, at most
    `points` steps per arm; arms whose trials logged nothing of it are left out."""
    by_arm: dict[str, list[Trial]] = defaultdict(list)
    for t in experiment.trials:
        by_arm[t.arm].append(t)
    out = {}
    for arm, trials in by_arm.items():
        steps = _steps_to_draw(session, trials, metric, points)
        rows = store.metric_at_steps(session, [t.id for t in trials], metric, steps)
        at: dict[int, list[float]] = defaultdict(list)
        for _trial, step, value in rows:
            if np.isfinite(value):
                at[step].append(value)
        kept = sorted(at)
        if not kept:
            continue
        values = [np.array(at[s]) for s in kept]
        out[arm] = {"step": [float(s) for s in kept],
                    "mean": [float(v.mean()) for v in values],
                    "low": [float(v.min()) for v in values],
                    "high": [float(v.max()) for v in values],
                    "trials": len({trial for trial, _, _ in rows})}
    return out


def _steps_to_draw(session: Session, trials: list[Trial], metric: str, points: int
                   ) -> list[int]:
    """LTTB's choice of steps on the longest trial (by last step reached) that logged the
    metric; trials are tried longest first."""
    def reached(t: Trial) -> int:
        return max((a.last_step or 0 for a in t.attempts), default=-1)

    for trial in sorted(trials, key=reached, reverse=True):
        steps, values = store.metric_series(session, [trial.id], metric).get(trial.id, ([], []))
        if steps:
            x, _ = downsample(np.array(steps, dtype=float), np.array(values, dtype=float),
                              points)
            return [int(s) for s in x]
    return []


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
