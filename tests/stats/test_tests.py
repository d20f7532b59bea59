"""Permutation test, Mann-Whitney U and Hedges' g against scipy and published worked
examples; the item-set check."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from labcoat.stats._checks import StatsWarning
from labcoat.stats._tests import check_same_items, hedges_g, mann_whitney, permutation_test

few_runs_ok = pytest.mark.filterwarnings("ignore::labcoat.stats._checks.StatsWarning")


def _groups(seed: int, n_a: int, n_b: int, shift: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, n_a), rng.normal(shift, 1.0, n_b)


def _mean_diff(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    """scipy statistic for the first sample minus the second; we pass (b, a)."""
    return x.mean(axis=axis) - y.mean(axis=axis)


def _paired_diff(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    return (x - y).mean(axis=axis)


# --- permutation_test ----------------------------------------------------------


@few_runs_ok
@pytest.mark.parametrize(("n_a", "n_b", "seed"), [(5, 5, 0), (6, 4, 1), (7, 7, 2), (3, 9, 3)])
def test_exact_permutation_matches_scipy(n_a: int, n_b: int, seed: int) -> None:
    """Few relabelings (C(n, n_a) <= reps): exact, and p equals scipy's exact p-value."""
    a, b = _groups(seed, n_a, n_b)
    result = permutation_test(a, b)
    ref = stats.permutation_test((b, a), _mean_diff, n_resamples=10_000, vectorized=True)
    assert result.exact and result.permutations == math.comb(n_a + n_b, n_a)
    assert result.estimate == pytest.approx(ref.statistic)
    assert result.p_value == pytest.approx(ref.pvalue, rel=1e-12)
    assert result.method == "permutation" and result.n == n_a + n_b


@few_runs_ok
@pytest.mark.parametrize(("n", "seed"), [(4, 0), (8, 1), (13, 2)])
def test_exact_paired_permutation_matches_scipy(n: int, seed: int) -> None:
    """Paired: sign flips of b - a, exact when 2**n <= reps; equals scipy 'samples' type."""
    rng = np.random.default_rng(seed)
    a = rng.normal(0, 1, n)
    b = a + rng.normal(0.4, 0.5, n)
    result = permutation_test(a, b, paired=True)
    ref = stats.permutation_test((b, a), _paired_diff, permutation_type="samples",
                                 n_resamples=10_000, vectorized=True)
    assert result.exact and result.permutations == 2**n
    assert result.p_value == pytest.approx(ref.pvalue, rel=1e-12)
    assert result.method == "permutation-paired"


@few_runs_ok
def test_permutation_hand_checked() -> None:
    """a=[1,2], b=[3,4]: the 6 relabelings give mean differences 2, 1, 0, 0, -1, -2, so
    P(T >= 2) = 1/6 and p = 2/6. Paired, b - a = [2, 2]: flips give 2, 0, 0, -2, p = 2/4."""
    result = permutation_test([1.0, 2.0], [3.0, 4.0])
    assert (result.estimate, result.permutations) == (2.0, 6)
    assert result.p_value == pytest.approx(1 / 3)
    paired = permutation_test([1.0, 2.0], [3.0, 4.0], paired=True)
    assert paired.permutations == 4 and paired.p_value == pytest.approx(0.5)


def test_monte_carlo_permutation_agrees_with_exact_within_its_error() -> None:
    """8 + 8 runs have 12,870 relabelings; 3,000 random ones estimate scipy's exact p
    within 4 Monte-Carlo standard errors."""
    a, b = _groups(4, 8, 8, shift=0.9)
    exact = stats.permutation_test((b, a), _mean_diff, n_resamples=np.inf, vectorized=True)
    result = permutation_test(a, b, reps=3_000, seed=1)
    assert not result.exact and result.permutations == 3_000
    p = exact.pvalue
    assert 0.005 < p < 0.5  # a p-value worth estimating
    assert abs(result.p_value - p) < 4 * math.sqrt(p * (1 - p) / 3_000) + 1 / 3_000


def test_monte_carlo_paired_agrees_with_exact() -> None:
    """15 paired seeds (32,768 sign flips), 3,000 random flips: within 4 MC SEs of scipy's
    exact p."""
    rng = np.random.default_rng(5)
    a = rng.normal(0, 1, 15)
    b = a + rng.normal(0.5, 0.6, 15)
    exact = stats.permutation_test((b, a), _paired_diff, permutation_type="samples",
                                   n_resamples=np.inf, vectorized=True)
    result = permutation_test(a, b, reps=3_000, seed=2, paired=True)
    p = exact.pvalue
    assert not result.exact and result.permutations == 3_000
    assert 0.005 < p < 0.5
    assert abs(result.p_value - p) < 4 * math.sqrt(p * (1 - p) / 3_000) + 1 / 3_000


def test_monte_carlo_p_value_is_never_zero() -> None:
    """Completely separated groups, 999 random relabelings: p = 2 * 1/1000, not 0."""
    result = permutation_test(np.arange(20.0), np.arange(20.0) + 100, reps=999)
    assert result.p_value == pytest.approx(2 / 1000)


def test_same_seed_same_result_and_global_state_untouched() -> None:
    """An int seed or a Generator fixes the answer; numpy's global RNG is never drawn from."""
    a, b = _groups(6, 12, 12, shift=0.5)
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    first = permutation_test(a, b, reps=2_000, seed=7)
    assert np.random.random() == expected_next
    assert permutation_test(a, b, reps=2_000, seed=7) == first
    assert permutation_test(a, b, reps=2_000, seed=np.random.default_rng(7)) == first
    assert permutation_test(a, b, reps=2_000, seed=8).p_value != first.p_value


@pytest.mark.parametrize("seed", [None, 1.5, True, "0"])
def test_permutation_rejects_seeds_that_do_not_repeat(seed: object) -> None:
    """seed must be an int or Generator: None (fresh entropy) or a float raises ValueError."""
    with pytest.raises(ValueError, match="seed"):
        permutation_test([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], seed=seed)  # type: ignore[arg-type]


@few_runs_ok
@pytest.mark.parametrize("kwargs", [{"reps": 0}, {"reps": 2.5}, {"paired": True},
                                    {"paired": True, "runs_a": [0, 1, 2]}])
def test_permutation_rejects_bad_arguments(kwargs: dict) -> None:
    """Non-positive reps, unaligned paired data, or run ids with paired=True raise ValueError."""
    b = [4.0, 5.0, 6.0] if "runs_a" in kwargs else [4.0, 5.0]
    with pytest.raises(ValueError):
        permutation_test([1.0, 2.0, 3.0], b, **kwargs)


def test_permutation_warns_below_five_runs() -> None:
    """Three runs per group: a StatsWarning for each group."""
    with pytest.warns(StatsWarning) as record:
        permutation_test([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    messages = [str(w.message) for w in record]
    assert len(messages) == 2
    assert "3 runs in a" in messages[0] and "3 runs in b" in messages[1]


# --- mann_whitney --------------------------------------------------------------


@few_runs_ok
@pytest.mark.parametrize(
    ("n_a", "n_b", "seed", "rounded", "method"),
    [(5, 5, 0, False, "exact"), (3, 8, 1, False, "exact"), (8, 20, 2, False, "exact"),
     (6, 2000, 7, False, "exact"),
     (9, 9, 3, False, "asymptotic"), (30, 12, 4, False, "asymptotic"),
     (5, 6, 5, True, "asymptotic"), (25, 25, 6, True, "asymptotic")],
)
def test_mann_whitney_matches_scipy(n_a: int, n_b: int, seed: int, rounded: bool,
                                    method: str) -> None:
    """U of b and the two-sided p equal scipy.stats.mannwhitneyu(b, a), exact and
    asymptotic (with ties when the values are rounded)."""
    a, b = _groups(seed, n_a, n_b)
    if rounded:
        a, b = np.round(a), np.round(b)
    ref = stats.mannwhitneyu(b, a)
    result = mann_whitney(a, b)
    assert result.method == method
    assert result.u == pytest.approx(ref.statistic)
    assert result.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    assert (result.n_a, result.n_b) == (n_a, n_b)


@few_runs_ok
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_superiority_is_the_share_of_pairs_where_b_wins(seed: int) -> None:
    """Brute force over all pairs: P(b > a) + P(b = a) / 2, with ties from rounding."""
    a, b = _groups(seed, 7, 11)
    a, b = np.round(a * 2) / 2, np.round(b * 2) / 2
    greater = (b[None, :] > a[:, None]).mean()
    equal = (b[None, :] == a[:, None]).mean()
    assert mann_whitney(a, b).superiority == pytest.approx(greater + equal / 2)


@few_runs_ok
def test_mann_whitney_hand_checked_and_symmetric() -> None:
    """b all above a (3 vs 3): U = 9, superiority 1, exact p = 2 / C(6, 3) = 0.1.
    Swapping the groups gives superiority 0 and the same p."""
    result = mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert (result.u, result.superiority, result.method) == (9.0, 1.0, "exact")
    assert result.p_value == pytest.approx(0.1)
    swapped = mann_whitney([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])
    assert swapped.superiority == 0.0 and swapped.p_value == pytest.approx(0.1)


@few_runs_ok
def test_mann_whitney_all_equal_is_no_evidence() -> None:
    """Every value equal: superiority 0.5 and p = 1 (not NaN)."""
    result = mann_whitney([1.0, 1.0, 1.0], [1.0, 1.0])
    assert (result.superiority, result.p_value) == (0.5, 1.0)


def test_mann_whitney_warns_on_pseudoreplication() -> None:
    """Run ids that repeat trigger the pseudoreplication warning here too."""
    values = np.arange(10.0)
    with pytest.warns(StatsWarning, match="not independent"):
        mann_whitney(values, values + 0.5, runs_a=[0, 0, 1, 1, 2, 2, 3, 3, 4, 4])


# --- hedges_g ------------------------------------------------------------------

# mtcars mpg by transmission (R datasets; Henderson & Velleman 1981): am = 0 automatic
# (19 cars), am = 1 manual (13 cars).
MPG_AUTOMATIC = [21.4, 18.7, 18.1, 14.3, 24.4, 22.8, 19.2, 17.8, 16.4, 17.3, 15.2, 10.4, 10.4,
                 14.7, 21.5, 15.5, 15.2, 13.3, 19.2]
MPG_MANUAL = [21.0, 21.0, 22.8, 32.4, 30.4, 33.9, 27.3, 26.0, 30.4, 15.8, 19.7, 15.0, 21.4]


def test_hedges_g_matches_effectsize_worked_example() -> None:
    """R effectsize's README: hedges_g(mpg ~ am, mtcars) = -1.44, 95% CI [-2.21, -0.65]
    (automatic minus manual; noncentral-t interval scaled by J)."""
    result = hedges_g(MPG_MANUAL, MPG_AUTOMATIC)
    assert round(result.point, 2) == -1.44
    assert (round(result.low, 2), round(result.high, 2)) == (-2.21, -0.65)
    assert result.n == 32 and result.ci == 0.95


def _with_moments(mean: float, sd: float, n: int) -> np.ndarray:
    z = np.linspace(-1.0, 1.0, n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


def test_hedges_g_point_and_se_match_borenstein_worked_example() -> None:
    """Borenstein et al. (2009), Introduction to Meta-Analysis, ch. 4: means 103 and 100,
    SDs 5.5 and 4.5, n = 50 each: d = 0.5970, J = 0.9923, g = 0.5924, SE_g = 0.2028."""
    treated, control = _with_moments(103.0, 5.5, 50), _with_moments(100.0, 4.5, 50)
    result = hedges_g(control, treated)
    assert round(result.point, 4) == 0.5924
    assert round(result.se, 4) == 0.2028


@few_runs_ok
@pytest.mark.parametrize(
    ("df", "j"),
    # J(df) = Gamma(df/2) / (sqrt(df/2) Gamma((df-1)/2)) in closed form, with
    # Gamma(1/2) = sqrt(pi), Gamma(1) = 1, Gamma(3/2) = sqrt(pi)/2, Gamma(2) = 1.
    [(2, 1 / math.sqrt(math.pi)), (3, math.sqrt(math.pi / 6)), (4, math.sqrt(2 / math.pi))],
)
def test_small_sample_correction_closed_forms(df: int, j: float) -> None:
    """g / d equals Hedges' exact J(df) for tiny df, where it differs most from 1."""
    a = _with_moments(0.0, 1.0, 2)
    b = _with_moments(0.7, 1.0, df)  # df = 2 + df - 2
    d = 0.7  # both groups have SD 1, so the pooled SD is 1
    assert hedges_g(a, b).point / d == pytest.approx(j, rel=1e-12)


@few_runs_ok
@pytest.mark.parametrize("df", [10, 30, 98])
def test_small_sample_correction_near_hedges_approximation(df: int) -> None:
    """For larger df, J is within 1e-3 of Hedges' (1981) approximation 1 - 3 / (4 df - 1)."""
    a = _with_moments(0.0, 1.0, 2)
    b = _with_moments(0.7, 1.0, df)
    assert hedges_g(a, b).point / 0.7 == pytest.approx(1 - 3 / (4 * df - 1), abs=1e-3)


@few_runs_ok
def test_hedges_g_interval_matches_a_brute_force_ncp_scan() -> None:
    """Scan noncentrality on a fine grid for where nct.cdf(t) crosses 0.975 and 0.025;
    the grid points agree with the root-found bounds (scaled by J / sqrt(n)) to the grid step."""
    a, b = _groups(9, 6, 7, shift=1.2)
    n_a, n_b, df = 6, 7, 11
    pooled = math.sqrt(((n_a - 1) * a.var(ddof=1) + (n_b - 1) * b.var(ddof=1)) / df)
    d = (b.mean() - a.mean()) / pooled
    scale = math.sqrt(1 / n_a + 1 / n_b)
    t = d / scale
    grid = np.arange(t - 6, t + 6, 1e-3)
    cdf = stats.nct.cdf(t, df, grid)
    low_ncp = grid[np.argmax(cdf < 0.975)]
    high_ncp = grid[np.argmax(cdf < 0.025)]
    result = hedges_g(a, b)
    j = result.point / d
    assert result.low == pytest.approx(j * low_ncp * scale, abs=2e-3 * scale)
    assert result.high == pytest.approx(j * high_ncp * scale, abs=2e-3 * scale)


@few_runs_ok
def test_hedges_g_swaps_sign_with_the_groups_and_narrows_with_ci() -> None:
    """hedges_g(b, a) mirrors hedges_g(a, b); a 90% interval sits inside the 95% one."""
    a, b = _groups(10, 5, 6)
    forward, backward = hedges_g(a, b), hedges_g(b, a)
    assert backward.point == pytest.approx(-forward.point)
    assert (backward.low, backward.high) == pytest.approx((-forward.high, -forward.low))
    narrow = hedges_g(a, b, ci=0.9)
    assert forward.low < narrow.low < narrow.point < narrow.high < forward.high


def test_hedges_g_interval_with_a_huge_effect_stays_finite() -> None:
    """t around 60: the root search still brackets where scipy's nct.cdf is finite."""
    a = _with_moments(0.0, 1.0, 10)
    b = _with_moments(25.0, 1.0, 10)
    result = hedges_g(a, b)
    assert math.isfinite(result.low) and math.isfinite(result.high)
    assert result.low < result.point < result.high
    lower_ncp = result.low / (result.point / 25.0) / math.sqrt(0.2)
    assert stats.nct.cdf(25.0 / math.sqrt(0.2), 18, lower_ncp) == pytest.approx(0.975)


@few_runs_ok
@pytest.mark.parametrize(("a", "b"), [([1.0], [1.0, 2.0, 3.0]), ([1.0, 1.0], [1.0, 1.0]),
                                      ([1.0, float("inf")], [1.0, 2.0])])
def test_hedges_g_rejects_too_few_constant_or_non_finite(a: list[float], b: list[float]) -> None:
    """One run in a group, zero pooled SD, or inf raise ValueError."""
    with pytest.raises(ValueError):
        hedges_g(a, b)


# --- check_same_items ------------------------------------------------------------


def test_same_items_in_any_order_are_silent() -> None:
    """Same ids, different order: no warning; shared ids in ids_a's order."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        assert check_same_items(["q3", "q1", "q2"], ["q1", "q2", "q3"]) == ["q3", "q1", "q2"]


def test_different_items_warn_and_return_the_shared_ones() -> None:
    """ids_a has q4 that b lacks, b has q9: warns with the counts, returns the 3 shared."""
    with pytest.warns(StatsWarning, match="1 items only in ids_a, 1 only in ids_b"):
        shared = check_same_items(["q1", "q2", "q3", "q4"], ["q9", "q3", "q2", "q1"])
    assert shared == ["q1", "q2", "q3"]


@pytest.mark.parametrize(("a", "b"), [(["q1", "q1"], ["q1"]), ([1, 2], [3, 4])])
def test_repeated_or_disjoint_items_raise(a: list, b: list) -> None:
    """A repeated id, or no id in common, raises ValueError."""
    with pytest.raises(ValueError):
        check_same_items(a, b)
