"""Seed-level statistics (mean_interval, welch) against scipy as the independent reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from labcoat.stats import mean_interval, welch

RUNS = [0.61, 0.58, 0.66, 0.63, 0.59]


# --- mean_interval ---------------------------------------------------------


@pytest.mark.parametrize("ci", [0.9, 0.95, 0.99])
def test_mean_interval_matches_scipy_t_interval(ci: float) -> None:
    """Point, bounds and SE equal scipy.stats.t.interval around the mean with scipy's sem."""
    x = np.array(RUNS)
    sem = stats.sem(x)
    low, high = stats.t.interval(ci, df=x.size - 1, loc=x.mean(), scale=sem)
    result = mean_interval(x, ci=ci)
    assert result.point == pytest.approx(x.mean())
    assert result.se == pytest.approx(sem)
    assert (result.low, result.high) == pytest.approx((low, high))
    assert result.n == 5 and result.ci == ci


def test_mean_interval_hand_checked_two_runs() -> None:
    """[1, 3]: mean 2, sd sqrt(2), se 1, t(0.975, df=1) = 12.706..."""
    result = mean_interval([1.0, 3.0])
    assert result.point == 2.0
    assert result.se == pytest.approx(1.0)
    assert result.high - result.point == pytest.approx(12.7062047, rel=1e-7)


def test_mean_interval_one_run_is_infinite() -> None:
    """A single run cannot estimate its own noise: the interval is (-inf, inf)."""
    result = mean_interval([0.7])
    assert result.point == 0.7
    assert result.low == -math.inf and result.high == math.inf
    assert result.se == math.inf and result.n == 1


@pytest.mark.parametrize("values", [[], [0.5, float("nan")], [0.5, float("inf")]])
def test_mean_interval_rejects_empty_and_non_finite(values: list[float]) -> None:
    """Empty input or NaN/inf raises ValueError instead of returning a number."""
    with pytest.raises(ValueError):
        mean_interval(values)


def test_mean_interval_rejects_ci_outside_unit_interval() -> None:
    """ci=95 is a likely typo for 0.95 and should raise, not return NaN bounds."""
    with pytest.raises(ValueError):
        mean_interval(RUNS, ci=95)


def test_mean_interval_is_deterministic() -> None:
    """Same inputs give the same interval."""
    assert mean_interval(RUNS) == mean_interval(list(RUNS))


# --- welch -----------------------------------------------------------------

CONTROL = [0.52, 0.55, 0.49, 0.51]
VARIANT = [0.60, 0.71, 0.58, 0.66, 0.69]


@pytest.mark.parametrize("ci", [0.9, 0.95])
def test_welch_matches_scipy_ttest_ind(ci: float) -> None:
    """Estimate mean(b)-mean(a); p, df and CI equal scipy's ttest_ind(b, a, equal_var=False)."""
    ref = stats.ttest_ind(VARIANT, CONTROL, equal_var=False)
    ref_ci = ref.confidence_interval(confidence_level=ci)
    result = welch(CONTROL, VARIANT, ci=ci)
    assert result.estimate == pytest.approx(np.mean(VARIANT) - np.mean(CONTROL))
    assert result.estimate / result.se == pytest.approx(ref.statistic)
    assert result.p_value == pytest.approx(ref.pvalue)
    assert result.df == pytest.approx(ref.df)
    assert (result.low, result.high) == pytest.approx((ref_ci.low, ref_ci.high))
    assert result.method == "welch" and result.n == 9


def test_welch_sign_follows_b_minus_a() -> None:
    """Swapping the groups flips estimate and interval; p is unchanged."""
    forward, backward = welch(CONTROL, VARIANT), welch(VARIANT, CONTROL)
    assert forward.estimate > 0
    assert backward.estimate == pytest.approx(-forward.estimate)
    assert (backward.low, backward.high) == pytest.approx((-forward.high, -forward.low))
    assert backward.p_value == pytest.approx(forward.p_value)
    # scipy's statistic is for mean(first) - mean(second): ttest_ind(a, b) is negative here.
    assert stats.ttest_ind(CONTROL, VARIANT, equal_var=False).statistic < 0


def test_welch_random_samples_match_scipy() -> None:
    """Unequal sizes and variances, fixed seed: p-value and CI match scipy."""
    rng = np.random.default_rng(7)
    a, b = rng.normal(0.0, 1.0, 6), rng.normal(0.8, 3.0, 9)
    ref = stats.ttest_ind(b, a, equal_var=False)
    result = welch(a, b)
    assert result.p_value == pytest.approx(ref.pvalue)
    ref_ci = ref.confidence_interval()
    assert (result.low, result.high) == pytest.approx((ref_ci.low, ref_ci.high))


# scipy warns about "catastrophic cancellation" for any constant sample; the values are exact.
@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")
def test_welch_one_constant_group_matches_scipy() -> None:
    """Zero variance in one group only: df = n_b - 1, still matches scipy."""
    a, b = [2.0, 2.0, 2.0], [1.0, 2.0, 4.0]
    ref = stats.ttest_ind(b, a, equal_var=False)
    result = welch(a, b)
    assert result.df == pytest.approx(2.0)
    assert result.p_value == pytest.approx(ref.pvalue)


def test_welch_zero_variance_both_groups() -> None:
    """Both groups constant: SE 0, a zero-width interval at the exact difference."""
    differ = welch([1.0, 1.0, 1.0], [2.0, 2.0, 2.0])
    assert (differ.estimate, differ.low, differ.high, differ.se) == (1.0, 1.0, 1.0, 0.0)
    assert differ.p_value == 0.0
    same = welch([1.0, 1.0], [1.0, 1.0])
    assert same.estimate == 0.0 and same.p_value == 1.0


@pytest.mark.parametrize(("a", "b"), [([1.0], [1.0, 2.0]), ([1.0, 2.0], [3.0]), ([], [1.0, 2.0])])
def test_welch_needs_two_runs_per_group(a: list[float], b: list[float]) -> None:
    """Fewer than 2 runs in either group raises ValueError."""
    with pytest.raises(ValueError):
        welch(a, b)


def test_welch_rejects_nan() -> None:
    """A NaN run (e.g. a failed trial) raises ValueError."""
    with pytest.raises(ValueError, match="NaN"):
        welch([0.1, float("nan")], [0.2, 0.3])


def test_welch_is_deterministic() -> None:
    """Same inputs give the same Difference."""
    assert welch(CONTROL, VARIANT) == welch(list(CONTROL), list(VARIANT))
