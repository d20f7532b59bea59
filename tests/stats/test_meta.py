"""Fixed- and random-effects meta-analysis against published metafor results (Kacker 2004's
example, as recorded in statsmodels' test data) and statsmodels' combine_effects."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.meta_analysis import combine_effects

from labcoat.stats._meta import fixed_effect, random_effects

# Kacker (2004), "Combining information from interlaboratory evaluations", Metrologia 41,
# Table 1: nine laboratories' results and their variances. Reference values below are R
# metafor's, as stored in statsmodels/stats/tests/results/results_meta.py (exk1_*).
EFFECTS = [61.00, 61.40, 62.21, 62.30, 62.34, 62.60, 62.70, 62.84, 65.90]
VARIANCES = [0.2025, 1.2100, 0.0900, 0.2025, 0.3844, 0.5625, 0.0676, 0.0225, 1.8225]
Q_KACKER = 24.801897741835
Q_P_KACKER = 0.00167935146372742


def test_dersimonian_laird_matches_metafor() -> None:
    """DL: pooled 62.39014, SE 0.24575, CI [61.90848, 62.87180], tau^2 0.28805,
    Q 24.8019 (p 0.001679), I^2 67.744%."""
    result = random_effects(EFFECTS, VARIANCES, method="dl")
    assert result.estimate == pytest.approx(62.3901386044504, abs=1e-10)
    assert result.se == pytest.approx(0.245749668040304, abs=1e-10)
    assert (result.low, result.high) == pytest.approx((61.9084781058787, 62.8717991030221),
                                                      abs=1e-9)
    assert result.tau2 == pytest.approx(0.288049246973751, abs=1e-10)
    assert result.q == pytest.approx(Q_KACKER, abs=1e-9)
    assert result.q_p_value == pytest.approx(Q_P_KACKER, abs=1e-10)
    assert result.i2 == pytest.approx(0.67744403741711, abs=1e-10)
    assert (result.k, result.method, result.ci) == (9, "dl", 0.95)


def test_paule_mandel_matches_metafor() -> None:
    """PM: pooled 62.40762, SE 0.33803, CI [61.74509, 63.07015], tau^2 0.70540."""
    result = random_effects(EFFECTS, VARIANCES, method="pm")
    assert result.estimate == pytest.approx(62.4076199113286, abs=1e-9)
    assert result.se == pytest.approx(0.338030602684471, abs=1e-9)
    assert (result.low, result.high) == pytest.approx((61.7450921043947, 63.0701477182625),
                                                      abs=1e-9)
    assert result.tau2 == pytest.approx(0.705395309224248, abs=1e-9)
    assert result.q == pytest.approx(Q_KACKER, abs=1e-9)


def test_tau_matches_kacker_table_1() -> None:
    """Kacker (2004) Table 1 reports tau = 0.8399 (PM) and 0.5359 (DL)."""
    assert math.sqrt(random_effects(EFFECTS, VARIANCES, method="pm").tau2) == pytest.approx(
        0.8399, abs=6e-5)
    assert math.sqrt(random_effects(EFFECTS, VARIANCES, method="dl").tau2) == pytest.approx(
        0.5359, abs=1e-3)  # statsmodels' own test notes the same looser agreement


def test_fixed_effect_matches_metafor() -> None:
    """FE: pooled 62.58340, SE 0.10785, CI [62.37202, 62.79477]."""
    result = fixed_effect(EFFECTS, VARIANCES)
    assert result.estimate == pytest.approx(62.5833970939982, abs=1e-10)
    assert result.se == pytest.approx(0.107845705498231, abs=1e-10)
    assert (result.low, result.high) == pytest.approx((62.3720233953344, 62.7947707926621),
                                                      abs=1e-9)
    assert result.tau2 == 0.0 and result.method == "fixed"


def test_knapp_hartung_matches_metafor() -> None:
    """DL with the HKSJ adjustment: SE 0.294776, t(8) CI [61.71038, 63.06989], p 2.78e-16."""
    result = random_effects(EFFECTS, VARIANCES, method="dl", knapp_hartung=True)
    assert result.se == pytest.approx(0.29477605699879, abs=1e-10)
    assert (result.low, result.high) == pytest.approx((61.710383798052, 63.0698934108488),
                                                      abs=1e-9)
    assert result.p_value == pytest.approx(2.77938607433693e-16, rel=1e-6)
    assert result.method == "dl+hksj"


def _heterogeneous(seed: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """k tasks whose true effects spread with tau = 0.05 around 0.02, and SEs 0.01-0.04."""
    rng = np.random.default_rng(seed)
    se = rng.uniform(0.01, 0.04, k)
    return 0.02 + rng.normal(0, 0.05, k) + rng.normal(0, se), se**2


@pytest.mark.parametrize("method", ["dl", "pm"])
@pytest.mark.parametrize(("seed", "k"), [(0, 3), (2, 5), (2, 10), (3, 25)])
def test_random_effects_match_statsmodels(method: str, seed: int, k: int) -> None:
    """Random heterogeneous tasks: pooled effect, SE, CI, tau^2, Q and I^2 equal
    combine_effects(method_re=method)."""
    y, v = _heterogeneous(seed, k)
    # atol 1e-8 on PM's estimating equation, not tighter: statsmodels 0.15's
    # _fit_tau_iterative tests `ee < 0` before convergence, so once its Newton step lands
    # a rounding error below the root (ee = -2e-16) it returns tau^2 = 0.
    ref = combine_effects(y, v, method_re=method, atol=1e-8, maxiter=500)
    result = random_effects(y, v, method=method)
    assert ref.q > k - 1  # heterogeneous: statsmodels' untruncated DL is comparable
    assert result.tau2 == pytest.approx(ref.tau2, rel=1e-7)
    assert result.estimate == pytest.approx(ref.mean_effect_re, rel=1e-9)
    assert result.se == pytest.approx(ref.sd_eff_w_re, rel=1e-7)
    ci = ref.conf_int(alpha=0.05, use_t=False)[1]
    assert (result.low, result.high) == pytest.approx((ci[0], ci[1]), rel=1e-8)
    assert result.q == pytest.approx(ref.q, rel=1e-10)
    assert result.q_p_value == pytest.approx(ref.test_homogeneity().pvalue, rel=1e-8)
    assert result.i2 == pytest.approx(ref.i2, rel=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_fixed_effect_and_hksj_match_statsmodels(seed: int) -> None:
    """Fixed effect and the HKSJ intervals (t with k - 1 df) equal statsmodels'."""
    y, v = _heterogeneous(seed, 7)
    ref = combine_effects(y, v, method_re="dl")
    fe = fixed_effect(y, v)
    assert (fe.estimate, fe.se) == pytest.approx((ref.mean_effect_fe, ref.sd_eff_w_fe))
    ci_fe, _, ci_fe_hk, ci_re_hk = ref.conf_int(alpha=0.1, use_t=True)
    hk = random_effects(y, v, ci=0.9, knapp_hartung=True)
    assert (hk.low, hk.high) == pytest.approx(tuple(ci_re_hk))
    fe_hk = fixed_effect(y, v, ci=0.9, knapp_hartung=True)
    assert (fe_hk.low, fe_hk.high) == pytest.approx(tuple(ci_fe_hk))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paule_mandel_solves_its_estimating_equation(seed: int) -> None:
    """Brute-force check independent of statsmodels: at the PM tau^2 the generalized Q,
    sum w_i (y_i - mu)^2 with w_i = 1/(v_i + tau^2), equals k - 1."""
    y, v = _heterogeneous(seed, 12)
    tau2 = random_effects(y, v, method="pm").tau2
    w = 1 / (v + tau2)
    mu = np.sum(w * y) / np.sum(w)
    assert tau2 > 0
    assert np.sum(w * (y - mu) ** 2) == pytest.approx(11, rel=1e-10)


def test_homogeneous_tasks_truncate_tau2_at_zero() -> None:
    """Q < k - 1: DL tau^2 is max(0, .) = 0 (statsmodels returns the negative moment
    estimate), PM is 0, I^2 is 0, and both equal the fixed-effect estimate."""
    y = np.array([0.10, 0.11, 0.09, 0.10, 0.105])
    v = np.full(5, 0.02**2)
    assert combine_effects(y, v, method_re="dl").tau2 < 0
    fe = fixed_effect(y, v)
    for method in ("dl", "pm"):
        result = random_effects(y, v, method=method)
        assert result.tau2 == 0.0 and result.i2 == 0.0
        assert (result.estimate, result.se) == pytest.approx((fe.estimate, fe.se))


def test_weights_and_p_value() -> None:
    """Weights are 1/(v + tau^2) normalized; p is the two-sided normal p of estimate/se."""
    y, v = _heterogeneous(4, 6)
    result = random_effects(y, v)
    w = 1 / (v + result.tau2)
    np.testing.assert_allclose(result.weights, w / w.sum())
    assert result.p_value == pytest.approx(2 * stats.norm.sf(abs(result.estimate) / result.se))


def test_one_task_fixed_effect_is_that_task() -> None:
    """k = 1: the fixed-effect estimate is the task's effect and SE; Q's p is undefined."""
    result = fixed_effect([0.3], [0.01])
    assert (result.estimate, result.se, result.q) == pytest.approx((0.3, 0.1, 0.0))
    assert math.isnan(result.q_p_value) and result.i2 == 0.0


@pytest.mark.parametrize(
    ("effects", "variances", "kwargs", "match"),
    [([0.1], [0.01], {}, "at least 2"),
     ([0.1, 0.2], [0.01, 0.0], {}, "variances"),
     ([0.1, 0.2], [0.01], {}, "variances"),
     ([0.1, float("nan")], [0.01, 0.01], {}, "NaN"),
     ([0.1, 0.2], [0.01, 0.01], {"method": "reml"}, "dl, pm"),
     ([0.1, 0.2], [0.01, 0.01], {"ci": 95}, "ci")],
)
def test_random_effects_rejects_invalid_input(effects: list, variances: list, kwargs: dict,
                                              match: str) -> None:
    """One task, a zero variance, mismatched lengths, NaN, unknown method or bad ci raise."""
    with pytest.raises(ValueError, match=match):
        random_effects(effects, variances, **kwargs)
