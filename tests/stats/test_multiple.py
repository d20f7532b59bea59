"""p-value corrections against statsmodels' multipletests; adjusted intervals against scipy's
t and normal intervals at the adjusted level; macro average checked by hand."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from labcoat.stats import Difference, holm, macro_average, paired_difference, welch
from labcoat.stats._checks import StatsWarning
from labcoat.stats._multiple import adjust, benjamini_hochberg, bonferroni

# --- holm --------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_holm_matches_statsmodels_on_random_vectors(seed: int) -> None:
    """Adjusted p-values equal multipletests(method='holm') for random p-vectors."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.2, size=rng.integers(2, 12))
    expected = multipletests(p, method="holm")[1]
    np.testing.assert_allclose(holm(p.tolist()), expected, rtol=1e-12)


def test_holm_hand_checked_and_in_input_order() -> None:
    """[0.01, 0.04, 0.03, 0.2] -> 4*0.01, max(3*0.03, .04)=0.09, 2*0.04 -> 0.09, 0.2."""
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])


def test_holm_with_ties_matches_statsmodels() -> None:
    """Tied p-values get equal adjusted values, as in statsmodels."""
    p = [0.02, 0.01, 0.02, 0.5, 0.01]
    adjusted = holm(p)
    np.testing.assert_allclose(adjusted, multipletests(p, method="holm")[1], rtol=1e-12)
    assert adjusted[0] == adjusted[2] and adjusted[1] == adjusted[4]


def test_holm_preserves_order_under_permutation() -> None:
    """Permuting the inputs permutes the outputs the same way."""
    p = np.array([0.3, 0.001, 0.04, 0.02, 0.9])
    perm = np.array([4, 2, 0, 3, 1])
    np.testing.assert_allclose(np.array(holm(p.tolist()))[perm], holm(p[perm].tolist()))


def test_holm_caps_at_one_and_handles_trivial_inputs() -> None:
    """Adjusted values never exceed 1; one p-value is unchanged; empty gives empty."""
    assert holm([0.4, 0.6, 0.9]) == [1.0, 1.0, 1.0]
    assert holm([0.03]) == [0.03]
    assert holm([]) == []


@pytest.mark.parametrize("bad", [float("nan"), -0.1, 1.5])
def test_holm_rejects_invalid_p_values(bad: float) -> None:
    """A p-value outside [0, 1] (or NaN) raises ValueError like the other stats functions."""
    with pytest.raises(ValueError):
        holm([0.01, bad])


def test_holm_is_deterministic() -> None:
    """Same inputs give the same adjusted p-values."""
    p = [0.02, 0.01, 0.02, 0.5]
    assert holm(p) == holm(list(p))


# --- macro_average -----------------------------------------------------------


def _diff(estimate: float, se: float, n: int, p: float = 0.5) -> Difference:
    z = stats.norm.ppf(0.975)
    return Difference(estimate, estimate - z * se, estimate + z * se, se, p, "paired", n)


def test_macro_average_two_tasks_by_hand() -> None:
    """Estimates 0.1, 0.3 with SEs 0.03, 0.04: mean 0.2, SE sqrt(.03^2+.04^2)/2 = 0.025."""
    result = macro_average([_diff(0.1, 0.03, 100), _diff(0.3, 0.04, 50)])
    assert result.estimate == pytest.approx(0.2)
    assert result.se == pytest.approx(0.025)
    assert result.low == pytest.approx(0.2 - 1.959963985 * 0.025)
    assert result.high == pytest.approx(0.2 + 1.959963985 * 0.025)
    assert result.p_value == pytest.approx(2 * stats.norm.sf(8.0))
    assert result.n == 150
    assert result.method == "macro(paired)"


def test_macro_average_three_tasks_by_hand() -> None:
    """SEs 0.03, 0.04, 0.12: sqrt(.0009+.0016+.0144)/3 = 0.13/3; mean of 0.1, 0.3, -0.1 = 0.1."""
    result = macro_average([_diff(0.1, 0.03, 10), _diff(0.3, 0.04, 10), _diff(-0.1, 0.12, 10)])
    assert result.estimate == pytest.approx(0.1)
    assert result.se == pytest.approx(0.13 / 3)
    assert result.p_value == pytest.approx(2 * stats.norm.sf(0.1 / (0.13 / 3)))
    assert result.low == pytest.approx(0.1 - stats.norm.ppf(0.975) * 0.13 / 3)


def test_macro_average_ci_level() -> None:
    """ci=0.9 uses z = 1.6449 and is recorded on the result."""
    result = macro_average([_diff(0.1, 0.03, 10), _diff(0.3, 0.04, 10)], ci=0.9)
    assert result.high - result.estimate == pytest.approx(1.644853627 * 0.025)
    assert result.ci == 0.9


def test_macro_average_of_one_task_keeps_it() -> None:
    """One task: the macro average is that task's estimate and SE."""
    result = macro_average([_diff(0.2, 0.05, 40)])
    assert (result.estimate, result.se) == pytest.approx((0.2, 0.05))
    assert not math.isnan(result.p_value)


def test_macro_average_needs_a_task() -> None:
    """An empty list raises ValueError."""
    with pytest.raises(ValueError):
        macro_average([])


# --- benjamini_hochberg, bonferroni -------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_bh_matches_statsmodels_on_random_vectors(seed: int) -> None:
    """Adjusted p-values equal multipletests(method='fdr_bh') for random p-vectors."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.2, size=rng.integers(2, 15))
    np.testing.assert_allclose(benjamini_hochberg(p.tolist()),
                               multipletests(p, method="fdr_bh")[1], rtol=1e-12)


def test_bh_hand_checked_and_in_input_order() -> None:
    """[0.01, 0.04, 0.03, 0.2]: sorted .01,.03,.04,.2 -> 4*.01/1=.04, 4*.03/2=.06,
    4*.04/3=.0533, .2; running min from the top: .04, .0533, .0533, .2."""
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.2]) == pytest.approx(
        [0.04, 0.16 / 3, 0.16 / 3, 0.2])


def test_bh_ties_trivial_and_invalid() -> None:
    """Ties match statsmodels; one p-value is unchanged; empty gives empty; NaN raises."""
    p = [0.02, 0.01, 0.02, 0.5, 0.01]
    np.testing.assert_allclose(benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1])
    assert benjamini_hochberg([0.03]) == [0.03]
    assert benjamini_hochberg([]) == []
    with pytest.raises(ValueError):
        benjamini_hochberg([0.1, float("nan")])


def test_bonferroni_matches_statsmodels() -> None:
    """min(1, m p) equals multipletests(method='bonferroni')."""
    p = [0.001, 0.02, 0.3, 0.04]
    np.testing.assert_allclose(bonferroni(p), multipletests(p, method="bonferroni")[1])


# --- adjust --------------------------------------------------------------------


def _welch_family(seed: int, m: int) -> tuple[list[Difference], list[tuple]]:
    """m Welch comparisons (6 control vs 7 variant runs) and their raw samples."""
    rng = np.random.default_rng(seed)
    samples = [(rng.normal(0, 1, 6), rng.normal(0.9 * (i % 3), 1, 7)) for i in range(m)]
    return [welch(a, b) for a, b in samples], samples


@pytest.mark.parametrize("method", ["holm", "bonferroni"])
def test_fwer_intervals_are_scipy_t_intervals_at_level_one_minus_alpha_over_m(
        method: str) -> None:
    """Welch differences: the adjusted CI equals scipy's Welch t interval at 1 - 0.05/m
    (Bonferroni level), and the p-values equal multipletests."""
    diffs, samples = _welch_family(0, 4)
    adjusted = adjust(diffs, method)
    expected_p = multipletests([d.p_value for d in diffs], method=method)[1]
    for adj, (a, b), p in zip(adjusted, samples, expected_p, strict=True):
        ref = stats.ttest_ind(b, a, equal_var=False).confidence_interval(1 - 0.05 / 4)
        assert (adj.low, adj.high) == pytest.approx((ref.low, ref.high))
        assert adj.p_adjusted == pytest.approx(p) and adj.difference.p_value == adj.p_adjusted
        assert adj.estimate == adj.original.estimate
        assert adj.ci_level == pytest.approx(0.9875) and adj.difference.ci == adj.ci_level
        assert (adj.method, adj.family_size, adj.family_ci) == (method, 4, 0.95)


def test_normal_differences_use_z_at_the_adjusted_level() -> None:
    """Item-level (normal, df = inf) differences: estimate -+ z(1 - 0.05/(2*3)) se."""
    rng = np.random.default_rng(1)
    diffs = [paired_difference(rng.normal(0, 1, 50), rng.normal(0.2, 1, 50)) for _ in range(3)]
    z = stats.norm.ppf(1 - 0.05 / 6)
    for adj, d in zip(adjust(diffs, "bonferroni"), diffs, strict=True):
        assert adj.low == pytest.approx(d.estimate - z * d.se)
        assert adj.high == pytest.approx(d.estimate + z * d.se)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_bh_intervals_are_benjamini_yekutieli_fcr_intervals(seed: int) -> None:
    """BH: level 1 - R*alpha/m with R the BH rejections (statsmodels' reject); those
    intervals exclude 0 exactly for the rejected comparisons (normal tests)."""
    rng = np.random.default_rng(seed)
    m = 8
    estimates = rng.normal(0, 1, m) * np.array([0, 0, 0, 0, 1, 1, 3, 3])
    diffs = [_diff(float(est), 1.0, 100, p=float(2 * stats.norm.sf(abs(est))))
             for est in estimates]
    reject = multipletests([d.p_value for d in diffs], alpha=0.05, method="fdr_bh")[0]
    r = int(reject.sum())
    adjusted = adjust(diffs, "bh")
    assert adjusted[0].ci_level == pytest.approx(1 - max(r, 1) * 0.05 / m)
    assert [a.excludes_zero() for a in adjusted] == reject.tolist()


def test_bh_with_no_rejection_uses_the_bonferroni_level() -> None:
    """R = 0: intervals at 1 - alpha/m, all covering 0."""
    diffs = [_diff(0.1, 0.1, 10, p=0.32) for _ in range(5)]
    adjusted = adjust(diffs, "bh")
    assert adjusted[0].ci_level == pytest.approx(0.99)
    assert not any(a.excludes_zero() for a in adjusted)


def test_holm_interval_may_cover_zero_when_holm_rejects() -> None:
    """The documented conservatism: Holm's step-down rejects the second-smallest p at
    alpha/(m-1) while its Bonferroni-level interval (alpha/m) still covers 0."""
    # z = 4 and p = 0.03 with m = 2: Holm adjusts to 2*6e-5 and 0.03 (< 0.05), but
    # 0.03 > 0.05/2, so the 97.5% interval of the second covers 0.
    p2 = 0.03
    diffs = [_diff(4.0, 1.0, 10, p=float(2 * stats.norm.sf(4.0))),
             _diff(float(stats.norm.isf(p2 / 2)), 1.0, 10, p=p2)]
    second = adjust(diffs, "holm")[1]
    assert second.p_adjusted == pytest.approx(0.03)
    assert not second.excludes_zero()


def test_none_keeps_p_values_and_intervals() -> None:
    """method='none': same p-values, same intervals, level = the family level."""
    diffs, _ = _welch_family(2, 3)
    for adj, d in zip(adjust(diffs, "none"), diffs, strict=True):
        assert adj.p_adjusted == d.p_value
        assert (adj.low, adj.high) == pytest.approx((d.low, d.high))
        assert adj.ci_level == 0.95


def test_single_comparison_is_unchanged_by_holm() -> None:
    """m = 1: Holm's p and the interval are the original ones."""
    d = _welch_family(3, 1)[0][0]
    adj = adjust([d], "holm")[0]
    assert adj.p_adjusted == pytest.approx(d.p_value)
    assert (adj.low, adj.high) == pytest.approx((d.low, d.high))


def test_adjust_names_the_family_and_method() -> None:
    """The note says the method, the family size and the interval level, for the report."""
    diffs, _ = _welch_family(4, 5)
    note = adjust(diffs, "holm")[0].note
    assert "Holm" in note and "family of 5" in note and "99% " in note
    assert "Benjamini & Yekutieli" in adjust(diffs, "bh")[0].note


def test_adjust_with_an_explicit_family_level() -> None:
    """ci=0.9 overrides the differences' level: Bonferroni interval at 1 - 0.1/m."""
    diffs, samples = _welch_family(5, 2)
    adj = adjust(diffs, "bonferroni", ci=0.9)[0]
    a, b = samples[0]
    ref = stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert (adj.low, adj.high) == pytest.approx((ref.low, ref.high))


def test_adjust_rejects_mixed_levels_unknown_methods_and_nan_se() -> None:
    """Different ci levels without ci=, an unknown method, or a NaN SE raise ValueError."""
    d95 = _diff(0.1, 0.05, 10)
    d90 = Difference(0.1, 0.0, 0.2, 0.05, 0.05, "paired", 10, ci=0.9)
    with pytest.raises(ValueError, match="ci="):
        adjust([d95, d90])
    with pytest.raises(ValueError, match="holm, bh, bonferroni, none"):
        adjust([d95], "fdr")
    with pytest.raises(ValueError, match="se="):
        adjust([Difference(0.1, 0.0, 0.2, float("nan"), 0.5, "x", 1)])
    assert adjust([]) == []


def test_zero_se_keeps_a_zero_width_interval() -> None:
    """A difference with SE 0 (identical deltas) stays a point after adjustment."""
    point = Difference(2.0, 2.0, 2.0, 0.0, 0.0, "paired", 3)
    adj = adjust([point, _diff(0.1, 0.05, 10)], "holm")[0]
    assert (adj.low, adj.high) == (2.0, 2.0)


def test_asymmetric_interval_is_rebuilt_with_a_warning() -> None:
    """A bootstrap-style interval that is not estimate -+ q*se is rebuilt from the SE, and
    a StatsWarning says so."""
    skewed = Difference(0.1, 0.05, 0.3, 0.05, 0.01, "bootstrap", 10)
    with pytest.warns(StatsWarning, match="not estimate"):
        adj = adjust([skewed, _diff(0.1, 0.05, 10)], "bonferroni")[0]
    z = stats.norm.ppf(1 - 0.05 / 4)
    assert (adj.low, adj.high) == pytest.approx((0.1 - z * 0.05, 0.1 + z * 0.05))
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        adjust([_diff(0.1, 0.05, 10), _diff(0.2, 0.05, 10)])


def test_agresti_min_intervals_are_widened_about_their_centre_without_a_warning() -> None:
    """An adjusted Wald interval of paired 0/1 scores at the Bonferroni level equals the
    same interval computed directly at that level (pseudo-counts, Agresti & Min 2005)."""
    from labcoat.stats import paired_difference

    rng = np.random.default_rng(0)
    a = (rng.random(40) < 0.9).astype(float)
    b = (rng.random(40) < 0.95).astype(float)
    d = paired_difference(a, b, formula="agresti-min")
    assert d.method == "paired-agresti-min"
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        adj = adjust([d, _diff(0.1, 0.05, 10)], "bonferroni")[0]
    direct = paired_difference(a, b, ci=1 - 0.05 / 2, formula="agresti-min")
    assert (adj.low, adj.high) == pytest.approx((direct.low, direct.high))
