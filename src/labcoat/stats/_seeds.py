"""Statistics across independent runs (seeds): t intervals and Welch's test.

Seeds are few (3-10), so intervals use Student's t, not the normal
approximation, and never pretend to precision a single run cannot give.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from labcoat.stats._checks import check_ci
from labcoat.stats._types import Difference, Interval


def _finite_1d(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).ravel()
    if array.size == 0:
        raise ValueError(f"{name} is empty: need at least one value")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf; drop or fix failed runs first")
    return array


def mean_interval(values: ArrayLike, ci: float = 0.95) -> Interval:
    """Mean of `values` (one per run) with a Student-t interval.

    values: (n,). With n == 1 the interval is infinite: one run cannot tell
    its own noise.
    """
    check_ci(ci)
    x = _finite_1d(values, "values")
    n = x.size
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, -np.inf, np.inf, se=np.inf, n=n, ci=ci)
    se = float(x.std(ddof=1) / np.sqrt(n))
    half = float(sps.t.ppf(0.5 + ci / 2, df=n - 1)) * se
    return Interval(mean, mean - half, mean + half, se=se, n=n, ci=ci)


def welch(a: ArrayLike, b: ArrayLike, ci: float = 0.95) -> Difference:
    """Welch's unequal-variance t test of mean(b) - mean(a), e.g. variant minus control seeds.

    a: (n_a,), b: (n_b,) one value per run. Needs two runs per group.
    """
    check_ci(ci)
    x, y = _finite_1d(a, "a"), _finite_1d(b, "b")
    if x.size < 2 or y.size < 2:
        raise ValueError(
            f"Welch's test needs at least 2 runs per group (got {x.size} and {y.size}); "
            "add seeds"
        )
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
