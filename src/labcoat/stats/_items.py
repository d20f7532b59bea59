"""Item-level statistics for one eval: Miller (2024), "Adding Error Bars to Evals".

Eval items are the sample, drawn from an unseen super-population of questions;
the CLT gives the standard error of a mean score (Miller 2024, sec. 2.1). Items
that share a passage or template are correlated, so their SE is cluster-robust
(sec. 2.2, eq. 4), with a small-sample correction (CR2, Bell & McCaffrey 2002) and t
quantiles, because few clusters make the plain sandwich too narrow (Cameron & Miller
2015). 0/1 scores get intervals that hold near p = 0 or 1 (Wilson; for paired differences
the exact McNemar test with a matched Tango score interval, which never disagree;
Agresti-Caffo for unpaired differences). Sampling each item K times shrinks
only the within-item part of the variance, by K (sec. 3.1). When two models answer
the same items, the paired difference removes the item-difficulty variance they share
(sec. 4.2), which is often most of it; different item sets need the unpaired form (sec. 4.1).

Miller 2024 = E. Miller, "Adding Error Bars to Evals: A Statistical Approach to
Language Model Evaluations", arXiv:2411.00640.

Scores come as (n_items,) arrays, or (n_items, K) arrays when each item was
answered K times (resampled at nonzero temperature); every function reduces the
K answers of an item to their mean before computing the item-level statistics.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize
from scipy import stats as sps

from labcoat.stats._checks import StatsWarning, check_ci, check_within, clip_to_bounds
from labcoat.stats._types import Difference, Interval

# --- one model -----------------------------------------------------------------

# Cluster-robust variance estimators of a mean (see `_cluster_variance`); True and False
# are the older spellings of "CR1" and "CR0".
ClusterCorrection = Literal["CR0", "CR1", "CR2"]
CORRECTIONS = ("CR0", "CR1", "CR2")
# Below this many clusters a StatsWarning says the interval may under-cover: even CR2 with
# Bell-McCaffrey degrees of freedom covers only 85-94% at 5-10 unbalanced or binary
# clusters (benchmarks/coverage.py; Cameron & Miller 2015, sec. VI, put "few" at 20-50).
FEW_CLUSTERS = 20


def eval_mean(
    scores: ArrayLike,
    clusters: ArrayLike | None = None,
    *,
    finite_cluster_correction: bool | ClusterCorrection | None = None,
    formula: Literal["auto", "clt", "wilson", "bernoulli"] = "auto",
    ci: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """Mean eval score with its standard error and a confidence interval.

    scores: (n_items,) one score per item, or (n_items, K) when every item was
    sampled K times; then the estimate is the mean of the per-item means, and its
    SE already contains the within-item noise shrunk by K (Miller 2024, sec. 3.1;
    `resampled_mean` also splits the variance into its two parts).
    clusters: (n_items,) optional group ids (e.g. questions sharing a passage);
    the SE is then cluster-robust (Miller 2024, eq. 4) and needs at least 2
    clusters; below 20 clusters a StatsWarning (kind "few-clusters") says the
    interval may under-cover.
    finite_cluster_correction: the small-sample correction of the clustered SE
    (only with clusters; see `_cluster_variance`). None (default) is "CR2", the
    Bell-McCaffrey estimator with its Satterthwaite degrees of freedom for the t
    quantile; "CR1" (or True) multiplies the CR0 variance by G/(G-1) and takes
    t(G-1) quantiles, as statsmodels' cluster OLS with use_t=True; "CR0" (or False)
    is the uncorrected sandwich with a normal quantile (labcoat's old default,
    which covered 70-85% at 5 clusters). For balanced clusters CR2 equals CR1.
    formula: "auto" (default) gives 0/1 item scores the Wilson score interval
    (Wilson 1927; with clusters, Wilson with the effective sample size
    p(1-p)/SE^2, capped at n_items, and the t quantile), which stays inside [0, 1]
    and covers near p = 0 or 1 where the CLT interval does not, and other scores
    the CLT interval. "clt" always uses the symmetric interval point +- q * SE.
    "wilson" insists on the Wilson interval (raises for scores that are not 0/1).
    "bernoulli" uses sqrt(p(1-p)/n) (Miller 2024, sec. 2.1), valid only for 0/1
    scores on independent items: it warns (StatsWarning) for scores in [0, 1]
    that are not all 0 or 1, and raises for clusters or (n_items, K>1) scores.
    bounds: (lo, hi) the scores' range (e.g. (0.0, 1.0)): the interval is cut to
    it (the mean lies inside, so cutting never lowers coverage); raises ValueError
    for a score outside.

    Returns Interval(point, low, high, se, n=n_items, ci). `se` is always the
    (cluster-robust) standard error of the mean; with the Wilson interval the bounds
    are not point +- q * se.
    """
    check_ci(ci)
    if formula not in ("auto", "clt", "wilson", "bernoulli"):
        raise ValueError(
            f"formula={formula!r} is not one of 'auto', 'clt', 'wilson', 'bernoulli'")
    matrix = _item_matrix(scores, "scores")
    n, k = matrix.shape
    if n < 2:
        raise ValueError(f"eval_mean needs at least 2 items to estimate an SE, got {n}")
    correction = _correction(finite_cluster_correction, clusters is not None)
    check_within(matrix, bounds, "scores")
    item_means = matrix.mean(axis=1)
    point = float(item_means.mean())
    binary = _is_binary(item_means)
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
        half = _z(ci) * se
        interval = Interval(point, point - half, point + half, se=se, n=n, ci=ci)
        return clip_to_bounds(interval, bounds)
    if formula == "wilson" and not binary:
        raise ValueError(
            "formula='wilson' needs 0/1 item scores (one answer per item, or K answers "
            "that agree); use formula='clt' for other scores"
        )
    variance, df = _variance_of_mean(item_means, clusters, correction, stacklevel=2)
    se = math.sqrt(variance)
    q = _quantile(ci, df)
    if binary and formula != "clt":
        # Design effect: n_eff = p(1-p) / Var(mean) items would give the clustered variance
        # if they were independent (Kish 1965; Korn & Graubard 1998 use it for survey
        # proportions). Capped at n: a design effect below 1 is noise with few clusters.
        n_eff = float(n)
        if clusters is not None and variance > 0:
            n_eff = min(n_eff, point * (1 - point) / variance)
        low, high = _wilson(point, n_eff, q)
        if n_eff < FEW_ITEMS and ci >= 0.9:
            warnings.warn(StatsWarning(
                f"eval_mean: {n_eff:.3g} (effective) 0/1 items: the Wilson interval's "
                f"coverage swings with the true accuracy at this size (92-97% for a nominal "
                f"95% at 20 items, Brown, Cai & DasGupta 2001; benchmarks/README.md); "
                f"evaluate {FEW_ITEMS} or more items per task to pin it down",
                "few-items"), stacklevel=2)
    else:
        low, high = point - q * se, point + q * se
    return clip_to_bounds(Interval(point, low, high, se=se, n=n, ci=ci), bounds)


# Below this many (effective) 0/1 items the Wilson interval's coverage dips below 93% for
# some accuracies (92.1% at 20 items, p = 0.95, benchmarks/coverage.py).
FEW_ITEMS = 30


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
    interval = eval_mean(matrix, formula="clt", ci=ci)
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
    finite_cluster_correction: bool | ClusterCorrection | None = None,
    formula: Literal["auto", "clt", "mcnemar", "agresti-min"] = "auto",
) -> Difference:
    """mean(b - a) over shared items, with a CLT (or cluster-robust) interval.

    a, b: (n_items,) scores of two models on the same items, aligned; or
    (n_items, K_a) and (n_items, K_b) when items were sampled several times (each
    model's K answers are averaged per item first; K_a and K_b may differ).
    clusters: (n_items,) optional group ids (e.g. questions sharing a passage);
    then the SE is cluster-robust (Miller 2024, eq. 4 applied to the per-item
    differences) with the small-sample correction `finite_cluster_correction`
    (default "CR2" with Bell-McCaffrey degrees of freedom; "CR1"/True, "CR0"/False:
    see `eval_mean`), a t interval and p-value, and a StatsWarning below 20 clusters.
    formula: "auto" (default) uses, for 0/1 scores of both models without
    clusters, "mcnemar": the p-value of the exact McNemar test (the two-sided
    binomial test of the n01 items b got right and a missed among the m = n01 + n10
    discordant ones, p = min(1, 2 P(Bin(m, 1/2) <= min(n01, n10))), as statsmodels'
    mcnemar(exact=True); McNemar 1947) and Tango's score interval for the difference
    (Tango 1998, "Equivalence test and confidence interval for the difference in
    proportions for the paired-sample design", Stat. Med. 17), whose test at 0 is
    McNemar's score test; where the exact p-value is >= 1 - ci the interval is
    extended to reach 0. So p < 1 - ci exactly when the interval excludes 0, and
    both hold at small n: the CLT test gave p = 0.0495 to 3 discordant items out of
    10 (exact p = 0.25) and rejected 7-11% of the time under no difference with
    10-30 items (benchmarks/small_sample_verdicts.py). (Where the asymptotic McNemar
    p-value exceeds the exact one, which happens only below p = 0.0006, the larger
    is reported.) "agresti-min" gives the Agresti-Min interval (Agresti & Min 2005:
    add 1/2 to each cell of the 2x2 table, then the Wald interval) with the CLT
    p-value; "clt" always uses estimate +- z * se. "mcnemar" and "agresti-min" need
    0/1 scores on independent items.

    The SE is sqrt(Var(b - a) / n) = sqrt((Var(a) + Var(b) - 2 Cov(a, b)) / n)
    (Miller 2024, sec. 4.2): the covariance of the two models' item scores is what
    pairing removes. `correlation` is Pearson corr(a, b) of the item (mean) scores.
    `estimate` and `se` are those of the CLT (or clustered) analysis in every case;
    "mcnemar" changes the bounds and the p-value, "agresti-min" only the bounds. For
    different item sets use `unpaired_difference`.
    """
    check_ci(ci)
    if formula not in ("auto", "clt", "mcnemar", "agresti-min"):
        raise ValueError(f"formula={formula!r} is not one of 'auto', 'clt', 'mcnemar', "
                         "'agresti-min'")
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
    correction = _correction(finite_cluster_correction, clusters is not None)
    xm, ym = x.mean(axis=1), y.mean(axis=1)
    binary = _is_binary(xm) and _is_binary(ym)
    if formula in ("agresti-min", "mcnemar") and (not binary or clusters is not None):
        raise ValueError(
            f"formula={formula!r} needs 0/1 scores of both models on independent items "
            "(no clusters); use formula='clt'"
        )
    # Var(b - a) computed from the differences is identical to Var(a) + Var(b) - 2 Cov(a, b).
    d = ym - xm
    estimate = float(d.mean())
    variance, df = _variance_of_mean(d, clusters, correction, stacklevel=2)
    corr = _correlation(xm, ym)
    if clusters is not None:
        return _difference(estimate, math.sqrt(variance), "paired-clustered", d.size, ci, df,
                           correlation=corr)
    result = _difference(estimate, math.sqrt(variance), "paired", d.size, ci, correlation=corr)
    if binary and formula == "agresti-min":
        low, high = _agresti_min(xm, ym, _z(ci))
        result = replace(result, low=low, high=high, method="paired-agresti-min")
    elif binary and formula != "clt":
        counts = (int(np.sum((xm == 0) & (ym == 1))), int(np.sum((xm == 1) & (ym == 0))),
                  int(d.size))
        p, low, high = mcnemar_interval(*counts, ci=ci)
        result = replace(result, low=low, high=high, p_value=p, method="paired-mcnemar",
                         counts=counts)
    return result


def mcnemar_interval(n01: int, n10: int, n: int, ci: float = 0.95
                     ) -> tuple[float, float, float]:
    """(p, low, high) for the difference p01 - p10 of paired 0/1 scores (see
    `paired_difference`, formula "mcnemar"): the exact McNemar p-value, and Tango's score
    interval at level ci, extended to reach 0 when p >= 1 - ci, so the two never disagree.

    n01: items b got right and a missed; n10: the reverse; n: all items.
    """
    check_ci(ci)
    m = n01 + n10
    if m == 0:
        p = 1.0
    else:
        exact = min(1.0, 2.0 * float(sps.binom.cdf(min(n01, n10), m, 0.5)))
        score = 2.0 * float(sps.norm.sf(abs(n01 - n10) / math.sqrt(m)))
        p = max(exact, score)  # they differ only below p = 0.0006 (see the docstring)
    low, high = _tango(n01, n10, n, _z(ci))
    if p >= 1 - ci:
        low, high = min(low, 0.0), max(high, 0.0)
    return p, low, high


def _tango_score(delta: float, n01: int, n10: int, n: int) -> float:
    """Tango's (1998) score statistic for H0: p01 - p10 = delta. The restricted MLE of
    p10 maximizes n01 log(p10 + delta) + n10 log p10 + n00_11 log(1 - 2 p10 - delta);
    its derivative is the quadratic 2n t^2 - B t - C = 0 below. At delta = 0 this is
    McNemar's (n01 - n10) / sqrt(n01 + n10)."""
    rest = n - n01 - n10
    b = n01 * (1 - delta) + n10 * (1 - 3 * delta) - 2 * rest * delta
    c = n10 * delta * (1 - delta)
    t = (b + math.sqrt(max(b * b + 8 * n * c, 0.0))) / (4 * n)
    variance = max((2 * t + delta - delta * delta) / n, 1e-300)
    return ((n01 - n10) / n - delta) / math.sqrt(variance)


def _tango(n01: int, n10: int, n: int, z: float) -> tuple[float, float]:
    """Tango's score interval {delta : |score(delta)| < z}, each end by root search
    between the estimate and +-1 (the score falls from +inf to -inf over (-1, 1))."""
    estimate = (n01 - n10) / n
    edge = 1 - 1e-12

    def bound(end: float, target: float) -> float:
        """The root of score = target between the estimate and `end` (+-edge); `end`
        itself when the score never gets there (the estimate sits at that end)."""
        gap = lambda x: _tango_score(x, n01, n10, n) - target  # noqa: E731
        if abs(estimate) >= abs(end) and estimate * end > 0 or gap(end) * gap(estimate) > 0:
            return math.copysign(1.0, end)
        return float(optimize.brentq(gap, estimate, end, xtol=1e-12))

    return max(-1.0, bound(-edge, z)), min(1.0, bound(edge, -z))


def unpaired_difference(
    a: ArrayLike,
    b: ArrayLike,
    ci: float = 0.95,
    *,
    clusters_a: ArrayLike | None = None,
    clusters_b: ArrayLike | None = None,
    finite_cluster_correction: bool | ClusterCorrection | None = None,
    formula: Literal["auto", "clt", "agresti-caffo"] = "auto",
) -> Difference:
    """mean(b) - mean(a) for two models scored on different (independent) item sets.

    a: (n_a,) or (n_a, K_a); b: (n_b,) or (n_b, K_b); at least 2 items each.
    SE = sqrt(SE_a^2 + SE_b^2) = sqrt(s_a^2/n_a + s_b^2/n_b) (Miller 2024, sec. 4.1),
    normal interval and two-sided p-value. clusters_a / clusters_b: optional
    (n_a,) / (n_b,) group ids making that side's SE cluster-robust (correction as in
    `eval_mean`, default "CR2"); then the interval and p-value use t with the
    Welch-Satterthwaite combination of the sides' degrees of freedom (an unclustered
    side counts as infinite), and fewer than 20 clusters on a side warn.
    formula: "auto" (default) uses, for 0/1 scores without clusters, the
    Agresti-Caffo interval (Agresti & Caffo 2000: add one success and one failure to
    each model, then the Wald interval), which covers near p = 0 or 1; "clt" always
    uses estimate +- z * se; "agresti-caffo" insists (0/1 scores only). `estimate`,
    `se` and `p_value` are the CLT ones in every case.
    When both models answered the same items, `paired_difference` is valid and
    usually far more precise.
    """
    check_ci(ci)
    if formula not in ("auto", "clt", "agresti-caffo"):
        raise ValueError(f"formula={formula!r} is not one of 'auto', 'clt', 'agresti-caffo'")
    x, y = _item_matrix(a, "a").mean(axis=1), _item_matrix(b, "b").mean(axis=1)
    if x.size < 2 or y.size < 2:
        raise ValueError(
            f"unpaired_difference needs at least 2 items per model (got {x.size} and {y.size})"
        )
    clustered = clusters_a is not None or clusters_b is not None
    correction = _correction(finite_cluster_correction, clustered, "clusters_a and/or clusters_b")
    binary = _is_binary(x) and _is_binary(y)
    if formula == "agresti-caffo" and (not binary or clustered):
        raise ValueError(
            "formula='agresti-caffo' needs 0/1 scores on independent items (no clusters); "
            "use formula='clt'"
        )
    var_a, df_a = _variance_of_mean(x, clusters_a, correction, stacklevel=2, name="clusters_a")
    var_b, df_b = _variance_of_mean(y, clusters_b, correction, stacklevel=2, name="clusters_b")
    estimate = float(y.mean() - x.mean())
    se = math.sqrt(var_a + var_b)
    if clustered:
        # Welch-Satterthwaite: df = (V_a + V_b)^2 / (V_a^2/df_a + V_b^2/df_b).
        terms = sum(v * v / f for v, f in ((var_a, df_a), (var_b, df_b)) if math.isfinite(f))
        df = (var_a + var_b) ** 2 / terms if terms > 0 else math.inf
        return _difference(estimate, se, "unpaired-clustered", x.size + y.size, ci, df)
    result = _difference(estimate, se, "unpaired", x.size + y.size, ci)
    if binary and formula != "clt":
        low, high = _agresti_caffo(x, y, _z(ci))
        result = replace(result, low=low, high=high, method="unpaired-agresti-caffo")
    return result


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


def _is_binary(values: np.ndarray) -> bool:
    return bool(np.all((values == 0) | (values == 1)))


def _correction(
    finite: bool | str | None, clustered: bool, needs: str = "clusters"
) -> str:
    """The cluster correction to use: None means the default, "CR2"."""
    if finite is None:
        return "CR2"
    if isinstance(finite, bool | np.bool_):
        choice = "CR1" if finite else "CR0"
        if finite and not clustered:
            raise ValueError(
                f"finite_cluster_correction applies to clustered SEs only: pass {needs} "
                "or drop it"
            )
        return choice
    if finite not in CORRECTIONS:
        raise ValueError(
            f"finite_cluster_correction={finite!r} is not supported; choose 'CR2' (the "
            "default), 'CR1' (or True), or 'CR0' (or False)"
        )
    if not clustered:
        raise ValueError(
            f"finite_cluster_correction applies to clustered SEs only: pass {needs} or drop it"
        )
    return str(finite)


def _variance_of_mean(
    values: np.ndarray, clusters: ArrayLike | None, correction: str, stacklevel: int,
    name: str = "clusters",
) -> tuple[float, float]:
    """(Var(mean(values)), degrees of freedom of its t quantile); values: (n,).

    Without clusters: s^2 / n with the sample variance (ddof=1; Miller 2024, sec. 2.1)
    and a normal quantile (df = inf). With cluster ids: `_cluster_variance`, and a
    StatsWarning (kind "few-clusters") below FEW_CLUSTERS clusters.
    stacklevel: what the caller would pass to warnings.warn to point at the user.
    """
    if clusters is None:
        return float(values.var(ddof=1)) / values.size, math.inf
    ids = np.asarray(clusters).ravel()
    variance, df, g = _cluster_variance(values, ids, correction)
    if g < FEW_CLUSTERS:
        message = (
            f"{name}: only {g} clusters. Cluster-robust intervals rest on {g} cluster sums "
            f"and may under-cover below {FEW_CLUSTERS} clusters, most with unequal cluster "
            "sizes or 0/1 scores near 0 or 1 (benchmarks/coverage.py: 85-95% at 5-10 "
            f"clusters with the default CR2). Score more clusters (passages, templates) or "
            "treat the interval as a lower bound on the uncertainty."
        )
        warnings.warn(StatsWarning(message, "few-clusters"), stacklevel=stacklevel + 1)
    return variance, df


def _cluster_variance(
    values: np.ndarray, clusters: np.ndarray, correction: str
) -> tuple[float, float, int]:
    """(variance of mean(values), t degrees of freedom, number of clusters G).

    values, clusters: (n,). With residuals e_i = v_i - mean(v), cluster sums S_g and
    sizes n_g:

    - CR0: sum_g S_g^2 / n^2, the sandwich for a constant-only regression (Liang &
      Zeger 1986). Expanding the square gives Miller 2024 eq. 4, SE_CLT^2 plus the
      within-cluster cross products (with SE_CLT's variance taken with divisor n;
      Miller's divisor n-1 differs only on the diagonal, by n/(n-1)). Equals
      statsmodels' OLS(...).fit(cov_type="cluster", cov_kwds={"use_correction":
      False}). Normal quantile (df = inf).
    - CR1: CR0 * G/(G-1) with t(G-1) quantiles (Cameron & Miller 2015, "A
      Practitioner's Guide to Cluster-Robust Inference", sec. VI.B). Stata and
      statsmodels' use_correction=True apply G/(G-1) * (N-1)/(N-p) with p regressors;
      for a mean p = 1, so the two agree. With every item its own cluster, CR1 equals
      the unclustered CLT SE exactly.
    - CR2 (Bell & McCaffrey 2002): residuals of cluster g are scaled by
      (I - H_gg)^(-1/2). For a mean H_gg = J/n (J all ones), whose one nonzero
      eigenvalue n_g/n belongs to the constant vector, so the scaled cluster sum is
      S_g / sqrt(1 - n_g/n) and Var = sum_g S_g^2 / (n^2 (1 - n_g/n)). Its degrees of
      freedom are Bell & McCaffrey's Satterthwaite approximation under independent
      homoskedastic errors, df = tr(B)^2 / tr(B^2) with B = C^(1/2) M C^(1/2),
      C = diag(1 / (n^2 (1 - n_g/n))), M = diag(n_g) - n_g n_h / n (the covariance
      of the cluster sums, up to sigma^2) (Imbens & Kolesar 2016, "Robust standard
      errors in small samples", sec. 3; Cameron & Miller 2015, sec. VI.C). For equal
      cluster sizes CR2 equals CR1 and df = G - 1; with unequal sizes df < G - 1.
    """
    if clusters.size != values.size:
        raise ValueError(
            f"clusters has {clusters.size} ids for {values.size} items; give one id per item"
        )
    if clusters.dtype.kind in "fc" and np.any(np.isnan(clusters)):
        raise ValueError("clusters contains NaN; give every item a cluster id")
    _, index = np.unique(clusters, return_inverse=True)
    index = index.ravel()
    g = int(index.max()) + 1
    if g < 2:
        # One cluster: its residuals sum to zero, so the SE would be a fake 0.
        raise ValueError(
            "clustered standard errors need at least 2 clusters; drop clusters= to treat "
            "items as independent"
        )
    n = values.size
    sums = np.bincount(index, weights=values - values.mean(), minlength=g)
    if correction == "CR0":
        return float(np.sum(sums**2)) / n**2, math.inf, g
    if correction == "CR1":
        return float(np.sum(sums**2)) / n**2 * g / (g - 1), float(g - 1), g
    sizes = np.bincount(index, minlength=g).astype(float)
    c = 1.0 / (n**2 * (1.0 - sizes / n))
    variance = float(np.sum(c * sums**2))
    # tr(B) = sum_g c_g n_g (1 - n_g/n) = 1/n; tr(B^2) = sum_gh c_g c_h M_gh^2 expanded
    # so that no G x G matrix is formed.
    trace_b = float(np.sum(c * sizes * (1.0 - sizes / n)))
    trace_b2 = float(np.sum(c**2 * sizes**2) - 2.0 * np.sum(c**2 * sizes**3) / n
                     + np.sum(c * sizes**2) ** 2 / n**2)
    return variance, trace_b**2 / trace_b2, g


def _wilson(p: float, n: float, q: float) -> tuple[float, float]:
    """Wilson (1927) score interval for a proportion p of n trials, quantile q:
    (p + q^2/2n) / (1 + q^2/n) +- q / (1 + q^2/n) sqrt(p(1-p)/n + q^2/4n^2)."""
    q2 = q * q
    centre = (p + q2 / (2 * n)) / (1 + q2 / n)
    half = q / (1 + q2 / n) * math.sqrt(p * (1 - p) / n + q2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _agresti_min(x: np.ndarray, y: np.ndarray, z: float) -> tuple[float, float]:
    """Agresti & Min (2005) interval for mean(y - x) of paired 0/1 scores: add 1/2 to each
    cell of the 2x2 table (n + 2 pairs), then p = (n01 - n10) / (n + 2) +-
    z sqrt((p01 + p10 - (p01 - p10)^2) / (n + 2))."""
    total = x.size + 2.0
    p01 = (np.sum((x == 0) & (y == 1)) + 0.5) / total
    p10 = (np.sum((x == 1) & (y == 0)) + 0.5) / total
    centre = float(p01 - p10)
    half = z * math.sqrt((p01 + p10 - centre**2) / total)
    return max(-1.0, centre - half), min(1.0, centre + half)


def _agresti_caffo(x: np.ndarray, y: np.ndarray, z: float) -> tuple[float, float]:
    """Agresti & Caffo (2000) interval for mean(y) - mean(x) of independent 0/1 scores:
    add one success and one failure to each, then the Wald interval."""
    px, py = float(x.sum() + 1) / (x.size + 2), float(y.sum() + 1) / (y.size + 2)
    centre = float(py - px)
    half = z * math.sqrt(px * (1 - px) / (x.size + 2) + py * (1 - py) / (y.size + 2))
    return max(-1.0, centre - half), min(1.0, centre + half)


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


def _quantile(ci: float, df: float) -> float:
    """Two-sided quantile: Student t with df degrees of freedom, normal for df = inf."""
    return _z(ci) if math.isinf(df) else float(sps.t.ppf(0.5 + ci / 2, df))


def _difference(
    estimate: float, se: float, method: str, n: int, ci: float, df: float = math.inf,
    correlation: float = float("nan"),
) -> Difference:
    """estimate +- q * se with q and the two-sided p-value from t(df) (normal for inf)."""
    if se > 0:
        t = abs(estimate / se)
        p = float(2 * (sps.norm.sf(t) if math.isinf(df) else sps.t.sf(t, df)))
    else:
        p = 1.0 if estimate == 0 else 0.0
    half = _quantile(ci, df) * se
    return Difference(estimate, estimate - half, estimate + half, se, p, method, n,
                      df=df, correlation=correlation, ci=ci)


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])
