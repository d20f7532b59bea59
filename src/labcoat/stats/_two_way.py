"""A ratio of two means over seeds x items, with a two-way bootstrap interval.

When every seed (or seed pair) is measured on the same items, both are samples:
other seeds and other items would give other numbers. The two-way ("pigeonhole")
bootstrap of Owen (2007, "The pigeonhole bootstrap", Ann. Appl. Stat. 1) draws the
seeds with replacement and, independently, the items with replacement, and keeps
every (seed, item) cell of the drawn rows and columns; it is conservative for the
variance of a mean over both (it counts the cell noise twice at most). With one
seed it is the ordinary item bootstrap.

Resamples are drawn as count vectors, so a replication is two matrix products, not a
loop over cells: the weighted mean is ws @ X @ wi / (sum ws sum wi).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from labcoat.stats._checks import check_ci
from labcoat.stats._types import Difference

_CHUNK = 512  # replications per chunk: (512, items) count matrices stay small


def ratio_of_means(num: ArrayLike, den: ArrayLike | None = None, *, ci: float = 0.95,
                   reps: int = 4000, seed: int | np.random.Generator = 0) -> Difference:
    """mean(num) / mean(den) over seeds x items, with a two-way percentile bootstrap interval.

    num, den: (seeds, items) or (items,) with the same shape; den None is 1 everywhere
    (then this is the mean of num). Seeds and items are resampled independently (Owen
    2007); with one seed, items only. Returns a `Difference` whose estimate is the ratio,
    (low, high) the percentile interval at level `ci`, se the bootstrap standard
    deviation, and p_value the two-sided Wald p-value of "the ratio is 0" with that
    standard error (not the share of replications beyond 0, which cannot go below
    1/reps: a family of 100 components under Holm needs smaller p-values than that).
    n: items; df: infinite.
    The same seed gives the same replications, so intervals at two levels from two
    calls come from one bootstrap distribution.
    """
    check_ci(ci)
    if int(reps) != reps or reps < 100:
        raise ValueError(f"reps={reps!r} must be an integer >= 100, e.g. 4000")
    x = _table(num, "num")
    d = np.ones_like(x) if den is None else _table(den, "den")
    if d.shape != x.shape:
        raise ValueError(f"num has shape {x.shape} and den {d.shape}; they must match "
                         "(seeds, items)")
    total = d.sum()
    if total == 0:
        raise ValueError("mean(den) is 0: the ratio is undefined")
    estimate = float(x.sum() / total)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    replicates = _replicates(x, d, int(reps), rng)
    finite = replicates[np.isfinite(replicates)]
    low, high = np.quantile(finite, [(1 - ci) / 2, (1 + ci) / 2]) if finite.size else (
        np.nan, np.nan)
    se = float(np.std(finite, ddof=1)) if finite.size > 1 else float("nan")
    if se > 0:
        p_value = float(2 * sps.norm.sf(abs(estimate) / se))
    else:  # every replication gave the same ratio
        p_value = 1.0 if estimate == 0 or not np.isfinite(se) else 0.0
    seeds, items = x.shape
    method = "two-way bootstrap (seeds x items)" if seeds > 1 else "item bootstrap"
    return Difference(estimate=estimate, low=float(low), high=float(high),
                      se=se, p_value=p_value, method=method,
                      n=items, ci=ci)


def _table(values: ArrayLike, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"{name} must be (seeds, items) or (items,) with at least 2 items, "
                         f"got shape {np.shape(values)}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} has non-finite values; drop or fix those items first")
    return x


def _replicates(x: np.ndarray, d: np.ndarray, reps: int, rng: np.random.Generator
                ) -> np.ndarray:
    """(reps,) ratios of the weighted sums, seeds and items drawn independently."""
    seeds, items = x.shape
    out = np.empty(reps)
    for start in range(0, reps, _CHUNK):
        n = min(_CHUNK, reps - start)
        wi = _counts(rng, n, items)
        ws = _counts(rng, n, seeds) if seeds > 1 else np.ones((n, 1))
        top = ((ws @ x) * wi).sum(axis=1)
        bottom = ((ws @ d) * wi).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[start:start + n] = top / bottom
    return out


def _counts(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """(n, size) how often each index is drawn in n resamples of `size` with replacement
    (one bincount over offset indices: ~20x faster than `multinomial` at 1000 items)."""
    drawn = rng.integers(0, size, (n, size)) + size * np.arange(n)[:, None]
    return np.bincount(drawn.ravel(), minlength=n * size).reshape(n, size).astype(float)
