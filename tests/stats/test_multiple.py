"""Holm correction against statsmodels' multipletests; macro average checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from labcoat.stats import Difference, holm, macro_average

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


def _diff(estimate: float, se: float, n: int) -> Difference:
    z = stats.norm.ppf(0.975)
    return Difference(estimate, estimate - z * se, estimate + z * se, se, 0.5, "paired", n)


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
