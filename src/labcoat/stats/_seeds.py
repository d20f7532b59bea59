"""Statistics across independent runs (seeds): t intervals, Welch's and the paired t test.

Seeds are few (3-10), so intervals use Student's t, not the normal
approximation, and never pretend to precision a single run cannot give.
Each function warns (StatsWarning) when its answer rests on fewer than 5 runs
per group, when run ids show that several values come from one run
(pseudoreplication: steps or items of one run are not independent samples), or
when one run lies far from the others (kind "outlier-seed": a diverged or
collapsed run, which dominates a mean of a few seeds; `_robust.py` has trimmed
intervals that resist it).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from labcoat.stats._checks import StatsWarning, check_ci, check_within, clip_to_bounds
from labcoat.stats._types import Difference, Interval

# Below this many runs per group an interval is too wide to act on and resampling
# intervals under-cover (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical
# Precipice", section 4; Colas et al. 2018, "How Many Random Seeds?").
FEW_RUNS = 5
# False-alarm rate of the outlier-seed check on normal runs (Bonferroni over the n runs,
# so at most this and, by benchmarks/coverage.py, 1.0% at 3, 5 and 10 runs).
OUTLIER_ALPHA = 0.01


def _finite_1d(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).ravel()
    if array.size == 0:
        raise ValueError(f"{name} is empty: need at least one value")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf; drop or fix failed runs first")
    return array


def warn_no_spread(what: str, stacklevel: int = 3) -> None:
    """Warn (kind "no-spread") when the runs show no seed-to-seed variation: the interval
    has zero width and p is 0 or 1 by arithmetic, not evidence."""
    warnings.warn(StatsWarning(
        f"{what}: the runs show no seed-to-seed variation (each arm's values, or each seed "
        "pair's differences, are all equal), so seed noise was not measured (does the "
        "script use its --seed? does the metric depend on training?); the zero-width "
        "interval and its p-value say nothing", "no-spread"), stacklevel=stacklevel)


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


def outlying_run(values: np.ndarray, alpha: float = OUTLIER_ALPHA) -> tuple[int, float, float]:
    """The run farthest from the others, if it is an outlier: (index, distance, threshold),
    index -1 when no run qualifies. values: (n,) one value per run.

    Leave-one-out check: run i's distance is |x_i - mean of the others| in standard
    deviations of the others, s_-i. For n normal runs (x_i - mean_-i) / (s_-i sqrt(1 +
    1/(n-1))) is Student t with n - 2 df, so the threshold t_{1 - alpha/(2n)}(n-2)
    sqrt(1 + 1/(n-1)) (Bonferroni over the n runs) fires on at most a share alpha of
    normal experiments; the largest distance is a monotone function of Grubbs' statistic,
    so this is Grubbs' test (Grubbs 1950) at level alpha, phrased per run. Needs n >= 3.
    When 4 or more other runs are all equal (a coarse metric) and run i differs, its
    distance is infinite: the whole spread, and so the t interval, comes from that run;
    2 or 3 equal others are a common tie, not evidence, and give distance 0.
    """
    n = values.size
    if n < 3:
        return -1, 0.0, math.inf
    v = values - values.mean()  # centred, so the deletion formulas below lose no digits
    others_mean = -v / (n - 1)  # the others of run i sum to -v_i
    # Sum of squares of the others about their mean, by deletion from the total.
    others_ss = np.maximum(np.sum(v**2) - v**2 - (n - 1) * others_mean**2, 0.0)
    others_sd = np.sqrt(others_ss / (n - 2))
    scale = np.abs(v).max()
    # The deletion formula's round-off is about 1e-8 sqrt(n) of the overall SD; below
    # 1e-6 of it the others count as all equal.
    varied = others_sd > 1e-6 * float(np.sqrt(np.sum(v**2) / (n - 1)))
    gap = np.abs(v - others_mean)
    # Others all equal (a coarse metric): any gap is infinitely many of their SDs. Ties of
    # 2 or 3 runs are common on coarse metrics (22% of 3-run experiments of accuracies on
    # 50 items, benchmarks/coverage.py), so only 4 or more equal others count.
    tied = gap > 1e-9 * scale if n - 1 >= 4 else np.zeros(n, dtype=bool)
    distance = np.where(varied, gap / np.where(varied, others_sd, 1),
                        np.where(tied, math.inf, 0.0))
    i = int(np.argmax(distance))
    threshold = float(sps.t.ppf(1 - alpha / (2 * n), n - 2)) * math.sqrt(1 + 1 / (n - 1))
    return (i if distance[i] > threshold else -1), float(distance[i]), threshold


def warn_outlying_run(values: np.ndarray, name: str, what: str, robust: str,
                      stacklevel: int = 3) -> None:
    """StatsWarning (kind "outlier-seed") naming the run of `values` (n,) that lies far
    from the others, how far, and `robust`, the call that resists it."""
    i, distance, threshold = outlying_run(values)
    if i < 0:
        return
    n = values.size
    others = np.delete(values, i)
    if n >= FEW_RUNS:
        advice = (f"Check that run, and report {robust} (20% trimmed mean, Yuen), which "
                  "resists one outlying run, next to this result.")
    else:
        advice = (f"With {n} runs no interval can discount it ({robust} trims nothing "
                  f"below {FEW_RUNS} runs): check that run and add seeds.")
    if math.isinf(distance):
        where = (f"differs from the other {n - 1} runs, which are all equal "
                 f"({others[0]:.4g}): the whole spread comes from this one run")
    else:
        where = (f"lies {distance:.1f} standard deviations of the other {n - 1} runs from "
                 f"their mean ({others.mean():.4g} +- {others.std(ddof=1):.2g}); normal seed "
                 f"noise puts a run beyond {threshold:.1f} in under "
                 f"{100 * OUTLIER_ALPHA:g}% of experiments")
    message = (
        f"{what}: run {i} of {name} (value {values[i]:.4g}) {where}. A diverged or "
        f"collapsed run (or a skewed metric) dominates a mean of {n} runs and its t "
        f"interval. {advice}"
    )
    warnings.warn(StatsWarning(message, "outlier-seed", n), stacklevel=stacklevel)


def mean_interval(
    values: ArrayLike, ci: float = 0.95, *, bounds: tuple[float, float] | None = None
) -> Interval:
    """Mean of `values` (one per run) with a Student-t interval.

    values: (n,). With n == 1 the interval is infinite: one run cannot tell
    its own noise. Warns (StatsWarning) when n < 5, and (kind "outlier-seed")
    when one run lies far from the others (`outlying_run`); then
    `trimmed_mean_interval` gives an interval that resists it.
    bounds: (lo, hi) the metric's range, e.g. (0.0, 1.0) for accuracy or exact
    match: the interval is cut to it, which never lowers coverage (the true mean
    lies inside); raises ValueError when a value lies outside. Cutting keeps
    point and se; an infinite interval (one run) becomes (lo, hi).
    """
    check_ci(ci)
    x = _finite_1d(values, "values")
    check_within(x, bounds, "values")
    n = x.size
    mean = float(x.mean())
    warn_few_runs(n, "values", "mean_interval")
    warn_outlying_run(x, "values", "mean_interval", "stats.trimmed_mean_interval(values)")
    if n < 2:
        return clip_to_bounds(Interval(mean, -np.inf, np.inf, se=np.inf, n=n, ci=ci), bounds)
    se = float(x.std(ddof=1) / np.sqrt(n))
    half = float(sps.t.ppf(0.5 + ci / 2, df=n - 1)) * se
    return clip_to_bounds(Interval(mean, mean - half, mean + half, se=se, n=n, ci=ci), bounds)


def welch(a: ArrayLike, b: ArrayLike, ci: float = 0.95, *,
          runs_a: ArrayLike | None = None, runs_b: ArrayLike | None = None) -> Difference:
    """Welch's unequal-variance t test of mean(b) - mean(a), e.g. variant minus control seeds.

    a: (n_a,), b: (n_b,) one value per run. Needs two values per group.
    runs_a: (n_a,), runs_b: (n_b,) optional run ids of the values; when an id
    repeats (several steps or items per run), a StatsWarning says the test is
    pseudoreplicated and suggests aggregating per run. Warns when a group has
    fewer than 5 runs, and (kind "outlier-seed") when one run of a group lies far
    from the others; then `yuen` gives a trimmed-means difference that resists it.
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
        warn_outlying_run(values, name, "welch", "stats.yuen(a, b)")
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    estimate = float(y.mean() - x.mean())
    se = float(np.sqrt(va + vb))
    if se == 0:
        warn_no_spread("welch")
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
    Warns when n < 5, and (kind "outlier-seed") when one seed's difference lies
    far from the others; then `trimmed_mean_interval(b - a)` resists it.
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
    warn_outlying_run(d, "b - a", "paired_t", "stats.trimmed_mean_interval(b - a)")
    estimate = float(d.mean())
    se = float(d.std(ddof=1) / np.sqrt(n))
    corr = (float(np.corrcoef(x, y)[0, 1]) if x.std() > 0 and y.std() > 0
            else float("nan"))
    if se == 0:
        warn_no_spread("paired_t")
        p = 1.0 if estimate == 0 else 0.0
        return Difference(estimate, estimate, estimate, 0.0, p, "paired-t", n, df=n - 1,
                          correlation=corr, ci=ci)
    p = float(2 * sps.t.sf(abs(estimate / se), n - 1))
    half = float(sps.t.ppf(0.5 + ci / 2, n - 1)) * se
    return Difference(estimate, estimate - half, estimate + half, se, p, "paired-t", n,
                      df=n - 1, correlation=corr, ci=ci)
