"""One model's eval mean (Miller 2024) and unpaired differences, against statsmodels,
scipy and brute-force simulation with fixed seeds."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

from labcoat.stats._checks import StatsWarning
from labcoat.stats._items import bernoulli_se, eval_mean, resampled_mean, unpaired_difference

Z95 = 1.959963984540054

few_clusters_ok = pytest.mark.filterwarnings("ignore:.*clusters:labcoat.stats._checks.StatsWarning")


def _clustered_scores(
    seed: int, clusters: int = 15, size: int = 6
) -> tuple[np.ndarray, np.ndarray]:
    """Scores whose items share a cluster effect (e.g. questions about one passage)."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(clusters), size)
    scores = rng.normal(0, 1, clusters)[groups] + rng.normal(0.5, 0.7, groups.size)
    return scores, groups


def _ols_cluster_se(y: np.ndarray, groups: np.ndarray, use_correction: bool) -> float:
    fit = sm.OLS(y, np.ones((y.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": use_correction}
    )
    return float(fit.bse[0])


# --- eval_mean: CLT ------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_eval_mean_matches_statsmodels_ols_and_scipy_sem(seed: int) -> None:
    """Point = OLS constant, SE = nonrobust OLS SE = scipy.stats.sem; bounds point -/+ z*SE."""
    scores = np.random.default_rng(seed).beta(2, 3, 80)
    ols = sm.OLS(scores, np.ones((80, 1))).fit()
    result = eval_mean(scores)
    assert result.point == pytest.approx(ols.params[0])
    assert result.se == pytest.approx(ols.bse[0])
    assert result.se == pytest.approx(stats.sem(scores))
    assert (result.low, result.high) == pytest.approx(
        (result.point - Z95 * result.se, result.point + Z95 * result.se))
    assert result.n == 80 and result.ci == 0.95


def test_eval_mean_hand_checked() -> None:
    """[0, 1, 1, 1] with formula='clt': mean 0.75, sample variance 0.25, SE sqrt(0.25/4) =
    0.25; 90% z = 1.6449."""
    result = eval_mean([0, 1, 1, 1], ci=0.9, formula="clt")
    assert result.point == 0.75
    assert result.se == pytest.approx(0.25)
    assert result.high == pytest.approx(0.75 + 1.6448536 * 0.25)


def test_eval_mean_non_binary_default_is_the_clt_interval() -> None:
    """Partial-credit scores: the default ('auto') is the symmetric CLT interval."""
    scores = [0.5, 0.25, 1.0, 0.0, 0.75]
    assert eval_mean(scores) == eval_mean(scores, formula="clt")


@pytest.mark.parametrize(
    "scores", [[], [0.5], [0.1, float("nan")], [0.1, float("inf")], np.zeros((2, 2, 2))]
)
def test_eval_mean_rejects_short_non_finite_or_3d(scores: object) -> None:
    """Fewer than 2 items, NaN/inf, or a 3-D array raise ValueError."""
    with pytest.raises(ValueError):
        eval_mean(scores)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"ci": 95}, "ci="),
    ({"formula": "wald"}, "formula"),
    ({"finite_cluster_correction": True}, "clusters"),
])
def test_eval_mean_rejects_bad_options(kwargs: dict, match: str) -> None:
    """A ci of 95, an unknown formula, or a cluster correction without clusters raise."""
    with pytest.raises(ValueError, match=match):
        eval_mean([0.0, 1.0, 1.0], **kwargs)


# --- eval_mean: clustered ------------------------------------------------------


@few_clusters_ok
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clustered_se_matches_statsmodels_both_corrections(seed: int) -> None:
    """CR0 (False) = statsmodels use_correction=False with a z interval; CR1 (True) =
    use_correction=True with statsmodels' use_t interval, t(G-1); the default (CR2)
    equals CR1 for equal cluster sizes.

    Both are also checked against the hand formula sqrt(sum_g (sum_i e_i)^2) / n.
    """
    scores, groups = _clustered_scores(seed)
    e = scores - scores.mean()
    g = 15
    cr0 = math.sqrt(sum(e[groups == c].sum() ** 2 for c in range(g))) / scores.size
    plain = eval_mean(scores, groups, finite_cluster_correction=False)
    corrected = eval_mean(scores, groups, finite_cluster_correction=True)
    default = eval_mean(scores, groups)
    assert plain.se == pytest.approx(cr0)
    assert corrected.se == pytest.approx(cr0 * math.sqrt(g / (g - 1)))
    assert plain.se == pytest.approx(_ols_cluster_se(scores, groups, False))
    assert corrected.se == pytest.approx(_ols_cluster_se(scores, groups, True))
    assert plain.high - plain.point == pytest.approx(Z95 * plain.se)
    fit = sm.OLS(scores, np.ones((scores.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    assert (corrected.low, corrected.high) == pytest.approx(tuple(fit.conf_int(0.05)[0]))
    assert (default.low, default.high, default.se) == pytest.approx(
        (corrected.low, corrected.high, corrected.se))


def test_statsmodels_correction_is_g_over_g_minus_1_only_for_a_mean() -> None:
    """statsmodels multiplies by G/(G-1) * (N-1)/(N-p); for a mean (p = 1) the second
    factor is 1, which is why our option agrees with it. With a second regressor it is not."""
    scores, groups = _clustered_scores(3)
    n, g = scores.size, 15
    ratio = (_ols_cluster_se(scores, groups, True) / _ols_cluster_se(scores, groups, False)) ** 2
    assert ratio == pytest.approx(g / (g - 1))
    x = np.column_stack([np.ones(n), np.arange(n)])

    def slope_var(correction: bool) -> float:
        fit = sm.OLS(scores, x).fit(
            cov_type="cluster", cov_kwds={"groups": groups, "use_correction": correction})
        return float(fit.bse[1] ** 2)

    assert slope_var(True) / slope_var(False) == pytest.approx(g / (g - 1) * (n - 1) / (n - 2))


@few_clusters_ok
def test_clustering_widens_the_interval_for_correlated_items() -> None:
    """Strong cluster effects: the clustered SE is well above the naive CLT SE."""
    scores, groups = _clustered_scores(4)
    assert eval_mean(scores, groups).se > 1.5 * eval_mean(scores).se


def test_singleton_clusters_reduce_to_the_clt_se() -> None:
    """Every item its own cluster: CR1 and CR2 equal the CLT SE (CR2 with df = n - 1, the
    one-sample t interval); CR0 is it times sqrt((n-1)/n)."""
    scores = np.random.default_rng(5).normal(size=40)
    ids = np.arange(40)
    clt = eval_mean(scores).se
    assert eval_mean(scores, ids, finite_cluster_correction=True).se == pytest.approx(clt)
    assert eval_mean(scores, ids, finite_cluster_correction=False).se == pytest.approx(
        clt * math.sqrt(39 / 40))
    default = eval_mean(scores, ids)
    low, high = stats.t.interval(0.95, 39, loc=scores.mean(), scale=stats.sem(scores))
    assert (default.se, default.low, default.high) == pytest.approx((clt, low, high))


@few_clusters_ok
def test_unbalanced_string_clusters_match_statsmodels() -> None:
    """Unequal cluster sizes with string ids in any order match statsmodels' codes."""
    rng = np.random.default_rng(6)
    codes = rng.integers(0, 7, 50)
    labels = np.array(list("pqrstuv"))[codes]
    scores = rng.normal(size=50) + codes * 0.3
    result = eval_mean(scores, labels, finite_cluster_correction=True)
    assert result.se == pytest.approx(_ols_cluster_se(scores, codes, True))


@pytest.mark.parametrize(("clusters", "match"), [
    ([1, 1, 1, 1], "at least 2 clusters"),
    ([1, 2, 3], "4 items"),
    ([1.0, float("nan"), 2.0, 2.0], "NaN"),
])
def test_bad_clusters_raise(clusters: list, match: str) -> None:
    """One cluster, the wrong number of ids, or a NaN id raise ValueError."""
    with pytest.raises(ValueError, match=match):
        eval_mean([0.1, 0.4, 0.3, 0.9], clusters)


# --- eval_mean: Bernoulli ------------------------------------------------------


def test_bernoulli_formula_on_binary_scores_matches_statsmodels_without_warning() -> None:
    """0/1 scores: no StatsWarning; interval = statsmodels proportion_confint(method='normal');
    SE = CLT SE * sqrt((n-1)/n)."""
    scores = (np.random.default_rng(7).random(120) < 0.3).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = eval_mean(scores, formula="bernoulli")
    low, high = proportion_confint(int(scores.sum()), scores.size, alpha=0.05, method="normal")
    assert (result.low, result.high) == pytest.approx((low, high))
    assert result.se == pytest.approx(eval_mean(scores).se * math.sqrt(119 / 120))


def test_bernoulli_formula_warns_on_non_binary_scores() -> None:
    """Partial-credit scores in [0, 1]: the Bernoulli SE overstates the SE, and warns."""
    scores = [0.5, 0.25, 1.0, 0.0, 0.75, 0.5]
    with pytest.warns(StatsWarning, match="not 0 or 1"):
        result = eval_mean(scores, formula="bernoulli")
    p = np.mean(scores)
    assert result.se == pytest.approx(math.sqrt(p * (1 - p) / 6))
    assert result.se > eval_mean(scores).se


@pytest.mark.parametrize(("scores", "kwargs", "match"), [
    ([0.0, 2.0, 1.0], {}, r"\[0, 1\]"),
    ([0, 1, 1, 0], {"clusters": [0, 0, 1, 1]}, "independent"),
    ([[0, 1], [1, 1], [0, 0]], {}, "samples"),
])
def test_bernoulli_formula_refuses_invalid_uses(scores: list, kwargs: dict, match: str) -> None:
    """Scores outside [0, 1], clustered items, or resampled items raise ValueError."""
    with pytest.raises(ValueError, match=match):
        eval_mean(scores, formula="bernoulli", **kwargs)


def test_bernoulli_se_by_hand() -> None:
    """p=0.8, n=100: sqrt(0.16/100) = 0.04; p in {0, 1}: 0."""
    assert bernoulli_se(0.8, 100) == pytest.approx(0.04)
    assert bernoulli_se(1.0, 10) == 0.0


@pytest.mark.parametrize(("p", "n"), [(1.2, 10), (-0.1, 10), (float("nan"), 10), (0.5, 0),
                                      (0.5, 2.5)])
def test_bernoulli_se_rejects_invalid_input(p: float, n: float) -> None:
    """A proportion outside [0, 1] or a non-positive / fractional n raise ValueError."""
    with pytest.raises(ValueError):
        bernoulli_se(p, n)


# --- resampled items -----------------------------------------------------------


def test_two_dimensional_scores_use_item_means() -> None:
    """(n, K): point = mean of all scores, SE = CLT SE of the per-item means (by hand)."""
    scores = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1], [1, 0, 0]], dtype=float)
    means = np.array([2 / 3, 0, 1, 1 / 3])
    result = eval_mean(scores)
    assert result.point == pytest.approx(0.5)
    assert result.se == pytest.approx(means.std(ddof=1) / 2)
    assert result.n == 4
    assert eval_mean(scores[:, :1]).se == pytest.approx(eval_mean(scores[:, 0]).se)


@few_clusters_ok
def test_two_dimensional_scores_with_clusters_cluster_the_item_means() -> None:
    """(n, K) scores with clusters: the clustered SE of the per-item means (statsmodels)."""
    rng = np.random.default_rng(12)
    groups = np.repeat(np.arange(10), 4)
    scores = rng.normal(0, 1, 10)[groups][:, None] + rng.normal(0, 1, (40, 3))
    result = eval_mean(scores, groups, finite_cluster_correction=True)
    assert result.se == pytest.approx(_ols_cluster_se(scores.mean(axis=1), groups, True))
    assert result.n == 40


def test_resampled_decomposition_by_hand() -> None:
    """Two items, K = 2: means 0.5 and 1; within variances 0.5 and 0 (mean 0.25);
    var of means 0.125; Var(x) = 0.125 - 0.25/2 = 0."""
    result = resampled_mean([[0.0, 1.0], [1.0, 1.0]])
    assert result.k == 2
    assert result.var_item_means == pytest.approx(0.125)
    assert result.mean_conditional_variance == pytest.approx(0.25)
    assert result.var_conditional_means == pytest.approx(0.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_resampled_decomposition_matches_statsmodels_mixedlm(seed: int) -> None:
    """Balanced one-way random effects: REML Var(item effect) and residual variance equal
    Miller's Var(x) and E[sigma^2]; MixedLM's SE of the mean equals ours."""
    rng = np.random.default_rng(seed)
    n, k = 50, 4
    scores = rng.normal(0, 0.8, n)[:, None] + rng.normal(0, 1.2, (n, k))
    groups = np.repeat(np.arange(n), k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MixedLM convergence chatter
        fit = sm.MixedLM(scores.ravel(), np.ones((n * k, 1)), groups=groups).fit(reml=True)
    result = resampled_mean(scores)
    assert result.var_conditional_means == pytest.approx(float(fit.cov_re[0, 0]), rel=1e-3)
    assert result.mean_conditional_variance == pytest.approx(fit.scale, rel=1e-3)
    assert result.interval.se == pytest.approx(float(fit.bse_fe[0]), rel=1e-3)
    assert result.interval.point == pytest.approx(float(fit.fe_params[0]))


def test_resampled_se_matches_brute_force_simulation() -> None:
    """3000 simulated evals (fixed seed) of 150 items x K=4 Bernoulli answers with item
    accuracy p_i ~ U(0.1, 0.9): Var(x) = 0.8^2/12, E[sigma^2] = E[p(1-p)] = 0.5 - 0.25 - Var(x).

    The reported SE, the true sqrt((Var(x) + E[sigma^2]/K)/n) and the empirical sd of the
    means agree within a few %, the decomposition is unbiased, and projected_se(1) predicts
    the sd of single-answer evals. Treating all n*K answers as independent items would
    understate the SE by far more than the tolerance.
    """
    rng = np.random.default_rng(2024)
    sims, n, k = 3000, 150, 4
    var_x = 0.8**2 / 12
    within = 0.5 - 0.25 - var_x
    true_se = math.sqrt((var_x + within / k) / n)
    p = rng.uniform(0.1, 0.9, (sims, n))
    answers = (rng.random((sims, n, k)) < p[:, :, None]).astype(float)
    results = [resampled_mean(a) for a in answers]
    points = np.array([r.interval.point for r in results])
    ses = np.array([r.interval.se for r in results])
    assert points.std(ddof=1) == pytest.approx(true_se, rel=0.04)
    assert ses.mean() == pytest.approx(points.std(ddof=1), rel=0.04)
    assert np.mean([r.var_conditional_means for r in results]) == pytest.approx(var_x, rel=0.03)
    assert np.mean([r.mean_conditional_variance for r in results]) == pytest.approx(within,
                                                                                   rel=0.01)
    single = answers[:, :, 0].mean(axis=1)  # the same evals with one answer per item
    assert np.mean([r.projected_se(1) for r in results]) == pytest.approx(
        single.std(ddof=1), rel=0.05)
    naive = np.mean([eval_mean(a.ravel()).se for a in answers[:200]])
    assert naive < 0.85 * points.std(ddof=1)


def test_projected_se_at_pilot_k_and_floor() -> None:
    """projected_se(K) = the eval's SE (no clipping); projected_se(inf) = sqrt(Var(x)/n)."""
    rng = np.random.default_rng(8)
    scores = rng.normal(0, 1, 30)[:, None] + rng.normal(0, 0.5, (30, 3))
    result = resampled_mean(scores)
    assert result.projected_se(3) == pytest.approx(result.interval.se)
    assert result.projected_se(math.inf) == pytest.approx(
        math.sqrt(result.var_conditional_means / 30))
    assert result.projected_se(1) > result.projected_se(3) > result.projected_se(math.inf)
    with pytest.raises(ValueError):
        result.projected_se(0)


def test_negative_between_item_variance_is_clipped_with_a_warning() -> None:
    """Identical item means with noisy answers: raw Var(x) < 0 is reported as 0 and warns."""
    scores = [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    with pytest.warns(StatsWarning, match="negative"):
        result = resampled_mean(scores)
    assert result.var_conditional_means == 0.0
    assert result.interval.se == 0.0


@pytest.mark.parametrize("scores", [[0.1, 0.2, 0.3], [[0.1], [0.2], [0.4]]])
def test_resampled_mean_needs_k_of_at_least_two(scores: list) -> None:
    """One score per item has no within-item variance: ValueError pointing to eval_mean."""
    with pytest.raises(ValueError, match="eval_mean"):
        resampled_mean(scores)


@few_clusters_ok
def test_eval_mean_is_deterministic() -> None:
    """Same inputs give the same Interval."""
    scores, groups = _clustered_scores(9)
    assert eval_mean(scores, groups) == eval_mean(scores.copy(), groups.copy())


# --- unpaired_difference -------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_unpaired_difference_matches_statsmodels_ztest(seed: int) -> None:
    """Different item sets: SE, z, p and CI equal statsmodels CompareMeans with
    usevar='unequal' (a z test on sqrt(s_a^2/n_a + s_b^2/n_b))."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0.5, 0.2, 70), rng.normal(0.6, 0.35, 110)
    compare = CompareMeans(DescrStatsW(b), DescrStatsW(a))
    z, p = compare.ztest_ind(usevar="unequal")
    low, high = compare.zconfint_diff(alpha=0.05, usevar="unequal")
    result = unpaired_difference(a, b)
    assert result.estimate == pytest.approx(b.mean() - a.mean())
    assert result.se == pytest.approx(math.sqrt(a.var(ddof=1) / 70 + b.var(ddof=1) / 110))
    assert result.estimate / result.se == pytest.approx(z)
    assert result.p_value == pytest.approx(p)
    assert (result.low, result.high) == pytest.approx((low, high))
    assert result.method == "unpaired" and result.n == 180
    assert math.isnan(result.correlation)


@few_clusters_ok
def test_unpaired_clustered_adds_clustered_variances() -> None:
    """Clusters on one side: SE = hypot(CR1 SE of a, CLT SE of b), checked with statsmodels;
    t interval with the Welch-Satterthwaite df (V_a + V_b)^2 / (V_a^2 / (G - 1)), the
    unclustered side counting as infinite df."""
    a, groups = _clustered_scores(10)
    b = np.random.default_rng(11).normal(0.7, 1.0, 40)
    result = unpaired_difference(a, b, clusters_a=groups, finite_cluster_correction=True)
    var_a, var_b = _ols_cluster_se(a, groups, True) ** 2, stats.sem(b) ** 2
    assert result.se == pytest.approx(math.sqrt(var_a + var_b))
    assert result.method == "unpaired-clustered"
    df = (var_a + var_b) ** 2 / (var_a**2 / 14)
    assert result.df == pytest.approx(df)
    assert result.high - result.estimate == pytest.approx(stats.t.ppf(0.975, df) * result.se)


@pytest.mark.parametrize(("a", "b", "kwargs"), [
    ([0.1], [0.2, 0.3], {}),
    ([0.1, 0.2], [float("nan"), 0.3], {}),
    ([0.1, 0.2], [0.3, 0.4], {"finite_cluster_correction": True}),
])
def test_unpaired_difference_rejects_invalid_input(a: list, b: list, kwargs: dict) -> None:
    """One item, NaN, or a cluster correction without clusters raise ValueError."""
    with pytest.raises(ValueError):
        unpaired_difference(a, b, **kwargs)


# --- 0/1 scores: Wilson, Agresti-Caffo ---------------------------------------------


@pytest.mark.parametrize(("count", "n"), [(0, 20), (1, 20), (18, 20), (20, 20), (45, 50),
                                          (270, 300)])
def test_binary_scores_get_the_wilson_interval(count: int, n: int) -> None:
    """0/1 scores without clusters: bounds equal statsmodels proportion_confint(method=
    'wilson'), also at 0 and n correct; se stays the CLT SE."""
    scores = np.r_[np.ones(count), np.zeros(n - count)]
    result = eval_mean(scores)
    low, high = proportion_confint(count, n, alpha=0.05, method="wilson")
    assert (result.low, result.high) == pytest.approx((low, high), abs=1e-12)
    assert 0.0 <= result.low <= result.high <= 1.0
    assert result.se == pytest.approx(scores.std(ddof=1) / math.sqrt(n))
    assert eval_mean(scores, formula="wilson") == result


def test_wilson_formula_refuses_non_binary_scores() -> None:
    """formula='wilson' on partial credit raises; a 90% level matches statsmodels too."""
    with pytest.raises(ValueError, match="0/1"):
        eval_mean([0.5, 1.0, 0.0], formula="wilson")
    result = eval_mean([1, 1, 0, 1, 1, 1, 1, 1, 1, 1], ci=0.9, formula="wilson")
    assert (result.low, result.high) == pytest.approx(
        proportion_confint(9, 10, alpha=0.1, method="wilson"))


def test_wilson_exact_coverage_near_p_09() -> None:
    """Exact coverage over all counts (binomial pmf) at p = 0.9: the default interval covers
    at least 93% for 20, 30, 50 and 100 items, where formula='clt' drops below 90% at 30."""
    def coverage(n: int, formula: str) -> float:
        hits = 0.0
        for k in range(n + 1):
            result = eval_mean(np.r_[np.ones(k), np.zeros(n - k)], formula=formula)
            hits += stats.binom.pmf(k, n, 0.9) * (result.low <= 0.9 <= result.high)
        return hits

    assert all(coverage(n, "auto") >= 0.93 for n in (20, 30, 50, 100))
    assert coverage(30, "clt") < 0.90


@pytest.mark.parametrize("seed", [0, 1])
def test_clustered_binary_scores_get_the_design_effect_wilson(seed: int) -> None:
    """0/1 scores with clusters: Wilson with n_eff = p(1-p)/SE_CR2^2 (capped at n) and the
    t(df) quantile, i.e. statsmodels' Wilson for n_eff trials at the level whose normal
    quantile is that t quantile; formula='clt' gives the symmetric t interval."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(25), 6)
    p = np.clip(rng.beta(8, 1.5, 25), 0, 1)[groups]
    scores = (rng.random(groups.size) < p).astype(float)
    result = eval_mean(scores, groups)
    clt = eval_mean(scores, groups, formula="clt")
    point = scores.mean()
    n_eff = min(scores.size, point * (1 - point) / result.se**2)
    q = stats.t.ppf(0.975, 24)  # equal cluster sizes: Bell-McCaffrey df = G - 1
    low, high = proportion_confint(point * n_eff, n_eff, alpha=2 * stats.norm.sf(q),
                                   method="wilson")
    assert (result.low, result.high) == pytest.approx((low, high))
    assert result.se == clt.se
    assert clt.high - clt.point == pytest.approx(q * clt.se)


def test_bounds_cut_the_interval_and_reject_values_outside() -> None:
    """bounds=(0, 1): a CLT interval reaching past 1 is cut at 1; a score outside raises."""
    scores = [1.0, 1.0, 0.95, 1.0, 0.9, 1.0]
    plain = eval_mean(scores)
    assert plain.high > 1
    cut = eval_mean(scores, bounds=(0.0, 1.0))
    assert (cut.point, cut.low, cut.high, cut.se) == (plain.point, plain.low, 1.0, plain.se)
    with pytest.raises(ValueError, match="outside bounds"):
        eval_mean([0.5, 1.2], bounds=(0.0, 1.0))
    with pytest.raises(ValueError, match="lo < hi"):
        eval_mean([0.5, 0.7], bounds=(1.0, 0.0))


@pytest.mark.parametrize("seed", [0, 1])
def test_unpaired_binary_scores_get_agresti_caffo(seed: int) -> None:
    """Different item sets, 0/1 scores: bounds equal statsmodels
    confint_proportions_2indep(method='agresti-caffo') for b minus a."""
    rng = np.random.default_rng(seed)
    a, b = (rng.random(40) < 0.85).astype(float), (rng.random(60) < 0.93).astype(float)
    result = unpaired_difference(a, b)
    low, high = confint_proportions_2indep(b.sum(), b.size, a.sum(), a.size,
                                           method="agresti-caffo", compare="diff")
    assert result.method == "unpaired-agresti-caffo"
    assert (result.low, result.high) == pytest.approx((low, high))
    clt = unpaired_difference(a, b, formula="clt")
    assert (result.estimate, result.se, result.p_value) == (clt.estimate, clt.se, clt.p_value)


@few_clusters_ok
def test_clustered_coverage_beats_the_uncorrected_sandwich() -> None:
    """Seeded coverage check: 600 evals of 6 clusters with unequal sizes (2 to 40 items) and
    a strong cluster effect. The default (CR2, Bell-McCaffrey t) covers at least 92%; the
    old default (CR0, z) under 85%."""
    rng = np.random.default_rng(17)
    sizes = np.array([2, 3, 5, 10, 20, 40])
    groups = np.repeat(np.arange(6), sizes)
    sims = 600
    hits_cr2 = hits_cr0 = 0
    for _ in range(sims):
        scores = rng.normal(0, 1, 6)[groups] + rng.normal(0, 1, groups.size)
        cr2 = eval_mean(scores, groups)
        cr0 = eval_mean(scores, groups, finite_cluster_correction=False)
        hits_cr2 += cr2.low <= 0 <= cr2.high
        hits_cr0 += cr0.low <= 0 <= cr0.high
    assert hits_cr2 / sims >= 0.92
    assert hits_cr0 / sims < 0.85
