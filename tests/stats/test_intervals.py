"""Seed-level statistics (mean_interval, welch, paired_t) against scipy as the independent
reference, and the few-runs and pseudoreplication warnings."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from labcoat.stats import mean_interval, welch
from labcoat.stats._checks import StatsWarning
from labcoat.stats._seeds import paired_t

RUNS = [0.61, 0.58, 0.66, 0.63, 0.59]

# Tests about the numbers, not the warnings, may use fewer than 5 runs.
few_runs_ok = pytest.mark.filterwarnings("ignore::labcoat.stats._checks.StatsWarning")


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


@few_runs_ok
def test_mean_interval_hand_checked_two_runs() -> None:
    """[1, 3]: mean 2, sd sqrt(2), se 1, t(0.975, df=1) = 12.706..."""
    result = mean_interval([1.0, 3.0])
    assert result.point == 2.0
    assert result.se == pytest.approx(1.0)
    assert result.high - result.point == pytest.approx(12.7062047, rel=1e-7)


def test_mean_interval_one_run_is_infinite() -> None:
    """A single run cannot estimate its own noise: the interval is (-inf, inf), with a warning."""
    with pytest.warns(StatsWarning, match="only one seed"):
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


def test_mean_interval_bounds_keep_exact_match_inside_zero_one() -> None:
    """The demo's exact-match case: runs near 1 give a t interval past 1.0; with
    bounds=(0.0, 1.0) it stops at 1.0 while point, se and the lower end are unchanged."""
    values = [1.0, 0.96, 1.0, 0.92, 1.0]
    plain = mean_interval(values)
    cut = mean_interval(values, bounds=(0.0, 1.0))
    assert plain.high > 1.0
    assert (cut.point, cut.low, cut.se, cut.n) == (plain.point, plain.low, plain.se, 5)
    assert cut.high == 1.0


@few_runs_ok
def test_mean_interval_bounds_cut_both_ends_and_the_infinite_interval() -> None:
    """Three runs spread over [0, 1]: both ends cut; one run: (-inf, inf) becomes (lo, hi)."""
    wide = mean_interval([0.32, 0.9, 1.0], bounds=(0.0, 1.0))
    assert (wide.low, wide.high) == (0.0, 1.0)
    one = mean_interval([0.7], bounds=(0.0, 1.0))
    assert (one.low, one.high, one.point) == (0.0, 1.0, 0.7)
    unbounded = mean_interval([0.32, 0.9, 1.0])
    assert unbounded.low < 0 and unbounded.high > 1


@pytest.mark.parametrize(("values", "bounds", "match"), [
    ([0.5, 1.2, 0.9, 0.8, 0.7], (0.0, 1.0), "outside bounds"),
    ([-0.01, 0.5, 0.9, 0.8, 0.7], (0.0, 1.0), "outside bounds"),
    ([0.5, 0.6, 0.7, 0.8, 0.9], (1.0, 0.0), "lo < hi"),
    ([0.5, 0.6, 0.7, 0.8, 0.9], (0.0,), "pair"),
])
def test_mean_interval_bounds_reject_values_outside_and_bad_bounds(
    values: list[float], bounds: tuple, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        mean_interval(values, bounds=bounds)


@few_runs_ok
def test_bounded_coverage_is_the_unbounded_coverage() -> None:
    """Seeded check: 3000 experiments of 3 runs with accuracy ~ Beta(40, 2) (mean 0.952):
    cutting to [0, 1] never changes whether the mean is covered, so coverage is equal, and
    the cut intervals never leave [0, 1] while many uncut ones do."""
    rng = np.random.default_rng(3)
    truth = 40 / 42
    hits = cut_hits = outside = 0
    for _ in range(3000):
        x = rng.beta(40, 2, 3)
        plain, cut = mean_interval(x), mean_interval(x, bounds=(0.0, 1.0))
        hits += plain.low <= truth <= plain.high
        cut_hits += cut.low <= truth <= cut.high
        outside += plain.high > 1
        assert 0.0 <= cut.low <= cut.high <= 1.0
    assert hits == cut_hits
    assert outside > 300


# --- welch -----------------------------------------------------------------

CONTROL = [0.52, 0.55, 0.49, 0.51]
VARIANT = [0.60, 0.71, 0.58, 0.66, 0.69]


@few_runs_ok
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


@few_runs_ok
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
@few_runs_ok
def test_welch_one_constant_group_matches_scipy() -> None:
    """Zero variance in one group only: df = n_b - 1, still matches scipy."""
    a, b = [2.0, 2.0, 2.0], [1.0, 2.0, 4.0]
    ref = stats.ttest_ind(b, a, equal_var=False)
    result = welch(a, b)
    assert result.df == pytest.approx(2.0)
    assert result.p_value == pytest.approx(ref.pvalue)


@few_runs_ok
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


@few_runs_ok
def test_welch_rejects_nan() -> None:
    """A NaN run (e.g. a failed trial) raises ValueError."""
    with pytest.raises(ValueError, match="NaN"):
        welch([0.1, float("nan")], [0.2, 0.3])


@few_runs_ok
def test_welch_is_deterministic() -> None:
    """Same inputs give the same Difference."""
    assert welch(CONTROL, VARIANT) == welch(list(CONTROL), list(VARIANT))


# --- warnings: few runs, one run, several values per run --------------------


def test_mean_interval_warns_below_five_runs() -> None:
    """Four runs: a StatsWarning that explains why (<5 seeds: wide t, under-covering bootstrap)."""
    with pytest.warns(StatsWarning, match="4 runs") as record:
        mean_interval(RUNS[:4])
    message = str(record[0].message)
    assert "t intervals with <5 seeds are wide" in message
    assert "percentile bootstrap under-covers" in message


def test_five_runs_do_not_warn() -> None:
    """Five runs per group is enough: mean_interval and welch stay silent."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        mean_interval(RUNS)
        welch(RUNS, [r + 0.02 for r in RUNS[::-1]])


def test_welch_warns_for_the_small_group_only() -> None:
    """CONTROL has 4 runs, VARIANT 5: one warning, naming group a."""
    with pytest.warns(StatsWarning) as record:
        welch(CONTROL, VARIANT)
    assert len(record) == 1
    assert "4 runs in a" in str(record[0].message)


def _flattened_curves(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two arms of 5 runs x 20 steps, flattened, with the run id of every value."""
    rng = np.random.default_rng(seed)
    a = rng.normal(0, 1, (5, 1)) + rng.normal(0, 0.1, (5, 20))
    b = rng.normal(0, 1, (5, 1)) + rng.normal(0, 0.1, (5, 20))
    runs = np.repeat(np.arange(5), 20)
    return a.ravel(), b.ravel(), runs


def test_welch_warns_when_run_ids_repeat() -> None:
    """Steps passed as samples, with run ids: one pseudoreplication warning per arm,
    suggesting aggregation per run; 5 distinct runs means no few-runs warning."""
    a, b, runs = _flattened_curves(0)
    with pytest.warns(StatsWarning) as record:
        welch(a, b, runs_a=runs, runs_b=[f"v{r}" for r in runs])
    messages = [str(w.message) for w in record]
    assert len(messages) == 2
    assert all("100 values from only 5 runs" in m for m in messages)
    assert all("not independent" in m and "one value per run" in m for m in messages)


def test_welch_with_one_value_per_run_and_ids_is_silent() -> None:
    """Distinct run ids (one value each) are fine and do not change the result."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        with_ids = welch(RUNS, RUNS[::-1], runs_a=list("abcde"), runs_b=[1, 2, 3, 4, 5])
    assert with_ids == welch(RUNS, RUNS[::-1])


def test_welch_counts_distinct_runs_for_the_few_runs_warning() -> None:
    """12 values from 3 runs: warns both that values repeat runs and that 3 runs are few."""
    values = np.arange(12.0)
    runs = np.repeat([0, 1, 2], 4)
    with pytest.warns(StatsWarning) as record:
        welch(values, values + 1, runs_a=runs)
    messages = " | ".join(str(w.message) for w in record)
    assert "12 values from only 3 runs" in messages
    assert "3 runs in a" in messages


def test_welch_run_ids_must_match_values() -> None:
    """A run id list of the wrong length raises ValueError naming the argument."""
    with pytest.raises(ValueError, match="runs_a"):
        welch(RUNS, RUNS, runs_a=[0, 1])


# --- paired_t ----------------------------------------------------------------


@pytest.mark.parametrize("ci", [0.9, 0.95, 0.99])
def test_paired_t_matches_scipy_ttest_rel(ci: float) -> None:
    """Estimate mean(b - a); t, p, df and CI equal scipy's ttest_rel(b, a)."""
    rng = np.random.default_rng(11)
    shared = rng.normal(0, 1, 8)  # seed effect shared by both arms
    a, b = shared + rng.normal(0, 0.2, 8), shared + 0.15 + rng.normal(0, 0.2, 8)
    ref = stats.ttest_rel(b, a)
    ref_ci = ref.confidence_interval(confidence_level=ci)
    result = paired_t(a, b, ci=ci)
    assert result.estimate == pytest.approx(np.mean(b - a))
    assert result.estimate / result.se == pytest.approx(ref.statistic)
    assert result.p_value == pytest.approx(ref.pvalue)
    assert result.df == pytest.approx(ref.df) == 7
    assert (result.low, result.high) == pytest.approx((ref_ci.low, ref_ci.high))
    assert result.method == "paired-t" and result.n == 8 and result.ci == ci
    assert result.correlation == pytest.approx(np.corrcoef(a, b)[0, 1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_t_random_samples_match_scipy(seed: int) -> None:
    """Random paired samples of 5-12 seeds: p-value and CI match ttest_rel."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 13))
    a = rng.normal(0, 1, n)
    b = a + rng.normal(0.3, 0.5, n)
    ref = stats.ttest_rel(b, a)
    ref_ci = ref.confidence_interval()
    result = paired_t(a, b)
    assert result.p_value == pytest.approx(ref.pvalue)
    assert (result.low, result.high) == pytest.approx((ref_ci.low, ref_ci.high))


def test_paired_t_hand_checked() -> None:
    """b - a = [1, 2, 3, 4, 5]: mean 3, sd sqrt(2.5), se sqrt(0.5), t(0.975, 4) = 2.7764451."""
    result = paired_t([0.0] * 5, [1.0, 2.0, 3.0, 4.0, 5.0])
    assert result.estimate == 3.0
    assert result.se == pytest.approx(math.sqrt(0.5))
    assert result.high - result.estimate == pytest.approx(2.7764451052 * math.sqrt(0.5))


def test_paired_t_is_narrower_than_welch_when_seeds_share_noise() -> None:
    """Arms that share per-seed noise: pairing removes it, Welch cannot."""
    rng = np.random.default_rng(3)
    shared = rng.normal(0, 1, 6)
    a, b = shared, shared + 0.2 + rng.normal(0, 0.05, 6)
    assert paired_t(a, b).se < welch(a, b).se / 5


def test_paired_t_warns_below_five_seeds() -> None:
    """Three seeds: a StatsWarning."""
    with pytest.warns(StatsWarning, match="3 runs"):
        paired_t([1.0, 2.0, 3.0], [1.5, 2.0, 3.7])


@few_runs_ok
def test_paired_t_zero_variance_difference() -> None:
    """Identical differences: SE 0, zero-width interval, p 0 (1 when all are 0)."""
    shifted = paired_t([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
    assert (shifted.estimate, shifted.low, shifted.high, shifted.p_value) == (1.0, 1.0, 1.0, 0.0)
    assert paired_t([1.0, 2.0], [1.0, 2.0]).p_value == 1.0


@few_runs_ok
@pytest.mark.parametrize(
    ("a", "b"), [([1.0, 2.0, 3.0], [1.0, 2.0]), ([1.0], [2.0]), ([1.0, float("nan")], [1.0, 2.0])]
)
def test_paired_t_rejects_misaligned_short_or_nan(a: list[float], b: list[float]) -> None:
    """Different lengths, one seed, or NaN raise ValueError."""
    with pytest.raises(ValueError):
        paired_t(a, b)
