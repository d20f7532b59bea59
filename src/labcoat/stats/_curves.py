"""Comparing learning curves run by run, never step by step.

Steps of one training run are not independent samples: a run that starts
ahead tends to stay ahead (seed offsets), and neighbouring steps share noise
(autocorrelation). A test on pooled step values counts thousands of
"samples" where there are only a handful of runs, and finds differences
between two groups of the *same* algorithm (Henderson et al. 2018, "Deep
Reinforcement Learning that Matters", section 6). The sound unit is the run:
summarize each curve to one number, then compare those numbers.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike
from scipy import integrate

from labcoat.stats._seeds import welch
from labcoat.stats._types import Difference

SUMMARIES = ("mean", "final", "auc")


def _curves(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be a (runs, steps) array, one row per run; got shape {array.shape}. "
            "Flattened step values lose which run they came from: reshape them per run."
        )
    if array.shape[0] < 2 or array.shape[1] < 1:
        raise ValueError(f"{name} has shape {array.shape}; need at least 2 runs and 1 step")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf; drop failed runs or fill logging gaps first")
    return array


def summarize_curves(curves: ArrayLike, summary: str = "mean",
                     steps: ArrayLike | None = None) -> np.ndarray:
    """One number per run: curves (runs, steps) -> (runs,).

    summary: "mean" over steps; "final" value at the last step; "auc" area
    under the curve by the trapezoid rule over `steps` (steps,) (default
    0, 1, ..., steps-1), in metric * step units.
    """
    if summary not in SUMMARIES:
        raise ValueError(f"summary={summary!r} is not known; choose one of {', '.join(SUMMARIES)}")
    x = _curves(curves, "curves")
    if summary == "mean":
        return x.mean(axis=1)
    if summary == "final":
        return x[:, -1].copy()
    t = np.arange(x.shape[1], dtype=float) if steps is None else np.asarray(steps, dtype=float)
    if t.shape != (x.shape[1],) or not np.all(np.diff(t) > 0):
        raise ValueError(
            f"steps must be {x.shape[1]} increasing step numbers, one per column; got {t.shape}"
        )
    return integrate.trapezoid(x, t, axis=1)  # np.trapezoid needs numpy 2; we allow 1.26


def compare_curves(a: ArrayLike, b: ArrayLike, *, summary: str = "mean", ci: float = 0.95,
                   steps: ArrayLike | None = None) -> Difference:
    """Welch's test on per-run summaries of two groups of learning curves (b minus a).

    a: (runs_a, steps), b: (runs_b, steps), one row per run, the same steps for
    both. Each run becomes one number (`summarize_curves`), so the test has as
    many samples as runs, never as many as steps. Warns (StatsWarning) when a
    group has fewer than 5 runs.
    """
    x, y = _curves(a, "a"), _curves(b, "b")
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"a has {x.shape[1]} steps and b has {y.shape[1]}; compare curves over the same "
            "steps (truncate both to the shorter run)"
        )
    result = welch(summarize_curves(x, summary, steps), summarize_curves(y, summary, steps),
                   ci=ci)
    return replace(result, method=f"welch(per-run {summary})")
