"""Aggregate scores over runs x tasks: rliable's point estimates, exactly.

Definitions follow Agarwal et al. (NeurIPS 2021), "Deep Reinforcement Learning
at the Edge of the Statistical Precipice", as implemented in rliable's
`metrics.py`, so numbers agree with papers that used rliable:

- IQM: the 25%-trimmed mean of all runs x tasks scores pooled together
  (`scipy.stats.trim_mean(scores, 0.25, axis=None)`).
- mean, median: of the per-task means (each task's mean over its runs).
- optimality gap: gamma - mean(min(scores, gamma)) over all runs and tasks.
- probability of improvement P(X > Y): per task, the Mann-Whitney U statistic
  over run pairs divided by n_x * n_y (ties count 1/2), averaged over tasks.

Every function takes scores: (num_runs, num_tasks) — one row per run (seed),
one column per task — and returns a float. Intervals: `_bootstrap.py`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

# rliable's IQM trims 25% at each end (Agarwal et al. 2021: the interquartile mean).
IQM_CUT = 0.25


def as_scores(scores: ArrayLike, name: str = "scores") -> np.ndarray:
    """Validate and return scores as a float (num_runs, num_tasks) array."""
    array = np.asarray(scores, dtype=float)
    if array.ndim != 2:
        hint = " e.g. x[:, None] for one task" if array.ndim == 1 else ""
        raise ValueError(
            f"{name} has shape {array.shape}; pass a 2-D array (num_runs, num_tasks),{hint}"
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"{name} has shape {array.shape}: need at least one run and one task")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf; drop or fix failed runs first")
    return array


def trimmed_count(n: int) -> int:
    """How many values scipy.stats.trim_mean(proportiontocut=0.25) cuts at each end of n."""
    return int(IQM_CUT * n)


# Batched forms: samples (batch, num_runs, num_tasks) -> (batch,). The bootstrap evaluates
# its resamples and the public functions evaluate the data through the same code, so a
# resample identical to the data reproduces the point estimate bit for bit (BCa's bias
# correction counts replicates equal to the point).


def batch_iqm(samples: np.ndarray) -> np.ndarray:
    # Sorting each pooled row beats np.partition here (numpy's SIMD sort on ~10^2-10^3
    # values); the kept block equals scipy.stats.trim_mean's lowercut:uppercut slice.
    flat = np.sort(samples.reshape(samples.shape[0], -1), axis=1)
    cut = trimmed_count(flat.shape[1])
    return flat[:, cut : flat.shape[1] - cut].mean(axis=1)


def batch_mean(samples: np.ndarray, task_means: np.ndarray | None = None) -> np.ndarray:
    means = samples.mean(axis=1) if task_means is None else task_means
    return means.mean(axis=1)


def batch_median(samples: np.ndarray, task_means: np.ndarray | None = None) -> np.ndarray:
    means = samples.mean(axis=1) if task_means is None else task_means
    # np.median's definition (middle value, or the mean of the two middle values), via a
    # full sort, which is about twice as fast as np.median's partition on short rows.
    ordered = np.sort(means, axis=1)
    tasks = ordered.shape[1]
    return (ordered[:, (tasks - 1) // 2] + ordered[:, tasks // 2]) / 2


def batch_optimality_gap(samples: np.ndarray, gamma: float) -> np.ndarray:
    # Pooled over runs and tasks, as rliable (equal to the mean of per-task means, since
    # every task has the same number of runs).
    clipped = np.minimum(samples, gamma)
    return gamma - clipped.reshape(clipped.shape[0], -1).mean(axis=1)


def batch_metrics(samples: np.ndarray, names: list[str], gamma: float) -> dict[str, np.ndarray]:
    """Evaluate the named built-in metrics on samples (batch, runs, tasks), sharing work."""
    out: dict[str, np.ndarray] = {}
    task_means = samples.mean(axis=1) if ("mean" in names or "median" in names) else None
    for name in names:
        if name == "iqm":
            out[name] = batch_iqm(samples)
        elif name == "mean":
            out[name] = batch_mean(samples, task_means)
        elif name == "median":
            out[name] = batch_median(samples, task_means)
        elif name == "optimality_gap":
            out[name] = batch_optimality_gap(samples, gamma)
        else:  # pragma: no cover - callers validate names
            raise ValueError(f"unknown metric {name!r}")
    return out


def aggregate_iqm(scores: ArrayLike) -> float:
    """Interquartile mean: 25%-trimmed mean of all scores pooled over runs and tasks.

    scores: (num_runs, num_tasks). Equals scipy.stats.trim_mean(scores, 0.25, axis=None)
    (rliable's `aggregate_iqm`).
    """
    return float(batch_iqm(as_scores(scores)[None])[0])


def aggregate_mean(scores: ArrayLike) -> float:
    """Mean over tasks of the per-task mean score. scores: (num_runs, num_tasks)."""
    return float(batch_mean(as_scores(scores)[None])[0])


def aggregate_median(scores: ArrayLike) -> float:
    """Median over tasks of the per-task mean score. scores: (num_runs, num_tasks)."""
    return float(batch_median(as_scores(scores)[None])[0])


def aggregate_optimality_gap(scores: ArrayLike, gamma: float = 1.0) -> float:
    """How far scores fall short of `gamma`: gamma - mean(min(scores, gamma)).

    scores: (num_runs, num_tasks), averaged over all runs and tasks. Scores above
    gamma count as gamma (Agarwal et al. 2021: beating the target brings no credit).
    """
    return float(batch_optimality_gap(as_scores(scores)[None], check_gamma(gamma))[0])


def improvement_kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """K[t, i, j] = 1 if x[i, t] > y[j, t], 1/2 if equal, else 0.

    x: (runs_x, tasks), y: (runs_y, tasks) -> (tasks, runs_x, runs_y). The mean of
    K[t] is the Mann-Whitney U of task t over runs_x * runs_y.
    """
    xt, yt = x.T[:, :, None], y.T[:, None, :]
    return (xt > yt) + 0.5 * (xt == yt)


def aggregate_probability_of_improvement(x: ArrayLike, y: ArrayLike) -> float:
    """P(X > Y): per task U / (n_x n_y) (ties count 1/2), averaged over tasks.

    x: (runs_x, tasks), y: (runs_y, tasks); run counts may differ, tasks must match.
    Equals rliable's `probability_of_improvement` (which calls scipy's mannwhitneyu).
    """
    xs, ys = check_pair(x, y)
    return float(improvement_kernel(xs, ys).mean(axis=(1, 2)).mean())


def check_pair(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = as_scores(x, "x"), as_scores(y, "y")
    if xs.shape[1] != ys.shape[1]:
        raise ValueError(
            f"x has {xs.shape[1]} tasks and y has {ys.shape[1]}: "
            "pass scores on the same tasks, columns in the same order"
        )
    return xs, ys


def check_gamma(gamma: float) -> float:
    value = float(gamma)
    if not np.isfinite(value):
        raise ValueError(f"gamma={gamma!r} must be a finite threshold, e.g. 1.0")
    return value
