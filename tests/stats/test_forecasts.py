"""Forecast scores against scikit-learn, properscoring and brute force (issue 33)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as st

from labcoat import stats

N = 2000


def _forecasts(seed: int, n: int = N, stretch: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """True probabilities q, outcomes ~ Bernoulli(q), forecasts logit-stretched from q
    (stretch 1: calibrated; > 1: overconfident)."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.05, 0.95, n)
    outcome = (rng.uniform(size=n) < q).astype(int)
    logit = np.log(q / (1 - q)) * stretch
    return 1 / (1 + np.exp(-logit)), outcome


def test_brier_and_bins_equal_scikit_learn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    calibration = pytest.importorskip("sklearn.calibration")
    p, o = _forecasts(0)
    p[:7] = [0.0, 0.1, 0.2, 0.5, 0.7, 0.9, 1.0]  # edges land in the same bin as sklearn's
    assert stats.brier_score(p, o) == pytest.approx(metrics.brier_score_loss(o, p), abs=1e-12)
    observed, predicted = calibration.calibration_curve(o, p, n_bins=10, strategy="uniform")
    bins = stats.reliability_bins(p, o, bins=10)
    np.testing.assert_allclose([b.observed for b in bins], observed, atol=1e-12)
    np.testing.assert_allclose([b.mean_forecast for b in bins], predicted, atol=1e-12)
    log_loss = metrics.log_loss(o, np.clip(p, 1e-15, 1 - 1e-15))
    inner = (p > 0) & (p < 1)
    assert stats.log_score(p[inner], o[inner]) == pytest.approx(
        metrics.log_loss(o[inner], p[inner]) / math.log(2), rel=1e-12)
    assert stats.log_score(p, o) >= log_loss / math.log(2) - 1e-9


@pytest.mark.parametrize("bins", [1, 5, 10, 37])
def test_murphy_identity_is_exact_and_terms_match_brute_force(bins: int) -> None:
    p, o = _forecasts(1)
    m = stats.murphy_decomposition(p, o, bins=bins)
    total = m.reliability - m.resolution + m.uncertainty + m.within_variance \
        - m.within_covariance
    assert abs(total - m.brier) < 1e-9
    # brute force, one forecast at a time, bins from the edges directly
    edges = np.linspace(0, 1, bins + 1)
    k = np.array([max(0, int(np.argmax(x <= edges[1:]))) for x in p])
    base = o.mean()
    rel = sum(np.sum(k == j) * (p[k == j].mean() - o[k == j].mean()) ** 2
              for j in set(k)) / N
    res = sum(np.sum(k == j) * (o[k == j].mean() - base) ** 2 for j in set(k)) / N
    assert m.reliability == pytest.approx(rel, abs=1e-12)
    assert m.resolution == pytest.approx(res, abs=1e-12)
    assert m.uncertainty == pytest.approx(base * (1 - base), abs=1e-15)


def test_murphy_classic_form_when_forecasts_are_levels() -> None:
    """Forecasts at 0.1, 0.2, ... (how people forecast): the within-bin terms vanish."""
    rng = np.random.default_rng(2)
    p = rng.integers(1, 10, N) / 10
    o = (rng.uniform(size=N) < p).astype(int)
    m = stats.murphy_decomposition(p, o, bins=10)
    assert m.within_variance == pytest.approx(0, abs=1e-15)
    assert m.within_covariance == pytest.approx(0, abs=1e-15)
    assert m.reliability - m.resolution + m.uncertainty == pytest.approx(m.brier, abs=1e-12)


def test_crps_equals_properscoring_and_numerical_integral() -> None:
    ps = pytest.importorskip("properscoring")
    rng = np.random.default_rng(3)
    mu, sd, y = rng.normal(size=N), rng.uniform(0.1, 3, N), rng.normal(size=N)
    np.testing.assert_allclose(stats.crps_normal(mu, sd, y), ps.crps_gaussian(y, mu, sd),
                               rtol=1e-10, atol=1e-12)
    # the definition: integral of (F(x) - 1[x >= y])^2
    m, s, obs = 0.02, 0.015, -0.01
    left, _ = integrate.quad(lambda x: st.norm.cdf(x, m, s) ** 2, -np.inf, obs)
    right, _ = integrate.quad(lambda x: st.norm.sf(x, m, s) ** 2, obs, np.inf)
    assert float(stats.crps_normal(m, s, obs)) == pytest.approx(left + right, rel=1e-7)


def test_an_80_percent_interval_is_read_as_a_normal() -> None:
    mean, sd = stats.interval_normal(0.0, 0.04)
    assert mean == pytest.approx(0.02)
    assert st.norm.cdf(0.04, mean, sd) - st.norm.cdf(0.0, mean, sd) == pytest.approx(0.8)
    assert stats.crps_interval(0.0, 0.04, 0.03) == pytest.approx(
        float(stats.crps_normal(mean, sd, 0.03)))


def test_wilson_interval_equals_statsmodels() -> None:
    proportion = pytest.importorskip("statsmodels.stats.proportion")
    for hits, n in [(0, 5), (11, 20), (55, 100), (20, 20)]:
        low, high = proportion.proportion_confint(hits, n, alpha=0.05, method="wilson")
        assert stats.wilson_interval(hits, n) == pytest.approx((low, high), abs=1e-12)


def test_calibration_by_level_folds_and_counts() -> None:
    p = [0.8, 0.8, 0.2, 0.2, 0.8, 0.5]
    o = [1, 0, 0, 0, 1, 1]
    levels = {c.level: c for c in stats.calibration_by_level(p, o)}
    assert (levels[0.8].n, levels[0.8].hits) == (5, 4)
    assert levels[0.8].words.startswith("your 80% predictions came true 80% of the time [")
    assert levels[0.5].n == 1


def test_overconfident_flagged_and_calibrated_not() -> None:
    """Spiegelhalter's z on 200 forecasts, flagged at the ledger's alpha (0.01): an
    overconfident forecaster (log-odds doubled) is flagged in >= 95 of 100 seeds, a
    calibrated one in <= 5 (at alpha 0.05 that would be 5 expected: a coin toss)."""
    alpha = stats.CALIBRATION_ALPHA
    over = sum(stats.spiegelhalter_z(*_forecasts(s, 200, 2.0)).flagged(alpha)
               for s in range(100))
    calibrated = sum(stats.spiegelhalter_z(*_forecasts(s, 200)).flagged(alpha)
                     for s in range(100))
    assert over >= 95
    assert calibrated <= 5


def test_calibrated_false_alarm_rate_is_nominal() -> None:
    """Over 2,000 seeds the calibrated forecaster's flag rate is alpha (binomial 99.9% band),
    at 0.05 and at the ledger's 0.01: the z test holds its size."""
    p_values = np.array([stats.spiegelhalter_z(*_forecasts(s, 200)).p_value
                         for s in range(1000, 3000)])
    for alpha in (0.05, stats.CALIBRATION_ALPHA):
        half = 3.3 * math.sqrt(alpha * (1 - alpha) / 2000)
        assert abs(np.mean(p_values < alpha) - alpha) < half


def test_expected_information_equals_brute_force_kl() -> None:
    """I(claim; verdict) = expected KL(posterior || prior), summed over the two verdicts."""
    for prior, power, alpha in [(0.5, 0.8, 0.05), (0.9, 0.8, 0.05), (0.3, 0.4, 0.01)]:
        total = 0.0
        for says_yes in (True, False):
            like_true = power if says_yes else 1 - power
            like_false = alpha if says_yes else 1 - alpha
            marginal = prior * like_true + (1 - prior) * like_false
            post = prior * like_true / marginal
            kl = sum(q * math.log2(q / r) for q, r in ((post, prior), (1 - post, 1 - prior))
                     if q > 0)
            total += marginal * kl
        assert stats.expected_information(prior, power, alpha) == pytest.approx(total, 1e-12)
    assert stats.expected_information(0.5, 0.05, 0.05) == pytest.approx(0, abs=1e-12)
    assert stats.expected_information(0.5, 1.0, 0.0) == pytest.approx(1.0)
    ranks = [stats.expected_information(p, 0.8, 0.05) for p in (0.5, 0.9, 0.1)]
    assert ranks[0] > max(ranks[1:])


def test_wrong_input_is_refused() -> None:
    with pytest.raises(ValueError, match="one outcome each"):
        stats.brier_score([0.2, 0.3], [1])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        stats.brier_score([1.2], [1])
    with pytest.raises(ValueError, match="0 .* or 1"):
        stats.brier_score([0.2], [2])


def test_three_outcome_brier_equals_scikit_learn_and_brute_force() -> None:
    rng = np.random.default_rng(4)
    p = rng.dirichlet([1, 1, 1], N)
    o = rng.integers(0, 3, N)
    brute = np.mean([sum((p[i, k] - (o[i] == k)) ** 2 for k in range(3)) for i in range(N)])
    assert stats.brier_score_multi(p, o) == pytest.approx(brute, abs=1e-12)
    metrics = pytest.importorskip("sklearn.metrics")
    assert stats.brier_score_multi(p, o) == pytest.approx(
        metrics.brier_score_loss(o, p, labels=[0, 1, 2], scale_by_half=False), abs=1e-12)
    with pytest.raises(ValueError, match="summing to 1"):
        stats.brier_score_multi([[0.5, 0.2, 0.2]], [0])
