"""Statistics across independent runs (seeds): t intervals, Welch's and the paired t test.

Seeds are few (3-10), so intervals use Student's t, not the normal
approximation, and never pretend to precision a single run cannot give.
Each function warns (StatsWarning) when its answer rests on fewer than 5 runs
per group, or when run ids show that several values come from one run
(pseudoreplication: steps or items of one run are not independent samples).
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from labcoat.stats._checks import StatsWarning, check_ci
from labcoat.stats._types import Difference, Interval

# Below this many runs per group an interval is too wide to act on and resampling
# intervals under-cover (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical
# Precipice", section 4; Colas et al. 2018, "How Many Random Seeds?").
FEW_RUNS = 5


def _finite_1d(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).ravel()
    if array.size == 0:
        raise ValueError(f"{name} is empty: need at least one value")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf; drop or fix failed runs first")
    return array


def warn_few_runs(n_runs: int, name: str, what: str, stacklevel: int = 3) -> None:
    """Warn (StatsWarning, kind "few-runs") when `what` rests on fewer than FEW_RUNS runs
    in group `name`."""
    if n_runs == 1:
        message = (f"{what}: only one seed in {name}; one run cannot separate an effect from "
                   f"seed noise. Run at least {FEW_RUNS} seeds per arm.")
    elif n_runs < FEW_RUNS:
        message = (f"{what} rests on {n_runs} runs in {name} (fewer than {FEW_RUNS}): t "
                   f"intervals with <{FEW_RUNS} seeds are wide; percentile bootstrap "
                   f"under-covers. Run {FEW_RUNS} or more seeds per arm and treat this result "
                   "as provisional.")
    else:
        return
    warnings.warn(StatsWarning(message, "few-runs", n_runs), stacklevel=stacklevel)


def count_runs(values: np.ndarray, runs: ArrayLike | None, name: str,
               stacklevel: int = 3) -> int:
    """Number of independent runs behind `values` (n,), given optional run ids (n,).

    Warns (StatsWarning) when an id repeats: values from one run (its steps,
    its eval items) are correlated, so a test that counts them as independent
    samples reports p-values and intervals far too confident (pseudoreplication;
    Henderson et al. 2018, "Deep Reinforcement Learning that Matters").
    """
    if runs is None:
        return int(values.size)
    ids = np.asarray(runs).ravel()
    if ids.size != values.size:
        raise ValueError(
            f"runs_{name} has {ids.size} run ids for {values.size} values in {name}; "
            "give one run id per value"
        )
    unique, counts = np.unique(ids, return_counts=True)
    if counts.max() > 1:
        warnings.warn(
            f"{name} has {values.size} values from only {unique.size} runs (up to "
            f"{counts.max()} per run): values from one run (steps, items) are not "
            "independent samples, so the p-value and interval are far too confident. "
            "Aggregate to one value per run first (e.g. each run's mean), or use "
            "compare_curves for learning curves.",
            StatsWarning, stacklevel=stacklevel,
        )
    return int(unique.size)


def mean_interval(values: ArrayLike, ci: float = 0.95) -> Interval:
    """Mean of `values` (one per run) with a Student-t interval.

    values: (n,). With n == 1 the interval is infinite: one run cannot tell
    its own noise. Warns (StatsWarning) when n < 5.
    """
    check_ci(ci)
    x = _finite_1d(values, "values")
    n = x.size
    mean = float(x.mean())
    warn_few_runs(n, "values", "mean_interval")
    if n < 2:
        return Interval(mean, -np.inf, np.inf, se=np.inf, n=n, ci=ci)
    se = float(x.std(ddof=1) / np.sqrt(n))
    half = float(sps.t.ppf(0.5 + ci / 2, df=n - 1)) * se
    return Interval(mean, mean - half, mean + half, se=se, n=n, ci=ci)


def welch(a: ArrayLike, b: ArrayLike, ci: float = 0.95, *,
          runs_a: ArrayLike | None = None, runs_b: ArrayLike | None = None) -> Difference:
    """Welch's unequal-variance t test of mean(b) - mean(a), e.g. variant minus control seeds.

    a: (n_a,), b: (n_b,) one value per run. Needs two values per group.
    runs_a: (n_a,), runs_b: (n_b,) optional run ids of the values; when an id
    repeats (several steps or items per run), a StatsWarning says the test is
    pseudoreplicated and suggests aggregating per run. Warns when a group has
    fewer than 5 runs.
    """
    check_ci(ci)
    x, y = _finite_1d(a, "a"), _finite_1d(b, "b")
    if x.size < 2 or y.size < 2:
        raise ValueError(
            f"Welch's test needs at least 2 runs per group (got {x.size} and {y.size}); "
            "add seeds"
        )
    for values, runs, name in ((x, runs_a, "a"), (y, runs_b, "b")):
        warn_few_runs(count_runs(values, runs, name), name, "welch")
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    estimate = float(y.mean() - x.mean())
    se = float(np.sqrt(va + vb))
    if se == 0:
        p = 1.0 if estimate == 0 else 0.0
        return Difference(estimate, estimate, estimate, 0.0, p, "welch", x.size + y.size, ci=ci)
    # Welch-Satterthwaite degrees of freedom.
    df = float((va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1)))
    t = estimate / se
    p = float(2 * sps.t.sf(abs(t), df))
    half = float(sps.t.ppf(0.5 + ci / 2, df)) * se
    return Difference(estimate, estimate - half, estimate + half, se, p, "welch",
                      x.size + y.size, df=df, ci=ci)


def paired_t(a: ArrayLike, b: ArrayLike, ci: float = 0.95) -> Difference:
    """Paired t test of mean(b - a) across seeds, e.g. variant and control run with the same seeds.

    a, b: (n,) one value per seed, aligned (a[i] and b[i] share seed i, so
    they share data order and initialization noise). Student t with n - 1 df
    on the differences; `correlation` is corr(a, b), the pairing's gain.
    Warns when n < 5.
    """
    check_ci(ci)
    x, y = _finite_1d(a, "a"), _finite_1d(b, "b")
    if x.shape != y.shape:
        raise ValueError(
            f"paired_t needs one value per seed in both arms, aligned: got {x.size} and "
            f"{y.size}; use welch for unpaired runs"
        )
    n = x.size
    if n < 2:
        raise ValueError("paired_t needs at least 2 seeds; add seeds")
    warn_few_runs(n, "a and b", "paired_t")
    d = y - x
    estimate = float(d.mean())
    se = float(d.std(ddof=1) / np.sqrt(n))
    corr = (float(np.corrcoef(x, y)[0, 1]) if x.std() > 0 and y.std() > 0
            else float("nan"))
    if se == 0:
        p = 1.0 if estimate == 0 else 0.0
        return Difference(estimate, estimate, estimate, 0.0, p, "paired-t", n, df=n - 1,
                          correlation=corr, ci=ci)
    p = float(2 * sps.t.sf(abs(estimate / se), n - 1))
    half = float(sps.t.ppf(0.5 + ci / 2, n - 1)) * se
    return Difference(estimate, estimate - half, estimate + half, se, p, "paired-t", n,
                      df=n - 1, correlation=corr, ci=ci)
