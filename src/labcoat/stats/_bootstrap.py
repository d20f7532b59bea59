"""Stratified bootstrap confidence intervals for runs x tasks aggregates.

Resampling is rliable's StratifiedBootstrap (Agarwal et al. 2021, "Deep RL at
the Edge of the Statistical Precipice"): within each task, draw the
task's runs with replacement, independently across tasks; optionally also draw
the tasks with replacement (`task_bootstrap=True`), which asks "what if the
benchmark had other tasks like these". Intervals are the expanded percentile
(Hesterberg 2015; labcoat's default, which holds its coverage with few runs),
percentile (rliable's default) or BCa (Efron 1987, "Better bootstrap confidence
intervals").

Speed: resamples are drawn as index arrays (chunk, runs, tasks) in chunks of
about 2^18 cells, and every built-in metric is evaluated for a whole chunk at
once (IQM by sorting each pooled resample), so there is no Python loop over
replications. All metrics requested in one call share the same resamples.

BCa acceleration comes from a jackknife that matches the resampling:
- runs only (default): delete one run of one task at a time, each task a
  stratum, and combine with the stratified formula a = sum_h n_h^-3 sum_j U_hj^3 /
  (6 (sum_h n_h^-2 sum_j U_hj^2)^(3/2)), U_hj = (n_h - 1)(mean_j t_-hj - t_-hj):
  the skewness of the stratified linear approximation with jackknife influence
  values (Davison & Hinkley 1997, "Bootstrap Methods and their Application"),
  and what scipy.stats.bootstrap computes for several independent samples.
  With one task it is exactly Efron's jackknife acceleration. The run-only
  deletions use many more values than deleting whole rows (runs x tasks instead
  of runs), so the acceleration is less noisy with few seeds. Metrics passed as
  callables only accept whole (runs, tasks) arrays, so for them the jackknife
  deletes one run index from every task at once (as arch/rliable do).
- task_bootstrap=True: delete one task at a time (tasks are the primary
  sampling unit of the two-stage resampling).

Random numbers come only from `seed`. Each algorithm is resampled from a fresh
generator built from the seed, so algorithms of the same shape share run
indices (common random numbers) and an algorithm's interval does not depend on
which others are in the dict.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri
from scipy.stats import t as student_t

from labcoat.stats._aggregates import (
    as_scores,
    batch_metrics,
    check_gamma,
    check_pair,
    improvement_kernel,
    trimmed_count,
)
from labcoat.stats._checks import StatsWarning, check_ci
from labcoat.stats._types import Interval

METRICS = ("iqm", "mean", "median", "optimality_gap")
METHODS = ("percentile", "bca", "expanded")
# Below this many runs per task, warn (Agarwal et al. 2021 use 5+ runs). The bootstrap
# variance of a mean with n runs per task is (n - 1)/n of the truth and quantiles of n
# values are coarse: benchmarks/coverage.py measures 85-88% coverage for a nominal 95%
# at 3 runs, ~90% at 5 and ~93% at 10, with BCa no better than percentile; the
# "expanded" method (Hesterberg 2015) covers 93.6-95.2% from 3 runs.
MIN_RUNS = 5
# Cells (replication x run x task) drawn per chunk: 2 MB of indices, cache-friendly.
CHUNK_CELLS = 1 << 18

Seed = int | np.random.Generator
Metric = str | Callable[[np.ndarray], float]
Method = Literal["percentile", "bca", "expanded"]
IndexChunks = Iterator[tuple[np.ndarray, np.ndarray | None]]


# --- public API ------------------------------------------------------------


def interval_estimates(
    scores: Mapping[str, ArrayLike],
    metric: Metric | Sequence[Metric] = "iqm",
    reps: int = 50_000,
    ci: float = 0.95,
    seed: Seed = 0,
    method: Method = "expanded",
    task_bootstrap: bool = False,
    gamma: float = 1.0,
) -> dict[str, Interval] | dict[str, dict[str, Interval]]:
    """Aggregate score of each algorithm with a stratified-bootstrap confidence interval.

    scores: {algorithm: (num_runs, num_tasks)}; algorithms may differ in runs.
    metric: "iqm", "mean", "median", "optimality_gap" (see `_aggregates.py`), or a
    callable (num_runs, num_tasks) -> float (evaluated once per replication, so slower).
    Returns {algorithm: Interval}. Given a list or tuple of metrics, returns
    {algorithm: {metric: Interval}} computed from the same resamples, which is how to
    get all four at once: `metric=("iqm", "mean", "median", "optimality_gap")`.
    Callables are keyed by `__name__`.
    reps: bootstrap replications; ci: confidence level in (0, 1).
    seed: int or numpy Generator, the only source of randomness.
    method: "expanded" (default; Hesterberg 2015's expanded percentile, which corrects
      the narrowness of the bootstrap with few runs: 93.6-95.2% coverage from 3 runs in
      benchmarks/coverage.py; labcoat's reports use it), "percentile" (rliable's
      default: pass it to compare with rliable; 85-88% at 3 runs) or "bca" (Efron 1987).
    task_bootstrap: also resample tasks (rliable's task_bootstrap).
    gamma: threshold of the optimality gap.

    Interval.se is the bootstrap standard error; Interval.n the runs per task. With a
    single run the interval is (-inf, inf) with a StatsWarning (one run cannot tell its
    own noise); with fewer than 5 runs a StatsWarning (kind "few-runs"). With
    method="percentile" or "bca" even 5 runs give a nominal 95% interval that covers only
    ~90% (~93% at 10 runs; benchmarks/coverage.py), which is why "expanded" is the default.
    """
    check_ci(ci)
    reps = _check_reps(reps)
    method = _check_method(method)
    gamma = check_gamma(gamma)
    metrics, single = _check_metrics(metric)
    data = _check_scores(scores)
    make_rng = _rng_factory(seed)
    results: dict[str, dict[str, Interval]] = {}
    for name, x in data.items():
        results[name] = _estimate(
            x, metrics, reps, ci, make_rng(), method, task_bootstrap, gamma, label=name
        )
    if single:
        key = metrics[0][0]
        return {name: found[key] for name, found in results.items()}
    return results


def probability_of_improvement(
    x: ArrayLike,
    y: ArrayLike,
    reps: int = 50_000,
    ci: float = 0.95,
    seed: Seed = 0,
    method: Method = "expanded",
) -> Interval:
    """P(X > Y) averaged over tasks, with a stratified-bootstrap interval.

    x: (runs_x, num_tasks), y: (runs_y, num_tasks), same tasks in the same column
    order. Per task, P = U / (runs_x * runs_y) with U the Mann-Whitney statistic (ties
    count 1/2); the point is the mean over tasks (Agarwal et al. 2021, rliable).
    Runs of x and of y are resampled independently within each task (rliable's
    StratifiedIndependentBootstrap); tasks are not resampled. BCa uses the stratified
    jackknife over the runs of x and of y in every task. Interval.n is
    min(runs_x, runs_y); the single-run and few-runs guards are as in
    `interval_estimates`. method: "expanded" (default), "percentile" (rliable's) or
    "bca", as in `interval_estimates`; the expanded levels use n = min(runs_x, runs_y)
    and the tasks as strata.
    """
    check_ci(ci)
    reps = _check_reps(reps)
    method = _check_method(method)
    xs, ys = check_pair(_score_table(x, "x"), _score_table(y, "y"))
    kernel = improvement_kernel(xs, ys)  # (tasks, runs_x, runs_y)
    point = float(kernel.mean(axis=(1, 2)).mean())
    n = min(xs.shape[0], ys.shape[0])
    if not guard_runs(n, "probability_of_improvement", stacklevel=2, method=method):
        return Interval(point, -np.inf, np.inf, se=np.inf, n=n, ci=ci)
    rng = _rng_factory(seed)()
    chunks = _pair_index_chunks(rng, reps, xs.shape[0], ys.shape[0], xs.shape[1])
    replicates = _poi_replicates(kernel, chunks)
    accel = float(_poi_acceleration(kernel)) if method == "bca" else 0.0
    return _interval(point, replicates, method, ci, accel, n, "probability_of_improvement",
                     stacklevel=2, strata=xs.shape[1])


# --- resampling ------------------------------------------------------------


def _index_chunks(
    rng: np.random.Generator, reps: int, runs: int, tasks: int, task_bootstrap: bool,
    shrink: int = 1,
) -> IndexChunks:
    """Yield (run_idx (c, runs, tasks), task_idx (c, tasks) or None), c summing to reps.

    run_idx[b, :, t] are the runs drawn for task t in replication b; with the task
    bootstrap they index the runs of task task_idx[b, t] (rliable's StratifiedBootstrap).
    Chunks hold about CHUNK_CELLS / shrink cells; the draws do not depend on chunking
    (numpy's Generator.integers gives the same stream in pieces or at once), except
    that the task indices of a chunk come after its run indices.
    """
    # At least 8 replications per chunk, so huge score tables do not crawl one at a time.
    chunk = min(reps, max(8, CHUNK_CELLS // (runs * tasks * shrink)))
    for start in range(0, reps, chunk):
        size = min(chunk, reps - start)
        run_idx = rng.integers(0, runs, size=(size, runs, tasks))
        task_idx = rng.integers(0, tasks, size=(size, tasks)) if task_bootstrap else None
        yield run_idx, task_idx


def _resample(x: np.ndarray, run_idx: np.ndarray, task_idx: np.ndarray | None) -> np.ndarray:
    """x: (runs, tasks) -> resamples (c, runs, tasks) for the given index draws."""
    if task_idx is None:
        return x[run_idx, np.arange(x.shape[1])]
    cells = run_idx * x.shape[1]
    cells += task_idx[:, None, :]
    return x.ravel().take(cells)


def _replicates(
    x: np.ndarray, metrics: list[tuple[str, Metric]], chunks: IndexChunks, reps: int,
    gamma: float,
) -> dict[str, np.ndarray]:
    """Bootstrap replicates {metric key: (reps,)} of x: (runs, tasks) for the index draws."""
    out = {key: np.empty(reps) for key, _ in metrics}
    names = [m for _, m in metrics if isinstance(m, str)]
    functions = [(key, m) for key, m in metrics if not isinstance(m, str)]
    start = 0
    for run_idx, task_idx in chunks:
        samples = _resample(x, run_idx, task_idx)
        stop = start + samples.shape[0]
        for key, values in batch_metrics(samples, names, gamma).items():
            out[key][start:stop] = values
        for key, function in functions:
            out[key][start:stop] = [_call(function, key, s) for s in samples]
        start = stop
    return out


def _pair_index_chunks(
    rng: np.random.Generator, reps: int, runs_x: int, runs_y: int, tasks: int
) -> IndexChunks:
    """Yield (idx_x (c, runs_x, tasks), idx_y (c, runs_y, tasks)) drawn independently."""
    chunk = min(reps, max(8, CHUNK_CELLS // (runs_x * runs_y * tasks)))
    for start in range(0, reps, chunk):
        size = min(chunk, reps - start)
        yield (rng.integers(0, runs_x, size=(size, runs_x, tasks)),
               rng.integers(0, runs_y, size=(size, runs_y, tasks)))


def _run_counts(run_idx: np.ndarray, runs: int) -> np.ndarray:
    """run_idx (c, runs, tasks) -> how often each run was drawn, (c, tasks, runs) floats."""
    c, _, tasks = run_idx.shape
    slot = (np.arange(c)[:, None, None] * tasks + np.arange(tasks)) * runs
    counts = np.bincount((slot + run_idx).ravel(), minlength=c * tasks * runs)
    return counts.reshape(c, tasks, runs).astype(float)


def _poi_replicates(kernel: np.ndarray, chunks: IndexChunks) -> np.ndarray:
    """P(X > Y) for each resample: with draw counts w_x, w_y per task,
    P_t = w_x K_t w_y / (runs_x runs_y), a matrix product instead of a loop over pairs."""
    tasks, runs_x, runs_y = kernel.shape
    parts = []
    for idx_x, idx_y in chunks:
        wx, wy = _run_counts(idx_x, runs_x), _run_counts(idx_y, runs_y)
        # (tasks, c, runs_x) @ (tasks, runs_x, runs_y) -> (tasks, c, runs_y)
        left = np.matmul(wx.transpose(1, 0, 2), kernel)
        per_task = np.einsum("tcj,ctj->ct", left, wy) / (runs_x * runs_y)
        parts.append(per_task.mean(axis=1))
    return np.concatenate(parts)


# --- jackknife for BCa -----------------------------------------------------


def _jackknife(
    x: np.ndarray, metric: Metric, key: str, task_bootstrap: bool, gamma: float
) -> np.ndarray:
    """Deletion values (n, strata): column h holds the metric with one unit of stratum h
    deleted. See the module docstring for which units are deleted."""
    runs, tasks = x.shape
    if task_bootstrap:
        dropped = np.stack([np.delete(x, t, axis=1) for t in range(tasks)])
        return _evaluate(dropped, metric, key, gamma)[:, None]
    if not isinstance(metric, str):
        dropped = np.stack([np.delete(x, r, axis=0) for r in range(runs)])
        return _evaluate(dropped, metric, key, gamma)[:, None]
    return _cell_jackknife(x, metric, gamma)


def _evaluate(samples: np.ndarray, metric: Metric, key: str, gamma: float) -> np.ndarray:
    if isinstance(metric, str):
        return batch_metrics(samples, [metric], gamma)[metric]
    return np.array([_call(metric, key, s) for s in samples])


def _cell_jackknife(x: np.ndarray, metric: str, gamma: float) -> np.ndarray:
    """(runs, tasks): the metric with run r of task t deleted, that task keeping runs - 1."""
    runs, tasks = x.shape
    if metric in ("mean", "optimality_gap"):
        values = np.minimum(x, gamma) if metric == "optimality_gap" else x
        task_means = values.mean(axis=0)
        dropped = (runs * task_means - values) / (runs - 1)
        jk = task_means.mean() + (dropped - task_means) / tasks
        return gamma - jk if metric == "optimality_gap" else jk
    if metric == "median":
        task_means = x.mean(axis=0)
        dropped = (runs * task_means - x) / (runs - 1)
        jk = np.empty((runs, tasks))
        for t in range(tasks):  # a loop over tasks, not replications
            replaced = np.tile(task_means, (runs, 1))
            replaced[:, t] = dropped[:, t]
            jk[:, t] = np.median(replaced, axis=1)
        return jk
    # IQM: delete the score from the pool (N - 1 equal weights) instead of reweighting its
    # task's other runs; after centring within each task the two differ only at second
    # order, so the acceleration is the same to first order.
    # IQM of the pooled scores with one deleted: from the sorted scores s and prefix sums,
    # the kept block of the N - 1 survivors is s[g+1:N-g], s[g:N-1-g] or s[g:N-g] minus
    # the deleted value, as the deletion falls below, above or inside it.
    flat = x.ravel()
    order = np.argsort(flat, kind="stable")
    s = flat[order]
    total = s.size
    g = trimmed_count(total - 1)
    kept = total - 1 - 2 * g
    prefix = np.concatenate([[0.0], np.cumsum(s)])
    position = np.empty(total, dtype=np.intp)
    position[order] = np.arange(total)
    sums = np.where(
        position < g,
        prefix[total - g] - prefix[g + 1],
        np.where(
            position >= total - 1 - g,
            prefix[total - 1 - g] - prefix[g],
            prefix[total - g] - prefix[g] - flat,
        ),
    )
    return (sums / kept).reshape(runs, tasks)


def _acceleration(*jackknives: np.ndarray) -> np.ndarray:
    """BCa acceleration from stratified jackknife values, each (n_h, strata, *extra).

    a = sum_h n_h^-3 sum_j U^3 / (6 (sum_h n_h^-2 sum_j U^2)^1.5), U = (n_h - 1)(mean - t_-j)
    (Efron 1987 for one stratum; Davison & Hinkley 1997 for several, as scipy.stats.bootstrap).
    Returns shape `extra` (a 0-d array for 2-D input); trailing axes are separate statistics.
    """
    num = den = np.zeros(jackknives[0].shape[2:])
    for jk in jackknives:
        n = jk.shape[0]
        u = (n - 1) * (jk.mean(axis=0) - jk)
        num = num + np.sum(u**3, axis=(0, 1)) / n**3
        den = den + np.sum(u**2, axis=(0, 1)) / n**2
    # den == 0: no single deletion moves the statistic, so there is nothing to accelerate.
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, num / (6.0 * safe**1.5), 0.0)


def _poi_acceleration(kernel: np.ndarray) -> np.ndarray:
    """Stratified jackknife over the runs of x and of y within each task."""
    tasks, runs_x, runs_y = kernel.shape
    per_task = kernel.mean(axis=(1, 2))
    point = per_task.mean()
    # Delete run i of x in task t: that task's P averages the other runs_x - 1 rows.
    row_sums, col_sums, total = kernel.sum(axis=2), kernel.sum(axis=1), kernel.sum(axis=(1, 2))
    drop_x = (total[:, None] - row_sums) / ((runs_x - 1) * runs_y)  # (tasks, runs_x)
    drop_y = (total[:, None] - col_sums) / (runs_x * (runs_y - 1))  # (tasks, runs_y)
    jk_x = point + (drop_x - per_task[:, None]) / tasks
    jk_y = point + (drop_y - per_task[:, None]) / tasks
    return _acceleration(jk_x.T, jk_y.T)


# --- intervals -------------------------------------------------------------


def _bounds(
    points: np.ndarray, replicates: np.ndarray, method: str, ci: float, accel: np.ndarray,
    n: int = 0, strata: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Interval bounds for M statistics: points (M,), replicates (reps, M), accel (M,).

    Percentile: the alpha/2 and 1 - alpha/2 quantiles of the replicates. BCa (Efron
    1987): bias correction z0 from the share of replicates below the point (ties count
    half, as scipy.stats.bootstrap), then accelerated quantile levels. NaN where BCa is
    undefined (every replicate on one side of the point).
    """
    alpha = (1 - ci) / 2
    if method == "expanded":
        # Hesterberg (2015, "What teachers should know about the bootstrap", sec. 6.6):
        # with n runs the bootstrap variance is (n-1)/n of the truth, and a normal
        # quantile stands where a t is due. Take the quantiles at
        # alpha'/2 = Phi(-sqrt(n/(n-1)) * t_{1-alpha/2, df}); stratified over T tasks the
        # variance pools T(n-1) degrees of freedom (Hesterberg's single sample: T = 1).
        if n < 2:
            raise ValueError("the expanded percentile interval needs at least 2 runs per task")
        df = strata * (n - 1)
        alpha = float(ndtr(-np.sqrt(n / (n - 1)) * student_t.ppf(1 - alpha, df)))
        low, high = np.quantile(replicates, [alpha, 1 - alpha], axis=0)
        return low, high
    if method == "percentile":
        low, high = np.quantile(replicates, [alpha, 1 - alpha], axis=0)
        return low, high
    below = np.count_nonzero(replicates < points, axis=0) + np.count_nonzero(
        replicates <= points, axis=0
    )
    z0 = ndtri(below / (2 * replicates.shape[0]))
    levels = []
    with np.errstate(invalid="ignore"):  # z0 = +-inf: undefined, handled below
        for z in (ndtri(alpha), -ndtri(alpha)):
            shifted = z0 + z
            levels.append(ndtr(z0 + shifted / (1 - accel * shifted)))
    low, high = np.full(points.shape, np.nan), np.full(points.shape, np.nan)
    for m in range(points.size):  # a loop over statistics (few), not replications
        if np.isfinite(levels[0][m]) and np.isfinite(levels[1][m]):
            low[m], high[m] = np.quantile(replicates[:, m], [levels[0][m], levels[1][m]])
    return low, high


def warn_undefined_bca(label: str, stacklevel: int) -> None:
    """stacklevel: what the caller would pass to warnings.warn to point at the user."""
    warnings.warn(
        f"{label}: the BCa interval is undefined because every bootstrap replicate lies on "
        "one side of the point estimate (bounds are NaN); use method='percentile'",
        StatsWarning, stacklevel=stacklevel + 1,
    )


def _interval(
    point: float, replicates: np.ndarray, method: str, ci: float, accel: float, n: int,
    label: str, stacklevel: int, strata: int = 1,
) -> Interval:
    se = float(replicates.std(ddof=1))
    low, high = _bounds(np.array([point]), replicates[:, None], method, ci, np.array([accel]),
                        n, strata)
    if np.isnan(low[0]) or np.isnan(high[0]):
        warn_undefined_bca(label, stacklevel + 1)
    return Interval(point, float(low[0]), float(high[0]), se=se, n=n, ci=ci)


def _estimate(
    x: np.ndarray, metrics: list[tuple[str, Metric]], reps: int, ci: float,
    rng: np.random.Generator, method: str, task_bootstrap: bool, gamma: float, label: str,
) -> dict[str, Interval]:
    runs, tasks = x.shape
    if task_bootstrap and tasks < 2:
        raise ValueError(
            f"scores[{label!r}] has one task: task_bootstrap=True needs at least 2 tasks"
        )
    points = _points(x, metrics, gamma)
    if not guard_runs(runs, f"scores[{label!r}]", stacklevel=3, method=method):
        return {key: Interval(points[key], -np.inf, np.inf, se=np.inf, n=runs, ci=ci)
                for key, _ in metrics}
    chunks = _index_chunks(rng, reps, runs, tasks, task_bootstrap)
    replicates = _replicates(x, metrics, chunks, reps, gamma)
    out = {}
    for key, metric in metrics:
        accel = (float(_acceleration(_jackknife(x, metric, key, task_bootstrap, gamma)))
                 if method == "bca" else 0.0)
        out[key] = _interval(points[key], replicates[key], method, ci, accel, runs,
                             f"scores[{label!r}] {key}", stacklevel=3, strata=tasks)
    return out


def _points(x: np.ndarray, metrics: list[tuple[str, Metric]], gamma: float) -> dict[str, float]:
    names = [m for _, m in metrics if isinstance(m, str)]
    found = {k: float(v[0]) for k, v in batch_metrics(x[None], names, gamma).items()}
    for key, metric in metrics:
        if not isinstance(metric, str):
            found[key] = _call(metric, key, x)
    return found


def guard_runs(runs: int, label: str, stacklevel: int, method: str | None = None) -> bool:
    """Warn about too few runs; False when there is no interval to give (one run).

    stacklevel: what the caller would pass to warnings.warn to point at the user.
    method: the interval method, when known ("expanded" gets its own message)."""
    if runs == 1:
        warnings.warn(
            f"{label}: one run per task, so the bootstrap cannot see run-to-run noise; "
            "the interval is (-inf, inf). Add seeds.",
            StatsWarning, stacklevel=stacklevel + 1,
        )
        return False
    if runs < MIN_RUNS and method == "expanded":
        message = (
            f"{label}: only {runs} runs per task; the expanded bootstrap interval still covers "
            "about 94% at 3 runs (benchmarks/README.md) but is wide, and an aggregate of so "
            f"few runs is fragile. Run {MIN_RUNS} or more seeds."
        )
        warnings.warn(StatsWarning(message, "few-runs", runs), stacklevel=stacklevel + 1)
    elif runs < MIN_RUNS:
        message = (
            f"{label}: only {runs} runs per task; percentile and BCa bootstrap intervals from "
            f"fewer than {MIN_RUNS} runs are too narrow (a nominal 95% interval covered 85-88% "
            "of the time at 3 runs, see benchmarks/README.md); method='expanded' corrects "
            "this. Add seeds."
        )
        warnings.warn(StatsWarning(message, "few-runs", runs), stacklevel=stacklevel + 1)
    return True


# --- argument checks -------------------------------------------------------


def _call(function: Callable[[np.ndarray], float], key: str, sample: np.ndarray) -> float:
    value = function(sample)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"metric {key!r} must return one number for a (runs, tasks) array, "
            f"got {type(value).__name__}"
        ) from None


def _check_metrics(metric: Metric | Sequence[Metric]) -> tuple[list[tuple[str, Metric]], bool]:
    single = isinstance(metric, str) or callable(metric)
    if not single and not isinstance(metric, list | tuple):
        raise ValueError(
            f"metric {metric!r} is neither a metric name nor a callable; choose one of "
            f"{', '.join(METRICS)}, a callable, or a list of them"
        )
    items = [metric] if single else list(metric)
    if not items:
        raise ValueError(f"metric is empty; pass one of {METRICS} or a callable")
    found: list[tuple[str, Metric]] = []
    for item in items:
        if isinstance(item, str):
            if item not in METRICS:
                raise ValueError(
                    f"unknown metric {item!r}; choose one of {', '.join(METRICS)} or pass "
                    "a callable (runs, tasks) -> float"
                )
            key = item
        elif callable(item):
            key = getattr(item, "__name__", repr(item))
        else:
            raise ValueError(f"metric {item!r} is neither a metric name nor a callable")
        if key in dict(found):
            raise ValueError(
                f"two metrics are named {key!r}; give each metric once, and callables "
                "distinct __name__s (def functions rather than lambdas)"
            )
        found.append((key, item))
    return found, single


def _check_scores(scores: Mapping[str, ArrayLike]) -> dict[str, np.ndarray]:
    if not isinstance(scores, Mapping):
        raise ValueError(
            "scores must be a dict {algorithm: array (num_runs, num_tasks)}, "
            f"got {type(scores).__name__}; wrap one array as {{'name': scores}}"
        )
    if not scores:
        raise ValueError("scores is empty: pass {algorithm: array (num_runs, num_tasks)}")
    return {name: _score_table(value, f"scores[{name!r}]") for name, value in scores.items()}


def _score_table(value: ArrayLike, name: str) -> np.ndarray:
    """`as_scores`, with ragged runs and non-numbers named instead of numpy's shape error."""
    if not hasattr(value, "shape") and isinstance(value, Sequence) and not isinstance(
            value, str | bytes):
        lengths = [None if isinstance(row, str | bytes) or not hasattr(row, "__len__")
                   else len(row) for row in value]
        if len(set(lengths)) > 1:
            shown = ", ".join("1 (a number)" if n is None else str(n) for n in lengths[:10])
            more = ", ..." if len(lengths) > 10 else ""
            raise ValueError(
                f"{name} has runs with different numbers of scores ({shown}{more}): each run "
                "needs one score per task, in the same task order; complete or drop the "
                "short runs")
    try:
        return as_scores(value, name)
    except (TypeError, ValueError) as e:
        if str(e).startswith(name):  # as_scores' own message, naming the shape
            raise
        raise ValueError(f"{name} is not a table of numbers ({e}); pass a (num_runs, "
                         "num_tasks) array of floats") from None


def _check_reps(reps: int) -> int:
    if isinstance(reps, bool) or not isinstance(reps, int | np.integer) or reps < 2:
        raise ValueError(f"reps={reps!r} must be an integer of at least 2, e.g. 50_000")
    return int(reps)


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(
            f"method={method!r} is not supported; choose 'percentile', 'bca' or 'expanded'"
        )
    return method


def _rng_factory(seed: Seed) -> Callable[[], np.random.Generator]:
    """Fresh, identical generators from `seed` (an int, or a Generator advanced once)."""
    if isinstance(seed, np.random.Generator):
        entropy = int(seed.integers(2**63))
    elif isinstance(seed, int | np.integer) and not isinstance(seed, bool) and seed >= 0:
        entropy = int(seed)
    else:
        raise ValueError(
            f"seed={seed!r} must be a non-negative int or a numpy Generator "
            "(np.random.default_rng(0)); results are reproducible only from a seed"
        )
    return lambda: np.random.default_rng(entropy)
