"""Item-level statistics for one eval: Miller (2024), "Adding Error Bars to Evals".

Eval items are the sample; the CLT gives the standard error of a mean score.
When two models answer the same items, the paired difference removes the
item-difficulty variance they share (Miller 2024, section 4), which is often
most of it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from labcoat.stats._checks import check_ci
from labcoat.stats._types import Difference


def paired_difference(
    a: ArrayLike, b: ArrayLike, clusters: ArrayLike | None = None, ci: float = 0.95
) -> Difference:
    """mean(b - a) over shared items, with a CLT (or cluster-robust) interval.

    a, b: (n_items,) scores of two models on the same items, aligned.
    clusters: (n_items,) optional group ids (e.g. questions sharing a passage);
    then the SE is cluster-robust (Miller 2024, eq. 4), without small-sample
    correction.
    """
    check_ci(ci)
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(
            f"paired_difference needs scores on the same items: got {x.size} and {y.size}"
        )
    if x.size < 2:
        raise ValueError("paired_difference needs at least 2 items")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("scores contain NaN or inf")
    d = y - x
    n = d.size
    estimate = float(d.mean())
    if clusters is None:
        se = float(d.std(ddof=1) / np.sqrt(n))
        method = "paired"
    else:
        se = _cluster_se(d, np.asarray(clusters).ravel())
        method = "paired-clustered"
    z = float(sps.norm.ppf(0.5 + ci / 2))
    p = float(2 * sps.norm.sf(abs(estimate / se))) if se > 0 else (1.0 if estimate == 0 else 0.0)
    corr = _correlation(x, y)
    return Difference(estimate, estimate - z * se, estimate + z * se, se, p, method, n,
                      correlation=corr, ci=ci)


def _cluster_se(d: np.ndarray, clusters: np.ndarray) -> float:
    if clusters.size != d.size:
        raise ValueError(f"clusters has {clusters.size} ids for {d.size} items")
    _, index = np.unique(clusters, return_inverse=True)
    if index.max() < 1:
        # One cluster: its residuals sum to zero, so the SE would be a fake 0.
        raise ValueError("clustered standard errors need at least 2 clusters")
    residual_sums = np.bincount(index, weights=d - d.mean())
    return float(np.sqrt(np.sum(residual_sums**2)) / d.size)


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])
