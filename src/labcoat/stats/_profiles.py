"""Performance profiles with stratified-bootstrap bands (Agarwal et al. 2021).

A performance profile is the fraction of scores above a threshold tau, for a grid
of taus: a whole score distribution instead of one aggregate. As in rliable's
`create_performance_profile`:
- kind="runs" (rliable's default "score distribution"): the fraction of all
  runs x tasks scores above tau, i.e. per task the fraction of runs above tau,
  averaged over tasks. Lower variance than the alternative, and unbiased.
- kind="task_means" (rliable's "average-score distribution"): the fraction of
  tasks whose mean score over runs is above tau.

Bands come from the same stratified bootstrap as `interval_estimates`
(`_bootstrap.py`), evaluated for all taus at once: with draw counts
w (reps, runs x tasks), the run-score profile is w @ 1[scores > tau] / (runs x tasks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from labcoat.stats._bootstrap import (
    Method,
    Seed,
    _acceleration,
    _bounds,
    _check_method,
    _check_reps,
    _check_scores,
    _index_chunks,
    _resample,
    _rng_factory,
    guard_runs,
    warn_undefined_bca,
)
from labcoat.stats._checks import check_ci

KINDS = ("runs", "task_means")
Kind = Literal["runs", "task_means"]


@dataclass(frozen=True, eq=False)
class Profile:
    """A performance profile: at each tau, the fraction of scores above it, with a band.

    taus, point, low, high: (num_taus,). n: runs per task; ci: confidence level.
    With one run the band is (-inf, inf) at every tau.
    """

    taus: np.ndarray
    point: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n: int = 0
    ci: float = 0.95


def performance_profile(
    scores: Mapping[str, ArrayLike],
    taus: ArrayLike,
    kind: Kind = "runs",
    reps: int = 2000,
    ci: float = 0.95,
    seed: Seed = 0,
    method: Method = "percentile",
    task_bootstrap: bool = False,
) -> dict[str, Profile]:
    """Performance profile of each algorithm at thresholds `taus`, with bootstrap bands.

    scores: {algorithm: (num_runs, num_tasks)}; taus: (num_taus,) thresholds.
    kind: "runs" (fraction of runs above tau, averaged over tasks; rliable's default)
    or "task_means" (fraction of tasks whose mean score is above tau).
    reps (rliable's default for profiles is 2000), ci, seed, method, task_bootstrap:
    as in `interval_estimates`; the same guards against too few runs apply.
    Returns {algorithm: Profile}.
    """
    check_ci(ci)
    reps = _check_reps(reps)
    method = _check_method(method)
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not supported; choose 'runs' or 'task_means'")
    grid = _check_taus(taus)
    data = _check_scores(scores)
    make_rng = _rng_factory(seed)
    out = {}
    for name, x in data.items():
        runs, tasks = x.shape
        if task_bootstrap and tasks < 2:
            raise ValueError(
                f"scores[{name!r}] has one task: task_bootstrap=True needs at least 2 tasks"
            )
        point = _profile_point(x, grid, kind)
        if not guard_runs(runs, f"scores[{name!r}]", stacklevel=2):
            infinite = np.full(grid.shape, np.inf)
            out[name] = Profile(grid, point, -infinite, infinite, n=runs, ci=ci)
            continue
        replicates = _profile_replicates(x, grid, kind, reps, make_rng(), task_bootstrap)
        accel = (
            _acceleration(_profile_jackknife(x, grid, kind, task_bootstrap))
            if method == "bca"
            else np.zeros(grid.shape)
        )
        low, high = _bounds(point, replicates, method, ci, accel, runs, x.shape[1])
        if np.isnan(low).any() or np.isnan(high).any():
            warn_undefined_bca(f"scores[{name!r}] profile", stacklevel=2)
        out[name] = Profile(grid, point, low, high, n=runs, ci=ci)
    return out


def _check_taus(taus: ArrayLike) -> np.ndarray:
    grid = np.asarray(taus, dtype=float)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(
            f"taus has shape {grid.shape}; pass a 1-D grid of thresholds, "
            "e.g. np.linspace(0, 2, 81)"
        )
    if not np.all(np.isfinite(grid)):
        raise ValueError("taus contains NaN or inf; pass finite thresholds")
    return grid


def _profile_point(x: np.ndarray, taus: np.ndarray, kind: str) -> np.ndarray:
    """(num_taus,). Same arithmetic as the replicates, so ties with them are exact."""
    if kind == "runs":
        above = (x.ravel()[:, None] > taus).astype(float)  # (cells, taus)
        return np.ones(x.size) @ above / x.size
    return (x.mean(axis=0)[:, None] > taus).mean(axis=0)


def _profile_replicates(
    x: np.ndarray, taus: np.ndarray, kind: str, reps: int, rng: np.random.Generator,
    task_bootstrap: bool,
) -> np.ndarray:
    """(reps, num_taus) bootstrap replicates of the profile."""
    runs, tasks = x.shape
    cells = x.size
    out = np.empty((reps, taus.size))
    above = (x.ravel()[:, None] > taus).astype(float)  # (cells, taus), cell = run * tasks + t
    start = 0
    # Smaller chunks when the (chunk, tasks, taus) comparison or the (chunk, taus) output
    # outgrows the (chunk, runs, tasks) index draws.
    scale = max(1, (tasks * taus.size) // cells)
    chunks = _index_chunks(rng, reps, runs, tasks, task_bootstrap, shrink=scale)
    for run_idx, task_idx in chunks:
        size = run_idx.shape[0]
        if kind == "runs":
            columns = np.arange(tasks) if task_idx is None else task_idx[:, None, :]
            flat = (run_idx * tasks + columns).reshape(size, cells)
            flat += np.arange(size)[:, None] * cells
            counts = np.bincount(flat.ravel(), minlength=size * cells).reshape(size, cells)
            out[start : start + size] = counts.astype(float) @ above / cells
        else:
            task_means = _resample(x, run_idx, task_idx).mean(axis=1)  # (chunk, tasks)
            out[start : start + size] = (task_means[:, :, None] > taus).mean(axis=1)
        start += size
    return out


def _profile_jackknife(
    x: np.ndarray, taus: np.ndarray, kind: str, task_bootstrap: bool
) -> np.ndarray:
    """Deletion values (n, strata, num_taus) for the BCa acceleration, as in _bootstrap:
    one run of one task (strata = tasks), or one task with task_bootstrap."""
    runs, tasks = x.shape
    if kind == "runs":
        per_task = (x[:, :, None] > taus).mean(axis=0)  # (tasks, taus)
    else:
        per_task = (x.mean(axis=0)[:, None] > taus).astype(float)
    if task_bootstrap:
        total = per_task.sum(axis=0)
        return ((total - per_task) / (tasks - 1))[:, None, :]  # (tasks, 1, taus)
    point = per_task.mean(axis=0)
    if kind == "runs":
        above = (x[:, :, None] > taus).astype(float)  # (runs, tasks, taus)
        dropped = (runs * per_task - above) / (runs - 1)
    else:
        means = x.mean(axis=0)
        dropped = ((runs * means - x) / (runs - 1))[:, :, None] > taus
    return point + (dropped - per_task) / tasks
