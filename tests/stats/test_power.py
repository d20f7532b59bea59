"""Planning: Miller's item formula (worked example, inversion, simulation) and seed-level
t-test power against statsmodels' TTestIndPower."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from statsmodels.stats.power import TTestIndPower

from labcoat.stats._checks import StatsWarning
from labcoat.stats._items import paired_difference
from labcoat.stats._power import (
    items_needed,
    items_needed_from_pilot,
    minimum_detectable_effect,
    pilot_variances,
    power_two_sample,
    seeds_needed,
    seeds_needed_from_pilot,
)

# (z_{0.025} + z_{0.2})^2 = (1.959964 + 0.841621)^2, written out rather than recomputed.
Z2_80 = 7.848879

# --- items_needed / minimum_detectable_effect ----------------------------------


def test_millers_worked_example_needs_969_items() -> None:
    """Miller 2024, sec. 5: omega^2 = 1/9, delta = 0.03, alpha 0.05, power 0.8 -> n = 969."""
    assert items_needed(0.03, omega2=1 / 9) == 969
    assert items_needed(-0.03, omega2=1 / 9) == 969  # the direction does not matter
    assert items_needed(0.03, alpha=0.05, power=0.8, omega2=1 / 9) == 969


def test_items_needed_with_resampling_by_hand() -> None:
    """omega^2 = 0.05, sigma^2 = 0.2 for both models, K = 4: variance 0.05 + 0.05 + 0.05;
    n = 7.848879 * 0.15 / 0.05^2 = 470.9 -> 471. K = 1 gives 0.45 -> 1412.7 -> 1413."""
    kwargs = {"omega2": 0.05, "sigma2_a": 0.2, "sigma2_b": 0.2}
    assert items_needed(0.05, **kwargs, k_a=4, k_b=4) == math.ceil(Z2_80 * 0.15 / 0.0025)
    assert items_needed(0.05, **kwargs) == math.ceil(Z2_80 * 0.45 / 0.0025)


def test_items_needed_other_alpha_and_power_by_hand() -> None:
    """alpha 0.01, power 0.9: (2.575829 + 1.281552)^2 = 14.879; omega^2 0.1, delta 0.05."""
    assert items_needed(0.05, alpha=0.01, power=0.9, omega2=0.1) == math.ceil(
        (2.575829 + 1.281552) ** 2 * 0.1 / 0.0025)


def test_items_needed_is_at_least_two() -> None:
    """A huge effect would need < 1 item by the formula; a paired SE needs 2."""
    assert items_needed(5.0, omega2=0.01) == 2


@pytest.mark.parametrize("n", [10, 50, 200, 969, 5000])
@pytest.mark.parametrize(("sigma2", "k"), [(0.0, 1), (0.3, 2), (0.1, 8)])
def test_minimum_detectable_effect_inverts_items_needed(n: int, sigma2: float, k: int) -> None:
    """items_needed(MDE(n)) == n, and a slightly smaller effect needs more than n items."""
    kwargs = {"omega2": 0.08, "sigma2_a": sigma2, "sigma2_b": sigma2, "k_a": k, "k_b": k}
    mde = minimum_detectable_effect(n, **kwargs)
    assert items_needed(mde, **kwargs) == n
    assert items_needed(mde * 0.999, **kwargs) > n
    assert items_needed(mde * 1.01, **kwargs) <= n


def test_minimum_detectable_effect_millers_example() -> None:
    """969 items at omega^2 = 1/9 detect 3 points: 2.801585 * sqrt(1/9/969) = 0.03000."""
    assert minimum_detectable_effect(969, omega2=1 / 9) == pytest.approx(0.03, abs=2e-5)
    assert minimum_detectable_effect(969, omega2=1 / 9) == pytest.approx(
        math.sqrt(Z2_80 / 9 / 969), rel=1e-6)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: items_needed(0.0, omega2=0.1), "delta"),
    (lambda: items_needed(float("nan"), omega2=0.1), "delta"),
    (lambda: items_needed(0.03, omega2=-0.1), "omega2"),
    (lambda: items_needed(0.03, omega2=0.1, sigma2_a=float("inf")), "sigma2_a"),
    (lambda: items_needed(0.03, omega2=0.0), "is 0"),
    (lambda: items_needed(0.03, omega2=0.1, k_a=0), "k_a"),
    (lambda: items_needed(0.03, omega2=0.1, k_b=1.5), "k_b"),
    (lambda: items_needed(0.03, omega2=0.1, alpha=5), "alpha"),
    (lambda: items_needed(0.03, omega2=0.1, power=1.0), "power"),
    (lambda: items_needed(0.03, omega2=0.1, power=0.01), "power"),
    (lambda: minimum_detectable_effect(1, omega2=0.1), "n_items"),
    (lambda: minimum_detectable_effect(10.5, omega2=0.1), "n_items"),
])
def test_item_planning_rejects_invalid_input(call, match: str) -> None:
    """Invalid deltas, variances, K, alpha, power or n raise ValueError naming the argument."""
    with pytest.raises(ValueError, match=match):
        call()


def test_items_needed_requires_omega2() -> None:
    """omega2 has no default: a made-up variance would give a plausible but baseless n."""
    with pytest.raises(TypeError):
        items_needed(0.03)  # type: ignore[call-arg]


def test_items_needed_reaches_its_power_in_simulation() -> None:
    """Simulate paired evals at n = items_needed(...) with known omega^2, sigma^2, K (fixed
    seed): paired_difference rejects at alpha 0.05 in about 80% of 2000 evals."""
    rng = np.random.default_rng(5)
    delta, omega2, sigma2, k = 0.1, 0.1, 0.2, 2
    n = items_needed(delta, omega2=omega2, sigma2_a=sigma2, sigma2_b=sigma2, k_a=k, k_b=k)
    assert n == math.ceil(Z2_80 * (0.1 + 0.1 + 0.1) / 0.01)
    sims = 2000
    x_a = rng.normal(0.5, 0.3, (sims, n))
    x_b = x_a + delta + rng.normal(0, math.sqrt(omega2), (sims, n))
    a = x_a[:, :, None] + rng.normal(0, math.sqrt(sigma2), (sims, n, k))
    b = x_b[:, :, None] + rng.normal(0, math.sqrt(sigma2), (sims, n, k))
    rejected = np.mean([paired_difference(a[i], b[i]).p_value < 0.05 for i in range(sims)])
    assert rejected == pytest.approx(0.8, abs=0.03)


# --- pilots --------------------------------------------------------------------


def test_pilot_variances_by_hand() -> None:
    """a: item means [0.5, 1, 0], within variances [0.5, 0, 0] -> sigma_A^2 = 1/6;
    b: one answer per item -> sigma_B^2 = 0; differences [0.5, -1, 1] have variance 13/12;
    omega^2 = 13/12 - (1/6)/2 = 1."""
    a = [[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]
    b = [1.0, 0.0, 1.0]
    pilot = pilot_variances(a, b)
    assert pilot.sigma2_a == pytest.approx(1 / 6)
    assert pilot.sigma2_b == 0.0
    assert pilot.omega2 == pytest.approx(1.0)
    assert (pilot.k_a, pilot.k_b, pilot.n_items) == (2, 1, 3)


def test_pilot_variances_recover_known_components() -> None:
    """A large simulated pilot (fixed seed) recovers omega^2 = 0.04 and sigma^2 = 0.3, 0.1."""
    rng = np.random.default_rng(3)
    n = 4000
    x_a = rng.normal(0, 1, n)
    x_b = x_a + rng.normal(0.02, 0.2, n)
    a = x_a[:, None] + rng.normal(0, math.sqrt(0.3), (n, 3))
    b = x_b[:, None] + rng.normal(0, math.sqrt(0.1), (n, 5))
    pilot = pilot_variances(a, b)
    assert pilot.omega2 == pytest.approx(0.04, rel=0.1)
    assert pilot.sigma2_a == pytest.approx(0.3, rel=0.05)
    assert pilot.sigma2_b == pytest.approx(0.1, rel=0.05)


def test_items_needed_from_pilot_by_hand() -> None:
    """Planning the pilot's own K: n = 7.848879 * Var(per-item mean difference) / delta^2."""
    rng = np.random.default_rng(4)
    x = rng.normal(0, 1, 40)
    a = x[:, None] + rng.normal(0, 0.5, (40, 3))
    b = (x + rng.normal(0.05, 0.4, 40))[:, None] + rng.normal(0, 0.5, (40, 3))
    d = b.mean(axis=1) - a.mean(axis=1)
    expected = math.ceil(Z2_80 * d.var(ddof=1) / 0.05**2)
    assert items_needed_from_pilot(a, b, 0.05) == expected


def test_items_needed_from_pilot_credits_more_answers() -> None:
    """With a K = 2 pilot, planning K = 8 answers per item needs fewer items than K = 2."""
    rng = np.random.default_rng(6)
    x = rng.normal(0, 1, 200)
    a = x[:, None] + rng.normal(0, 1, (200, 2))
    b = x[:, None] + 0.1 + rng.normal(0, 1, (200, 2))
    assert items_needed_from_pilot(a, b, 0.1, k_a=8, k_b=8) < items_needed_from_pilot(a, b, 0.1)


def test_pilot_with_one_answer_warns_when_planning_more() -> None:
    """K = 1 pilot, K = 4 plan: StatsWarning, and no credit for resampling (same n as K = 1)."""
    rng = np.random.default_rng(7)
    a, b = rng.random(50), rng.random(50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = items_needed_from_pilot(a, b, 0.1)
    with pytest.warns(StatsWarning, match="one answer per item"):
        planned = items_needed_from_pilot(a, b, 0.1, k_a=4, k_b=4)
    assert planned == same


def test_pilot_negative_omega2_is_clipped_with_a_warning() -> None:
    """Per-item differences vary less than the answer noise explains: omega^2 = 0, warns."""
    a = [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    b = [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
    with pytest.warns(StatsWarning, match="negative"):
        pilot = pilot_variances(a, b)
    assert pilot.omega2 == 0.0


@pytest.mark.parametrize(("a", "b", "match"), [
    ([0.1, 0.2, 0.3], [0.1, 0.2], "same items"),
    ([0.1], [0.2], "at least 2 items"),
    ([0.1, 0.2, 0.3], [0.2, 0.3, 0.4], "zero variance"),  # 0.1 apart, up to round-off
    ([[1, 1], [0, 0]], [[1, 1], [0, 0]], "zero variance"),
])
def test_items_needed_from_pilot_rejects_unusable_pilots(a: list, b: list, match: str) -> None:
    """Different item counts, one item, or a constant difference raise ValueError."""
    with pytest.raises(ValueError, match=match):
        items_needed_from_pilot(a, b, 0.05)


# --- seeds: noncentral t vs statsmodels ----------------------------------------

GRID = [
    (effect, alpha, power, ratio, alternative)
    for effect in (0.3, 0.8, 1.5)
    for alpha, power in ((0.05, 0.8), (0.01, 0.9), (0.1, 0.7))
    for ratio in (0.5, 1.0, 3.0)
    for alternative in ("two-sided", "larger")
] + [(-0.6, 0.05, 0.8, 1.0, "smaller"), (-0.6, 0.05, 0.8, 1.0, "two-sided")]


@pytest.mark.parametrize(("effect", "alpha", "power", "ratio", "alternative"), GRID)
def test_seeds_needed_matches_statsmodels_solve_power(
    effect: float, alpha: float, power: float, ratio: float, alternative: str
) -> None:
    """n = ceil(TTestIndPower().solve_power(...)), and n is the smallest whole number whose
    statsmodels power reaches the target."""
    reference = TTestIndPower()
    solved = reference.solve_power(effect_size=effect, alpha=alpha, power=power, ratio=ratio,
                                   alternative=alternative)
    n = seeds_needed(effect, alpha=alpha, power=power, ratio=ratio, alternative=alternative)
    assert n == max(2, math.ceil(solved - 1e-6))
    assert reference.power(effect, n, alpha, ratio=ratio, alternative=alternative) >= power
    if n > 2:
        assert reference.power(effect, n - 1, alpha, ratio=ratio,
                               alternative=alternative) < power


@pytest.mark.parametrize("n", [2, 3.5, 5, 12, 40])
@pytest.mark.parametrize(("effect", "ratio", "alternative"), [
    (0.5, 1.0, "two-sided"), (1.2, 2.0, "larger"), (-0.9, 0.5, "smaller"), (0.9, 1.0, "smaller"),
])
def test_power_two_sample_matches_statsmodels(n: float, effect: float, ratio: float,
                                              alternative: str) -> None:
    """power_two_sample equals TTestIndPower().power for whole and fractional n."""
    expected = TTestIndPower().power(effect, n, 0.05, ratio=ratio, alternative=alternative)
    assert power_two_sample(n, effect, ratio=ratio, alternative=alternative) == pytest.approx(
        expected, rel=1e-9)


def test_raw_effect_with_sd_equals_cohens_d() -> None:
    """effect 0.02 with sd 0.04 is d = 0.5: 64 seeds per arm (Cohen's classic table)."""
    assert seeds_needed(0.02, sd=0.04) == seeds_needed(0.5) == 64
    assert power_two_sample(10, 0.02, sd=0.04) == pytest.approx(power_two_sample(10, 0.5))


def test_seeds_needed_floor_for_huge_effects() -> None:
    """A huge effect is detected with the minimum of 2 runs per arm."""
    assert seeds_needed(8.0) == 2
    assert power_two_sample(2, 8.0) >= 0.8


@pytest.mark.parametrize(("call", "match"), [
    (lambda: seeds_needed(0.0), "effect"),
    (lambda: seeds_needed(0.5, sd=0.0), "sd"),
    (lambda: seeds_needed(0.5, alternative="greater"), "alternative"),
    (lambda: seeds_needed(-0.5, alternative="larger"), "other way"),
    (lambda: seeds_needed(0.5, alternative="smaller"), "other way"),
    (lambda: seeds_needed(0.5, ratio=0), "ratio"),
    (lambda: seeds_needed(0.5, alpha=0.0), "alpha"),
    (lambda: seeds_needed(0.5, power=0.01), "power"),
    (lambda: seeds_needed(1e-6), "more than"),
    (lambda: power_two_sample(1, 0.5), "n="),
    (lambda: power_two_sample(float("nan"), 0.5), "n="),
])
def test_seed_planning_rejects_invalid_input(call, match: str) -> None:
    """Zero effects, bad sd/ratio/alpha/power/alternative, or n < 2 raise ValueError."""
    with pytest.raises(ValueError, match=match):
        call()


def test_seeds_needed_from_pilot_uses_the_pooled_sd() -> None:
    """Pilot sds by hand: control [1, 2, 3] (var 1), variant [2, 4, 6, 8] (var 20/3);
    pooled var = (2*1 + 3*20/3) / 5 = 4.4. n = ceil(statsmodels n for d = 1.5/sqrt(4.4))."""
    control, variant = [1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0]
    d = 1.5 / math.sqrt(4.4)
    solved = TTestIndPower().solve_power(effect_size=d, alpha=0.05, power=0.8, ratio=1.0)
    assert seeds_needed_from_pilot(control, variant, 1.5) == math.ceil(solved)
    assert seeds_needed_from_pilot(control, variant, 1.5, ratio=2.0) == seeds_needed(
        1.5, sd=math.sqrt(4.4), ratio=2.0)


@pytest.mark.parametrize(("control", "variant", "match"), [
    ([0.5], [0.6, 0.7], "at least 2"),
    ([0.5, float("nan")], [0.6, 0.7], "NaN"),
    ([0.5, 0.5], [0.7, 0.7], "zero spread"),
    ([[0.5, 0.6]], [0.6, 0.7], "shape"),
])
def test_seeds_needed_from_pilot_rejects_unusable_pilots(control: list, variant: list,
                                                         match: str) -> None:
    """One run, NaN, zero spread or a 2-D array raise ValueError."""
    with pytest.raises(ValueError, match=match):
        seeds_needed_from_pilot(control, variant, 0.1)
