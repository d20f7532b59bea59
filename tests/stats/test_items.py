"""Item-level paired differences (Miller 2024) against statsmodels OLS and scipy.stats.norm."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from labcoat.stats._items import paired_difference


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
    """Cluster-robust SE equals statsmodels cluster OLS with use_correction=False."""
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
    result = paired_difference(a, b, clusters=groups)
    assert result.se == pytest.approx(by_hand)
    assert result.method == "paired-clustered"
    z = stats.norm.ppf(0.975)
    assert result.high - result.estimate == pytest.approx(z * by_hand)


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


@pytest.mark.parametrize("seed", [0, 1])
def test_clustered_finite_correction_matches_statsmodels_use_correction(seed: int) -> None:
    """finite_cluster_correction=True multiplies the variance by G/(G-1), which equals
    statsmodels' cluster OLS with use_correction=True for a constant-only model."""
    a, b = _scores(seed)
    groups = np.repeat(np.arange(12), 5)
    ols = sm.OLS(b - a, np.ones((a.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": True}
    )
    plain = paired_difference(a, b, clusters=groups)
    result = paired_difference(a, b, clusters=groups, finite_cluster_correction=True)
    assert result.se == pytest.approx(ols.bse[0])
    assert result.se == pytest.approx(plain.se * math.sqrt(12 / 11))
    assert result.method == "paired-clustered"


def test_finite_correction_without_clusters_is_rejected() -> None:
    """The G/(G-1) factor has no meaning without clusters: ValueError, not a silent no-op."""
    with pytest.raises(ValueError, match="clusters"):
        paired_difference([0, 1, 1], [1, 1, 0], finite_cluster_correction=True)


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
