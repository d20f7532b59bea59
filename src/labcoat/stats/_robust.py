"""Trimmed-mean intervals across runs (seeds) that resist one diverged or collapsed run.

A mean of 3-10 seeds is at the mercy of any single run: one that diverged moves the
mean by (its distance) / n and inflates the t interval until it says nothing. The
20% trimmed mean drops the lowest and highest 20% of runs (g = floor(0.2 n) from each
end) and its standard error comes from the winsorized variance (Tukey & McLaughlin
1963, "Less vulnerable confidence and significance procedures for location based on
a single sample"); two groups combine as in Welch's test (Yuen 1974, "The two-sample
trimmed t for unequal population variances"), which is what
`scipy.stats.ttest_ind(..., trim=0.2)` computes. benchmarks/coverage.py measures
these against the t intervals on normal, skewed and collapsed-run seeds.

What they estimate: the trimmed mean of the runs' distribution, the level of a typical
run. It equals the mean for symmetric run-to-run noise and is close to the level of
the healthy runs when a few collapse; under skew it differs from the mean (report
which one a claim is about). With fewer than 5 runs 20% trimming removes nothing,
and the interval equals the t interval (a StatsWarning of kind "no-trimming" says so).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from labcoat.stats._checks import StatsWarning, check_ci, check_within, clip_to_bounds
from labcoat.stats._seeds import _finite_1d, warn_few_runs
from labcoat.stats._types import Difference, Interval


def trimmed_mean_interval(
    values: ArrayLike,
    trim: float = 0.2,
    ci: float = 0.95,
    *,
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """Trimmed mean of `values` (one per run) with the Tukey-McLaughlin trimmed t interval.

    values: (n,). trim: share cut from each end, g = floor(trim * n) runs (scipy's
    rounding in ttest_ind); h = n - 2g runs remain and must be at least 2.
    SE = sqrt((n - 1) s_w^2 / (h (h - 1))) with s_w^2 the variance (ddof=1) of the
    values winsorized at the g-th order statistics; t quantile with h - 1 df.
    bounds: (lo, hi) cut the interval to the metric's range, as in `mean_interval`.
    Warns (StatsWarning) below 5 runs, and when g = 0 (kind "no-trimming").

    Returns Interval(point=trimmed mean, low, high, se, n, ci).
    """
    check_ci(ci)
    trim = _check_trim(trim)
    x = _finite_1d(values, "values")
    check_within(x, bounds, "values")
    n = x.size
    warn_few_runs(n, "values", "trimmed_mean_interval")
    if n == 1:
        point = float(x[0])
        return clip_to_bounds(Interval(point, -math.inf, math.inf, se=math.inf, n=1, ci=ci),
                              bounds)
    point, variance, h = _trimmed_parts(x, trim, "values")
    _warn_no_trimming(n, h, trim, "trimmed_mean_interval")
    se = math.sqrt(variance)
    half = float(sps.t.ppf(0.5 + ci / 2, h - 1)) * se
    return clip_to_bounds(Interval(point, point - half, point + half, se=se, n=n, ci=ci),
                          bounds)


def yuen(a: ArrayLike, b: ArrayLike, trim: float = 0.2, ci: float = 0.95) -> Difference:
    """Yuen's trimmed t test of trimmed_mean(b) - trimmed_mean(a), e.g. variant minus control.

    a: (n_a,), b: (n_b,) one value per run. The robust counterpart of `welch`: each
    group's SE^2 d = (n - 1) s_w^2 / (h (h - 1)) as in `trimmed_mean_interval`, and
    Welch-Satterthwaite df = (d_a + d_b)^2 / (d_a^2 / (h_a - 1) + d_b^2 / (h_b - 1)).
    Equals scipy.stats.ttest_ind(b, a, equal_var=False, trim=trim). Warns below 5
    runs per group and when a group is too small to trim (kind "no-trimming").
    """
    check_ci(ci)
    trim = _check_trim(trim)
    x, y = _finite_1d(a, "a"), _finite_1d(b, "b")
    if x.size < 2 or y.size < 2:
        raise ValueError(
            f"yuen needs at least 2 runs per group (got {x.size} and {y.size}); add seeds"
        )
    parts = []
    for values, name in ((x, "a"), (y, "b")):
        warn_few_runs(values.size, name, "yuen")
        point, variance, h = _trimmed_parts(values, trim, name)
        _warn_no_trimming(values.size, h, trim, f"yuen ({name})")
        parts.append((point, variance, h))
    (mean_a, var_a, h_a), (mean_b, var_b, h_b) = parts
    estimate = mean_b - mean_a
    se = math.sqrt(var_a + var_b)
    n = x.size + y.size
    if se == 0:
        p = 1.0 if estimate == 0 else 0.0
        return Difference(estimate, estimate, estimate, 0.0, p, "yuen", n, ci=ci)
    df = (var_a + var_b) ** 2 / (var_a**2 / (h_a - 1) + var_b**2 / (h_b - 1))
    p = float(2 * sps.t.sf(abs(estimate / se), df))
    half = float(sps.t.ppf(0.5 + ci / 2, df)) * se
    return Difference(estimate, estimate - half, estimate + half, se, p, "yuen", n, df=df,
                      ci=ci)


def _trimmed_parts(x: np.ndarray, trim: float, name: str) -> tuple[float, float, int]:
    """(trimmed mean, its squared SE, h remaining runs) of x: (n,)."""
    n = x.size
    g = int(math.floor(trim * n))
    h = n - 2 * g
    if h < 2:
        raise ValueError(
            f"trim={trim} of the {n} runs in {name} leaves {h}; a trimmed SE needs at least 2 "
            "untrimmed runs: lower trim or add seeds"
        )
    s = np.sort(x)
    point = float(s[g:n - g].mean())
    winsorized = np.clip(s, s[g], s[n - g - 1])
    variance = float((n - 1) * winsorized.var(ddof=1) / (h * (h - 1)))
    return point, variance, h


def _warn_no_trimming(n: int, h: int, trim: float, what: str) -> None:
    if h == n and trim > 0:
        warnings.warn(StatsWarning(
            f"{what}: trim={trim} of {n} runs removes none (it trims floor({trim} * n) runs "
            "from each end), so this is the plain t interval and resists no outlier; with "
            f"5 or more runs 20% trimming drops one from each end.",
            "no-trimming", n), stacklevel=3)


def _check_trim(trim: float) -> float:
    if isinstance(trim, bool) or not isinstance(trim, int | float | np.floating) or not (
            0 <= trim < 0.5):
        raise ValueError(f"trim={trim!r} must be a share in [0, 0.5), e.g. 0.2 (20% each end)")
    return float(trim)
