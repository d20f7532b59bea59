"""Item-level paired differences (Miller 2024) against statsmodels OLS, scipy.stats.norm,
the CR2 matrix formula and a weighted-data form of the Agresti-Min interval."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import linalg, stats
from statsmodels.stats.weightstats import DescrStatsW

from labcoat.stats._checks import StatsWarning
from labcoat.stats._items import eval_mean, paired_difference

few_clusters_ok = pytest.mark.filterwarnings("ignore:.*clusters:labcoat.stats._checks.StatsWarning")


def _scores(seed: int, n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Two models on the same n items: shared item difficulty makes a and b correlated."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0.0, 1.0, n)
    a = difficulty + rng.normal(0.0, 0.3, n)
    b = difficulty + 0.1 + rng.normal(0.0, 0.3, n)
    return a, b


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unclustered_se_matches_statsmodels_ols(seed: int) -> None:
    """SE equals the nonrobust OLS SE of d = b - a on a constant, i.e. std(d, ddof=1)/sqrt(n)."""
    a, b = _scores(seed)
    d = b - a
    ols = sm.OLS(d, np.ones((d.size, 1))).fit()
    result = paired_difference(a, b)
    assert result.estimate == pytest.approx(ols.params[0])
    assert result.se == pytest.approx(ols.bse[0])
    assert result.se == pytest.approx(d.std(ddof=1) / math.sqrt(d.size))
    assert result.method == "paired" and result.n == d.size


def test_p_value_and_interval_use_the_normal_approximation() -> None:
    """p = 2*sf(|est/se|) and bounds est -/+ z*se, with scipy.stats.norm (CLT, not t)."""
    a, b = _scores(3)
    d = b - a
    est, se = d.mean(), d.std(ddof=1) / math.sqrt(d.size)
    z = stats.norm.ppf(0.975)
    result = paired_difference(a, b)
    assert result.p_value == pytest.approx(2 * stats.norm.sf(abs(est / se)))
    assert (result.low, result.high) == pytest.approx((est - z * se, est + z * se))


def test_hand_checked_small_example() -> None:
    """b - a = [1, 0, 1, 0]: estimate 0.5, se = sqrt(1/3)/2."""
    result = paired_difference([0, 1, 0, 1], [1, 1, 1, 1])
    assert result.estimate == 0.5
    assert result.se == pytest.approx(math.sqrt(1 / 3) / 2)


@pytest.mark.parametrize("seed", [0, 1])
def test_clustered_se_matches_statsmodels_without_correction(seed: int) -> None:
    """finite_cluster_correction=False (CR0) equals statsmodels cluster OLS with
    use_correction=False, with a normal interval (the old default)."""
    a, b = _scores(seed)
    groups = np.repeat(np.arange(12), 5)
    d = b - a
    ols = sm.OLS(d, np.ones((d.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
    )
    # statsmodels 0.14/0.15 with use_correction=False applies no G/(G-1) or (n-1)/(n-k)
    # factor, so its SE is exactly sqrt(sum_g (sum_{i in g} e_i)^2) / n; check both.
    e = d - d.mean()
    by_hand = math.sqrt(sum(e[groups == g].sum() ** 2 for g in range(12))) / d.size
    assert ols.bse[0] == pytest.approx(by_hand)
    with pytest.warns(StatsWarning, match="only 12 clusters"):
        result = paired_difference(a, b, clusters=groups, finite_cluster_correction=False)
    assert result.se == pytest.approx(by_hand)
    assert result.method == "paired-clustered" and result.df == math.inf
    z = stats.norm.ppf(0.975)
    assert result.high - result.estimate == pytest.approx(z * by_hand)


@few_clusters_ok
@pytest.mark.parametrize("seed", [0, 1])
def test_default_clustered_interval_matches_statsmodels_cr1_with_t(seed: int) -> None:
    """Equal cluster sizes: the default CR2 equals CR1, and SE, t(G-1) interval and
    p-value equal statsmodels' cluster OLS with use_correction=True and use_t=True."""
    a, b = _scores(seed)
    groups = np.repeat(np.arange(12), 5)
    fit = sm.OLS(b - a, np.ones((a.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    result = paired_difference(a, b, clusters=groups)
    assert result.se == pytest.approx(fit.bse[0])
    assert result.df == pytest.approx(11)
    assert (result.low, result.high) == pytest.approx(tuple(fit.conf_int(alpha=0.05)[0]))
    assert result.p_value == pytest.approx(fit.pvalues[0])
    cr1 = paired_difference(a, b, clusters=groups, finite_cluster_correction="CR1")
    assert (cr1.low, cr1.high, cr1.df) == pytest.approx((result.low, result.high, 11))


def _cr2_by_matrices(values: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """CR2 variance and Bell-McCaffrey df for a regression on a constant, straight from
    the matrices: A_g = (I - H_gg)^(-1/2) by scipy.linalg.sqrtm, G's columns
    (I - H)_{.g} A_g X_g (X'X)^-1, df = (sum lambda)^2 / sum lambda^2 over eig(G'G)
    (Imbens & Kolesar 2016)."""
    n = values.size
    x = np.ones((n, 1))
    hat = x @ x.T / n
    e = values - values.mean()
    meat, columns = 0.0, []
    for g in np.unique(groups):
        rows = groups == g
        adjust = np.linalg.inv(linalg.sqrtm(np.eye(rows.sum()) - hat[np.ix_(rows, rows)]).real)
        meat += (x[rows].T @ adjust @ e[rows]).item() ** 2
        columns.append(((np.eye(n) - hat)[:, rows] @ adjust @ x[rows] / n).ravel())
    lam = np.linalg.eigvalsh(np.array(columns) @ np.array(columns).T)
    return meat / n**2, float(lam.sum() ** 2 / np.sum(lam**2))


@few_clusters_ok
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unbalanced_cr2_matches_the_matrix_formula(seed: int) -> None:
    """Unequal clusters: SE and df equal CR2 / Bell-McCaffrey computed from the hat
    matrix; df is below G - 1 and the interval is the t(df) interval."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 15, 8)
    groups = np.repeat(np.arange(8), sizes)
    a = rng.normal(size=groups.size)
    b = a + rng.normal(0, 1, 8)[groups] + rng.normal(0.1, 0.5, groups.size)
    variance, df = _cr2_by_matrices(b - a, groups)
    result = paired_difference(a, b, clusters=groups)
    assert result.se == pytest.approx(math.sqrt(variance))
    assert result.df == pytest.approx(df)
    assert df < 7
    assert result.high - result.estimate == pytest.approx(stats.t.ppf(0.975, df) * result.se)
    assert result.p_value == pytest.approx(2 * stats.t.sf(abs(result.estimate / result.se), df))


def test_few_clusters_warn_and_twenty_do_not() -> None:
    """Below 20 clusters a StatsWarning of kind 'few-clusters'; 20 clusters are silent."""
    a, b = _scores(7, n=60)
    with pytest.warns(StatsWarning, match="only 19 clusters") as record:
        paired_difference(a[:57], b[:57], clusters=np.repeat(np.arange(19), 3))
    assert record[0].message.kind == "few-clusters"
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        paired_difference(a, b, clusters=np.repeat(np.arange(20), 3))


@few_clusters_ok
def test_cluster_ids_may_be_strings_in_any_order() -> None:
    """Cluster ids are labels: strings and interleaved order give the same SE as integers."""
    a, b = _scores(4, n=6)
    ints = paired_difference(a, b, clusters=[0, 1, 2, 0, 1, 2])
    labels = paired_difference(a, b, clusters=["p", "q", "r", "p", "q", "r"])
    assert labels.se == pytest.approx(ints.se)


def test_clusters_must_match_items() -> None:
    """A cluster id list of the wrong length raises ValueError."""
    with pytest.raises(ValueError):
        paired_difference([0, 1, 1], [1, 1, 0], clusters=[0, 1])


def test_single_cluster_is_rejected() -> None:
    """One cluster cannot estimate a cluster-robust SE; expect ValueError, not p = 0."""
    with pytest.raises(ValueError):
        paired_difference([0, 0, 1, 1], [1, 1, 1, 0], clusters=[7, 7, 7, 7])


def test_correlation_equals_numpy_corrcoef() -> None:
    """Reported correlation is Pearson corr(a, b)."""
    a, b = _scores(5)
    assert paired_difference(a, b).correlation == pytest.approx(np.corrcoef(a, b)[0, 1])


def test_correlation_is_nan_for_a_constant_model() -> None:
    """Correlation with a constant score vector is undefined (NaN)."""
    assert math.isnan(paired_difference([1, 1, 1], [0, 1, 0]).correlation)


def test_pairing_shrinks_se_when_models_correlate() -> None:
    """Worked example: a and b share item difficulty, so the paired SE is far below unpaired."""
    a = np.array([0.2, 0.9, 0.4, 0.7, 0.1, 0.8])
    b = np.array([0.3, 1.0, 0.4, 0.9, 0.2, 0.9])  # a + [.1, .1, 0, .2, .1, .1]
    n = a.size
    unpaired_se = math.sqrt(a.var(ddof=1) / n + b.var(ddof=1) / n)
    result = paired_difference(a, b)
    assert np.corrcoef(a, b)[0, 1] > 0.9
    assert result.estimate == pytest.approx(0.1)
    assert result.se == pytest.approx(math.sqrt(0.004 / n))  # var(ddof=1) of the deltas = 0.004
    assert result.se < unpaired_se / 5


@pytest.mark.parametrize(
    ("a", "b"), [([0, 1, 1], [1, 0]), ([], []), ([1], [0]), ([0, float("nan")], [1, 1])]
)
def test_rejects_mismatched_short_or_nan_input(a: list[float], b: list[float]) -> None:
    """Different lengths, fewer than 2 items, or NaN raise ValueError."""
    with pytest.raises(ValueError):
        paired_difference(a, b)


def test_zero_variance_difference() -> None:
    """Identical deltas on every item: SE 0, zero-width interval, p 0 (or 1 when all equal)."""
    shifted = paired_difference([1, 2, 3], [3, 4, 5])
    assert (shifted.estimate, shifted.low, shifted.high) == (2.0, 2.0, 2.0)
    assert (shifted.se, shifted.p_value) == (0.0, 0.0)
    same = paired_difference([0.1, 0.2, 0.3], [0.1, 0.2, 0.3])
    assert (same.estimate, same.se, same.p_value) == (0.0, 0.0, 1.0)


@few_clusters_ok
def test_paired_difference_is_deterministic() -> None:
    """Same inputs give the same Difference (compared field by field, NaN-free here)."""
    a, b = _scores(6)
    groups = np.repeat(np.arange(6), 10)
    assert paired_difference(a, b, groups) == paired_difference(a.copy(), b.copy(), groups)


# --- covariance form, finite-cluster correction, resampled inputs ----------------


@pytest.mark.parametrize("seed", [0, 1])
def test_se_equals_millers_covariance_form(seed: int) -> None:
    """SE^2 = (Var(a) + Var(b) - 2 Cov(a, b)) / n (Miller 2024, sec. 4.2), with numpy's cov."""
    a, b = _scores(seed)
    cov = np.cov(a, b)  # ddof=1
    n = a.size
    result = paired_difference(a, b)
    assert result.se == pytest.approx(math.sqrt((cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]) / n))
    # ... which is the unpaired SE minus what the shared item difficulty explains.
    assert result.se < math.sqrt((cov[0, 0] + cov[1, 1]) / n) / 2


@few_clusters_ok
@pytest.mark.parametrize("seed", [0, 1])
def test_clustered_finite_correction_matches_statsmodels_use_correction(seed: int) -> None:
    """finite_cluster_correction=True (CR1) multiplies the variance by G/(G-1), which equals
    statsmodels' cluster OLS with use_correction=True for a constant-only model."""
    a, b = _scores(seed)
    groups = np.repeat(np.arange(12), 5)
    ols = sm.OLS(b - a, np.ones((a.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": True}
    )
    plain = paired_difference(a, b, clusters=groups, finite_cluster_correction=False)
    result = paired_difference(a, b, clusters=groups, finite_cluster_correction=True)
    assert result.se == pytest.approx(ols.bse[0])
    assert result.se == pytest.approx(plain.se * math.sqrt(12 / 11))
    assert result.method == "paired-clustered" and result.df == 11


@pytest.mark.parametrize("choice", [True, "CR1", "CR2"])
def test_finite_correction_without_clusters_is_rejected(choice: bool | str) -> None:
    """A cluster correction has no meaning without clusters: ValueError, not a silent no-op."""
    with pytest.raises(ValueError, match="clusters"):
        paired_difference([0, 1, 1], [1, 1, 0], finite_cluster_correction=choice)


def test_unknown_cluster_correction_is_rejected() -> None:
    """An unknown correction name raises and lists the choices."""
    with pytest.raises(ValueError, match="'CR2'"):
        paired_difference([0, 1, 1, 0], [1, 1, 0, 0], clusters=[0, 0, 1, 1],
                          finite_cluster_correction="HC3")


def test_different_lengths_point_to_unpaired_difference() -> None:
    """Scores on different item sets: the error names unpaired_difference as the fix."""
    with pytest.raises(ValueError, match="unpaired_difference"):
        paired_difference([0, 1, 1, 0], [1, 0, 1])


def test_resampled_inputs_are_averaged_per_item() -> None:
    """(n, K_a) and (n, K_b) with K_a != K_b: the difference of per-item means, by hand."""
    a = np.array([[0, 1], [1, 1], [0, 0], [1, 0]], dtype=float)
    b = np.array([[1, 1, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0]], dtype=float)
    d = np.array([1 - 0.5, 2 / 3 - 1, 1 / 3 - 0, 2 / 3 - 0.5])
    result = paired_difference(a, b)
    assert result.estimate == pytest.approx(d.mean())
    assert result.se == pytest.approx(d.std(ddof=1) / 2)
    assert result.n == 4
    assert result.correlation == pytest.approx(
        np.corrcoef([0.5, 1, 0, 0.5], [1, 2 / 3, 1 / 3, 2 / 3])[0, 1])


def test_resampled_paired_se_matches_simulation() -> None:
    """2000 simulated paired evals (fixed seed), 100 items, K = 3 noisy answers per model:
    the mean reported SE equals the empirical sd of the estimate within a few %, and the
    true sqrt((omega^2 + sigma_A^2/K + sigma_B^2/K) / n)."""
    rng = np.random.default_rng(11)
    sims, n, k = 2000, 100, 3
    omega2, sigma2 = 0.04, 0.25
    x_a = rng.normal(0.0, 1.0, (sims, n))
    x_b = x_a + 0.05 + rng.normal(0.0, math.sqrt(omega2), (sims, n))
    a = x_a[:, :, None] + rng.normal(0.0, math.sqrt(sigma2), (sims, n, k))
    b = x_b[:, :, None] + rng.normal(0.0, math.sqrt(sigma2), (sims, n, k))
    results = [paired_difference(a[i], b[i]) for i in range(sims)]
    estimates = np.array([r.estimate for r in results])
    true_se = math.sqrt((omega2 + 2 * sigma2 / k) / n)
    assert estimates.std(ddof=1) == pytest.approx(true_se, rel=0.05)
    assert np.mean([r.se for r in results]) == pytest.approx(estimates.std(ddof=1), rel=0.05)


# --- 0/1 scores: Agresti-Min --------------------------------------------------------


def _agresti_min_reference(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Agresti-Min as a weighted data set: the n differences plus half a pair in each
    cell of the 2x2 table (d = +1, -1, 0, 0, weight 1/2 each); Wald interval with the
    weighted variance (ddof=0) over the total weight n + 2 (statsmodels DescrStatsW)."""
    d = np.concatenate([b - a, [1.0, -1.0, 0.0, 0.0]])
    w = np.concatenate([np.ones(a.size), [0.5] * 4])
    found = DescrStatsW(d, weights=w, ddof=0)
    half = stats.norm.ppf(0.975) * math.sqrt(found.var / found.sum_weights)
    return found.mean - half, found.mean + half


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_binary_paired_scores_get_the_agresti_min_interval(seed: int) -> None:
    """0/1 scores near p = 0.9, formula='agresti-min' (no longer the default: issue 30):
    bounds equal the weighted-data Agresti-Min reference; estimate, se and p-value stay
    the CLT ones; formula='clt' restores the CLT bounds."""
    rng = np.random.default_rng(seed)
    d = rng.beta(9, 1, 40)
    a = (rng.random(40) < d).astype(float)
    b = (rng.random(40) < np.minimum(d + 0.05, 1)).astype(float)
    result = paired_difference(a, b, formula="agresti-min")
    clt = paired_difference(a, b, formula="clt")
    assert result.method == "paired-agresti-min"
    assert (result.low, result.high) == pytest.approx(_agresti_min_reference(a, b))
    assert (result.estimate, result.se, result.p_value) == (clt.estimate, clt.se, clt.p_value)
    z = stats.norm.ppf(0.975)
    assert (clt.low, clt.high) == pytest.approx((clt.estimate - z * clt.se,
                                                 clt.estimate + z * clt.se))


def test_agresti_min_hand_checked() -> None:
    """20 items, 1 discordant pair (b right, a wrong): table + 1/2 gives p01 = 1.5/22,
    p10 = 0.5/22, centre 1/22, variance (2/22 - 1/22^2) / 22. The CLT interval would be
    0.05 +- 1.96 * 0.05, the Agresti-Min one is wider below zero."""
    a = np.ones(20)
    a[0] = 0.0
    b = np.ones(20)
    result = paired_difference(a, b, formula="agresti-min")
    half = stats.norm.ppf(0.975) * math.sqrt((2 / 22 - 1 / 22**2) / 22)
    assert (result.low, result.high) == pytest.approx((1 / 22 - half, 1 / 22 + half))
    assert result.estimate == pytest.approx(0.05)


def test_no_discordant_pairs_still_give_a_nonzero_interval() -> None:
    """Both models right on all 30 items: the CLT interval collapses to [0, 0]; Agresti-Min
    keeps +- z sqrt(1/32)/32 (half a discordant pair each way); the default (Tango's score
    interval) gives +- z^2 / (n + z^2), where Tango's score -sqrt(n d / (1 - d)) with no
    discordant pair reaches z."""
    result = paired_difference(np.ones(30), np.ones(30), formula="agresti-min")
    half = stats.norm.ppf(0.975) * math.sqrt(1 / 32) / math.sqrt(32)
    assert (result.low, result.high) == pytest.approx((-half, half))
    assert result.se == 0.0
    default = paired_difference(np.ones(30), np.ones(30))
    z2 = stats.norm.ppf(0.975) ** 2
    assert (default.low, default.high) == pytest.approx((-z2 / (30 + z2), z2 / (30 + z2)))
    assert default.p_value == 1.0


def test_agresti_min_only_for_binary_independent_items() -> None:
    """formula='agresti-min' refuses partial credit and clusters; 'auto' falls back to the
    CLT interval for non-binary scores and to the clustered one with clusters."""
    with pytest.raises(ValueError, match="0/1"):
        paired_difference([0.5, 1, 0, 1], [1, 1, 1, 0], formula="agresti-min")
    with pytest.raises(ValueError, match="clusters"):
        paired_difference([0, 1, 0, 1], [1, 1, 1, 0], clusters=[0, 0, 1, 1],
                          formula="agresti-min")
    with pytest.raises(ValueError, match="formula"):
        paired_difference([0, 1], [1, 1], formula="newcombe")
    assert paired_difference([0.5, 1, 0, 1], [1, 1, 1, 0]).method == "paired"


def test_binary_paired_coverage_near_the_boundary() -> None:
    """Seeded coverage check (800 simulated evals of 30 items): a is right with p = 0.95;
    b copies a's answer on half the items and is right with p = 0.97 on the others, so
    E[b - a] = 0.5 * 0.02 = 0.01. Agresti-Min covers at least 93%, the CLT interval (which
    collapses to a point when no pair disagrees) under 90%."""
    rng = np.random.default_rng(2024)
    sims, n, truth = 800, 30, 0.01
    hits_am = hits_clt = 0
    for _ in range(sims):
        a = (rng.random(n) < 0.95).astype(float)
        b = np.where(rng.random(n) < 0.5, a, (rng.random(n) < 0.97).astype(float))
        am, clt = paired_difference(a, b), paired_difference(a, b, formula="clt")
        hits_am += am.low <= truth <= am.high
        hits_clt += clt.low <= truth <= clt.high
    assert hits_am / sims >= 0.93
    assert hits_clt / sims < 0.90


def test_few_binary_items_warn_that_wilson_coverage_swings() -> None:
    """Under 30 0/1 items Wilson's coverage dips to ~92% for some accuracies: say so."""
    few = np.array([1.0] * 18 + [0.0] * 2)
    with pytest.warns(StatsWarning, match="20 .*0/1 items.*30 or more"):
        eval_mean(few)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        eval_mean(np.array([1.0] * 45 + [0.0] * 5))
