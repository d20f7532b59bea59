"""Item-level statistics for one eval: Miller (2024), "Adding Error Bars to Evals".

Eval items are the sample, drawn from an unseen super-population of questions;
the CLT gives the standard error of a mean score (Miller 2024, sec. 2.1). Items
that share a passage or template are correlated, so their SE is cluster-robust
(sec. 2.2, eq. 4). Sampling each item K times shrinks only the within-item part
of the variance, by K (sec. 3.1). When two models answer the same items, the
paired difference removes the item-difficulty variance they share (sec. 4.2),
which is often most of it; different item sets need the unpaired form (sec. 4.1).

Miller 2024 = E. Miller, "Adding Error Bars to Evals: A Statistical Approach to
Language Model Evaluations", arXiv:2411.00640.

Scores come as (n_items,) arrays, or (n_items, K) arrays when each item was
answered K times (resampled at nonzero temperature); every function reduces the
K answers of an item to their mean before computing the item-level statistics.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from labcoat.stats._checks import StatsWarning, check_ci
from labcoat.stats._types import Difference, Interval

# --- one model -----------------------------------------------------------------


def eval_mean(
    scores: ArrayLike,
    clusters: ArrayLike | None = None,
    *,
    finite_cluster_correction: bool = False,
    formula: Literal["clt", "bernoulli"] = "clt",
    ci: float = 0.95,
) -> Interval:
    """Mean eval score with its standard error and a normal (CLT) interval.

    scores: (n_items,) one score per item, or (n_items, K) when every item was
    sampled K times; then the estimate is the mean of the per-item means, and its
    SE already contains the within-item noise shrunk by K (Miller 2024, sec. 3.1;
    `resampled_mean` also splits the variance into its two parts).
    clusters: (n_items,) optional group ids (e.g. questions sharing a passage);
    the SE is then cluster-robust (Miller 2024, eq. 4) and needs at least 2
    clusters.
    finite_cluster_correction: multiply the clustered variance by G/(G-1) for G
    clusters (the CR1 small-sample factor; see `_cluster_se`). Only with clusters.
    formula: "clt" (default) uses the sample variance of the item scores.
    "bernoulli" uses sqrt(p(1-p)/n) (Miller 2024, sec. 2.1), valid only for 0/1
    scores on independent items: it warns (StatsWarning) for scores in [0, 1]
    that are not all 0 or 1, and raises for clusters or (n_items, K>1) scores.

    Returns Interval(point, low, high, se, n=n_items, ci).
    """
    check_ci(ci)
    if formula not in ("clt", "bernoulli"):
        raise ValueError(f"formula={formula!r} is not one of 'clt', 'bernoulli'")
    matrix = _item_matrix(scores, "scores")
    n, k = matrix.shape
    if n < 2:
        raise ValueError(f"eval_mean needs at least 2 items to estimate an SE, got {n}")
    item_means = matrix.mean(axis=1)
    point = float(item_means.mean())
    if formula == "bernoulli":
        if clusters is not None:
            raise ValueError(
                "formula='bernoulli' assumes independent items; with clusters use "
                "formula='clt' (the cluster-robust SE)"
            )
        if k > 1:
            raise ValueError(
                f"formula='bernoulli' would treat the {k} samples of each item as independent "
                "items; use formula='clt' for (n_items, K) scores"
            )
        _check_bernoulli_scores(item_means)
        se = bernoulli_se(point, n)
    else:
        se = _se_of_mean(item_means, clusters, finite_cluster_correction)
    half = _z(ci) * se
    return Interval(point, point - half, point + half, se=se, n=n, ci=ci)


def bernoulli_se(p_hat: float, n: int) -> float:
    """Standard error sqrt(p(1-p)/n) of a proportion p_hat of n independent 0/1 items.

    Miller 2024, sec. 2.1. For 0/1 scores it equals the CLT SE with the variance
    taken with divisor n instead of n-1. Takes a proportion, so it cannot see the
    scores: use `eval_mean(scores, formula="bernoulli")` to have non-binary
    scores flagged.
    """
    p = float(p_hat)
    if not 0.0 <= p <= 1.0:  # also rejects NaN
        raise ValueError(f"p_hat={p_hat!r} must be a proportion in [0, 1]")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n={n!r} must be a positive whole number of items")
    return math.sqrt(p * (1.0 - p) / int(n))


@dataclass(frozen=True)
class ResampledMean:
    """Mean of an eval whose items were each sampled K times, with Miller's variance split.

    Notation of Miller 2024, sec. 3.1: item i has conditional mean x_i (its score
    averaged over infinitely many answers) and conditional variance sigma_i^2
    (the spread of its answers). The per-item mean of K answers has variance

        Var(item mean) = Var(x) + E[sigma_i^2] / K

    and the SE of the eval mean is sqrt(Var(item mean) / n_items).
    """

    interval: Interval
    """Mean over all n_items * K scores with its CLT interval (n = n_items)."""
    k: int
    """Samples per item, K."""
    var_item_means: float
    """Sample variance (ddof=1) of the n_items per-item means: the total, estimating
    Var(x) + E[sigma_i^2] / K."""
    var_conditional_means: float
    """Var(x), the between-item variance: var_item_means - mean_conditional_variance / K,
    clipped at 0 (with a StatsWarning) when noise makes it negative."""
    mean_conditional_variance: float
    """E[sigma_i^2], the within-item variance: mean over items of the sample variance
    (ddof=1) of each item's K scores."""

    def projected_se(self, k: int | float) -> float:
        """SE the same eval would have with k samples per item (k may be math.inf:
        the floor that only more items, not more samples, can lower)."""
        if not k >= 1:
            raise ValueError(f"k={k!r} must be at least 1 sample per item")
        within = 0.0 if math.isinf(k) else self.mean_conditional_variance / k
        return math.sqrt((self.var_conditional_means + within) / self.interval.n)


def resampled_mean(scores: ArrayLike, *, ci: float = 0.95) -> ResampledMean:
    """Mean, SE and variance decomposition of an eval with K samples per item.

    scores: (n_items, K) with K >= 2: row i holds the K scores of item i (e.g. K
    answers sampled at temperature > 0). The estimate is the mean of the per-item
    means and its SE is the CLT SE of those means (Miller 2024, sec. 3.1), so it
    equals `eval_mean(scores).se`. For clustered items call
    `eval_mean(scores, clusters)`; the decomposition does not depend on clusters.
    """
    check_ci(ci)
    matrix = _item_matrix(scores, "scores")
    n, k = matrix.shape
    if np.ndim(scores) != 2 or k < 2:
        raise ValueError(
            f"resampled_mean needs scores of shape (n_items, K) with K >= 2 samples per item, "
            f"got shape {np.shape(scores)}; for one score per item use eval_mean"
        )
    interval = eval_mean(matrix, ci=ci)
    item_means = matrix.mean(axis=1)
    var_item_means = float(item_means.var(ddof=1))
    # E[sigma_i^2]: each item's sample variance is unbiased for its sigma_i^2.
    within = float(matrix.var(axis=1, ddof=1).mean())
    # Law of total variance (Miller 2024, sec. 3.1): Var(item mean) = Var(x) + E[sigma^2]/K,
    # so Var(x) is estimated by the difference (the one-way ANOVA / balanced REML estimator).
    between = var_item_means - within / k
    if between < 0:
        warnings.warn(
            f"the between-item variance estimate is negative ({between:.3g}): the spread of "
            f"the {n} item means is no larger than their within-item noise explains; "
            "reporting Var(x) = 0",
            StatsWarning,
            stacklevel=2,
        )
        between = 0.0
    return ResampledMean(interval, k, var_item_means, between, within)


# --- two models ----------------------------------------------------------------


def paired_difference(
    a: ArrayLike,
    b: ArrayLike,
    clusters: ArrayLike | None = None,
    ci: float = 0.95,
    *,
    finite_cluster_correction: bool = False,
) -> Difference:
    """mean(b - a) over shared items, with a CLT (or cluster-robust) interval.

    a, b: (n_items,) scores of two models on the same items, aligned; or
    (n_items, K_a) and (n_items, K_b) when items were sampled several times (each
    model's K answers are averaged per item first; K_a and K_b may differ).
    clusters: (n_items,) optional group ids (e.g. questions sharing a passage);
    then the SE is cluster-robust (Miller 2024, eq. 4 applied to the per-item
    differences), by default without small-sample correction.
    finite_cluster_correction: multiply the clustered variance by G/(G-1).

    The SE is sqrt(Var(b - a) / n) = sqrt((Var(a) + Var(b) - 2 Cov(a, b)) / n)
    (Miller 2024, sec. 4.2): the covariance of the two models' item scores is what
    pairing removes. `correlation` is Pearson corr(a, b) of the item (mean) scores.
    For different item sets use `unpaired_difference`.
    """
    check_ci(ci)
    x = _item_matrix(a, "a")
    y = _item_matrix(b, "b")
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"paired_difference needs scores on the same items: got {x.shape[0]} items in a "
            f"and {y.shape[0]} in b; align them on shared item ids, or use "
            "unpaired_difference(a, b) if the models answered different items"
        )
    if x.shape[0] < 2:
        raise ValueError("paired_difference needs at least 2 items")
    xm, ym = x.mean(axis=1), y.mean(axis=1)
    # Var(b - a) computed from the differences is identical to Var(a) + Var(b) - 2 Cov(a, b).
    d = ym - xm
    estimate = float(d.mean())
    se = _se_of_mean(d, clusters, finite_cluster_correction)
    method = "paired" if clusters is None else "paired-clustered"
    return _normal_difference(estimate, se, method, d.size, ci, correlation=_correlation(xm, ym))


def unpaired_difference(
    a: ArrayLike,
    b: ArrayLike,
    ci: float = 0.95,
    *,
    clusters_a: ArrayLike | None = None,
    clusters_b: ArrayLike | None = None,
    finite_cluster_correction: bool = False,
) -> Difference:
    """mean(b) - mean(a) for two models scored on different (independent) item sets.

    a: (n_a,) or (n_a, K_a); b: (n_b,) or (n_b, K_b); at least 2 items each.
    SE = sqrt(SE_a^2 + SE_b^2) = sqrt(s_a^2/n_a + s_b^2/n_b) (Miller 2024, sec. 4.1),
    normal interval and two-sided p-value. clusters_a / clusters_b: optional
    (n_a,) / (n_b,) group ids making that side's SE cluster-robust.
    When both models answered the same items, `paired_difference` is valid and
    usually far more precise.
    """
    check_ci(ci)
    x, y = _item_matrix(a, "a").mean(axis=1), _item_matrix(b, "b").mean(axis=1)
    if x.size < 2 or y.size < 2:
        raise ValueError(
            f"unpaired_difference needs at least 2 items per model (got {x.size} and {y.size})"
        )
    if finite_cluster_correction and clusters_a is None and clusters_b is None:
        raise ValueError(
            "finite_cluster_correction applies to clustered SEs only: pass clusters_a "
            "and/or clusters_b, or drop it"
        )
    se_a = _se_of_mean(x, clusters_a, finite_cluster_correction and clusters_a is not None)
    se_b = _se_of_mean(y, clusters_b, finite_cluster_correction and clusters_b is not None)
    clustered = clusters_a is not None or clusters_b is not None
    method = "unpaired-clustered" if clustered else "unpaired"
    estimate = float(y.mean() - x.mean())
    return _normal_difference(estimate, math.hypot(se_a, se_b), method, x.size + y.size, ci)


# --- helpers -------------------------------------------------------------------


def _item_matrix(scores: ArrayLike, name: str) -> np.ndarray:
    """scores as a finite float (n_items, K) matrix; (n,) becomes (n, 1)."""
    array = np.asarray(scores, dtype=float)
    if array.ndim == 1:
        array = array[:, None]
    elif array.ndim != 2:
        raise ValueError(
            f"{name} must have shape (n_items,) or (n_items, K), got shape {array.shape}"
        )
    if array.shape[1] == 0:
        raise ValueError(f"{name} has shape {array.shape}: every item needs at least one score")
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"{name} contains NaN or inf; drop or rescore those items (every item needs "
            "the same number K of finite scores)"
        )
    return array


def _se_of_mean(values: np.ndarray, clusters: ArrayLike | None, finite: bool) -> float:
    """CLT SE of mean(values), values: (n,), or the cluster-robust SE given ids."""
    if clusters is None:
        if finite:
            raise ValueError(
                "finite_cluster_correction applies to clustered SEs only: pass clusters or drop it"
            )
        # Miller 2024, sec. 2.1: SE = sqrt(s^2 / n) with the sample variance s^2 (ddof=1).
        return float(values.std(ddof=1) / math.sqrt(values.size))
    return _cluster_se(values, np.asarray(clusters).ravel(), finite)


def _cluster_se(values: np.ndarray, clusters: np.ndarray, finite: bool = False) -> float:
    """Cluster-robust SE of mean(values); values, clusters: (n,).

    Var = sum_g (sum_{i in g} e_i)^2 / n^2 with residuals e_i = v_i - mean(v): the
    CR0 sandwich for a constant-only regression (Liang & Zeger 1986). Expanding the
    square gives Miller 2024 eq. 4, SE_CLT^2 plus the within-cluster cross products
    (with SE_CLT's variance taken with divisor n; Miller's divisor n-1 differs from
    this only on the diagonal, by n/(n-1)). This equals statsmodels'
    OLS(...).fit(cov_type="cluster", cov_kwds={"use_correction": False}).

    finite: multiply the variance by G/(G-1) for G clusters, the CR1 factor
    (Cameron & Miller 2015, "A Practitioner's Guide to Cluster-Robust Inference",
    sec. VI.B). Stata and statsmodels' use_correction=True apply
    G/(G-1) * (N-1)/(N-p) with p regressors; for a mean p = 1, so the two agree.
    With every item its own cluster, CR1 equals the unclustered CLT SE exactly.
    """
    if clusters.size != values.size:
        raise ValueError(
            f"clusters has {clusters.size} ids for {values.size} items; give one id per item"
        )
    if clusters.dtype.kind in "fc" and np.any(np.isnan(clusters)):
        raise ValueError("clusters contains NaN; give every item a cluster id")
    _, index = np.unique(clusters, return_inverse=True)
    g = int(index.max()) + 1
    if g < 2:
        # One cluster: its residuals sum to zero, so the SE would be a fake 0.
        raise ValueError(
            "clustered standard errors need at least 2 clusters; drop clusters= to treat "
            "items as independent"
        )
    residual_sums = np.bincount(index.ravel(), weights=values - values.mean())
    variance = float(np.sum(residual_sums**2)) / values.size**2
    if finite:
        variance *= g / (g - 1)
    return math.sqrt(variance)


def _check_bernoulli_scores(values: np.ndarray) -> None:
    if np.any((values < 0) | (values > 1)):
        raise ValueError(
            f"formula='bernoulli' needs scores in [0, 1], got values from {values.min():g} to "
            f"{values.max():g}; rescale them or use formula='clt'"
        )
    binary = (values == 0) | (values == 1)
    if not np.all(binary):
        warnings.warn(
            f"formula='bernoulli' applied to {int(np.sum(~binary))} of {values.size} scores "
            "that are not 0 or 1: sqrt(p(1-p)/n) overstates the SE of such scores; use "
            "formula='clt'",
            StatsWarning,
            stacklevel=3,
        )


def _z(ci: float) -> float:
    return float(sps.norm.ppf(0.5 + ci / 2))


def _normal_difference(
    estimate: float, se: float, method: str, n: int, ci: float,
    correlation: float = float("nan"),
) -> Difference:
    if se > 0:
        p = float(2 * sps.norm.sf(abs(estimate / se)))
    else:
        p = 1.0 if estimate == 0 else 0.0
    half = _z(ci) * se
    return Difference(estimate, estimate - half, estimate + half, se, p, method, n,
                      correlation=correlation, ci=ci)


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])
