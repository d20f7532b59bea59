"""Trimmed-mean intervals (Tukey-McLaughlin, Yuen) against scipy's trimmed t test, and the
outlier-seed check against Grubbs' test, with seeded false-alarm and coverage checks."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from labcoat import stats as lstats
from labcoat.stats._checks import StatsWarning
from labcoat.stats._robust import trimmed_mean_interval, yuen
from labcoat.stats._seeds import OUTLIER_ALPHA, outlying_run

quiet = pytest.mark.filterwarnings("ignore::labcoat.stats._checks.StatsWarning")


def _trimmed_by_definition(x: np.ndarray, trim: float = 0.2) -> tuple[float, float, int]:
    """Trimmed mean, SE and h straight from the definitions (sort, cut, winsorize)."""
    n = len(x)
    g = int(trim * n)
    s = sorted(x)
    kept = s[g:n - g]
    wins = [min(max(v, s[g]), s[n - g - 1]) for v in s]
    h = len(kept)
    return float(np.mean(kept)), math.sqrt((n - 1) * np.var(wins, ddof=1) / (h * (h - 1))), h


@quiet
@pytest.mark.parametrize("n", [5, 6, 8, 10, 13])
def test_trimmed_mean_interval_matches_scipy_trimmed_t(n: int) -> None:
    """One-sample trimmed t = scipy's Yuen test against a constant sample (whose winsorized
    variance is 0, so df = h - 1 and the SE is the sample's own); and the definitions."""
    x = np.random.default_rng(n).normal(0.6, 0.05, n)
    x[0] = 0.1  # a collapsed run
    ref = stats.ttest_ind(x, np.zeros(10), equal_var=False, trim=0.2)
    ref_ci = ref.confidence_interval(confidence_level=0.95)
    result = trimmed_mean_interval(x)
    point, se, h = _trimmed_by_definition(x)
    assert result.point == pytest.approx(point)
    assert result.se == pytest.approx(se)
    assert ref.df == pytest.approx(h - 1)
    assert (result.low, result.high) == pytest.approx((ref_ci.low, ref_ci.high))
    assert result.n == n


@quiet
@pytest.mark.parametrize(("n_a", "n_b", "seed"), [(5, 5, 0), (6, 9, 1), (10, 7, 2)])
def test_yuen_matches_scipy_ttest_ind_trim(n_a: int, n_b: int, seed: int) -> None:
    """yuen(a, b) = scipy.stats.ttest_ind(b, a, equal_var=False, trim=0.2): statistic,
    p-value, df and confidence interval."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0.5, 0.05, n_a), rng.normal(0.55, 0.1, n_b)
    b[-1] = 0.05
    ref = stats.ttest_ind(b, a, equal_var=False, trim=0.2)
    ci = ref.confidence_interval(confidence_level=0.9)
    result = yuen(a, b, ci=0.9)
    assert result.estimate / result.se == pytest.approx(ref.statistic)
    assert result.p_value == pytest.approx(ref.pvalue)
    assert result.df == pytest.approx(ref.df)
    assert (result.low, result.high) == pytest.approx((ci.low, ci.high))
    assert result.method == "yuen" and result.n == n_a + n_b


@quiet
def test_trimmed_interval_hand_checked() -> None:
    """[1, 2, 3, 4, 100]: g = 1, trimmed mean 3, winsorized [2, 2, 3, 4, 4] has variance 1,
    SE sqrt(4 * 1 / (3 * 2)), t(0.975, 2) = 4.3027."""
    result = trimmed_mean_interval([1.0, 2.0, 3.0, 4.0, 100.0])
    se = math.sqrt(4 / 6)
    assert result.point == 3.0
    assert result.se == pytest.approx(se)
    assert result.high - result.point == pytest.approx(4.30265273 * se)


def test_below_five_runs_trimming_removes_nothing_and_says_so() -> None:
    """Four runs: trim=0.2 cuts floor(0.8) = 0 runs, so the interval is mean_interval's,
    with a 'no-trimming' StatsWarning besides the few-runs one."""
    x = [0.61, 0.58, 0.66, 0.12]
    with pytest.warns(StatsWarning) as record:
        result = trimmed_mean_interval(x)
        plain = lstats.mean_interval(x)
    kinds = {w.message.kind for w in record}
    assert {"no-trimming", "few-runs"} <= kinds
    assert (result.point, result.low, result.high) == pytest.approx(
        (plain.point, plain.low, plain.high))


@pytest.mark.parametrize("trim", [-0.1, 0.5, 0.7, True, "0.2"])
def test_trim_must_be_a_share_below_half(trim: object) -> None:
    with pytest.raises(ValueError, match="trim="):
        trimmed_mean_interval([0.1, 0.2, 0.3, 0.4, 0.5], trim=trim)


@quiet
def test_trimming_that_leaves_one_run_is_rejected() -> None:
    """trim=0.4 of 3 runs keeps 1: no SE; ValueError, not a zero-width interval."""
    with pytest.raises(ValueError, match="leaves 1"):
        trimmed_mean_interval([0.1, 0.2, 0.3], trim=0.4)
    with pytest.raises(ValueError, match="2 runs per group"):
        yuen([0.1], [0.2, 0.3])


@quiet
def test_trimmed_interval_bounds_and_one_run() -> None:
    """bounds cut the interval to (lo, hi) and reject values outside; one run gives (lo, hi)."""
    x = [0.99, 1.0, 0.97, 1.0, 0.92, 1.0]
    assert trimmed_mean_interval(x, bounds=(0.0, 1.0)).high == 1.0
    assert trimmed_mean_interval(x).high > 1.0
    one = trimmed_mean_interval([0.8], bounds=(0.0, 1.0))
    assert (one.low, one.high) == (0.0, 1.0)
    with pytest.raises(ValueError, match="outside bounds"):
        trimmed_mean_interval([0.5, 1.5, 0.7], bounds=(0.0, 1.0))


def test_robust_functions_are_exported() -> None:
    assert lstats.trimmed_mean_interval is trimmed_mean_interval and lstats.yuen is yuen


# --- the outlier-seed check ---------------------------------------------------------


def _grubbs_rejects(x: np.ndarray, alpha: float) -> bool:
    """Grubbs (1950) two-sided test with the usual t-based critical value."""
    n = x.size
    g = np.max(np.abs(x - x.mean())) / x.std(ddof=1)
    t = stats.t.ppf(1 - alpha / (2 * n), n - 2)
    return bool(g > (n - 1) / math.sqrt(n) * math.sqrt(t * t / (n - 2 + t * t)))


@pytest.mark.parametrize("n", [3, 4, 5, 7, 10])
def test_outlying_run_is_grubbs_test_and_leave_one_out_distance(n: int) -> None:
    """On 300 random data sets with a planted outlier of random size, the check fires exactly
    when Grubbs' test rejects at alpha = 0.01, and its distance is the brute-force
    |x_i - mean of the others| / sd of the others for the run it names."""
    rng = np.random.default_rng(n)
    for _ in range(300):
        x = rng.normal(0, 1, n)
        x[rng.integers(n)] += rng.exponential(8)
        index, distance, _ = outlying_run(x)
        assert (index >= 0) == _grubbs_rejects(x, OUTLIER_ALPHA)
        if index >= 0:
            others = np.delete(x, index)
            assert distance == pytest.approx(abs(x[index] - others.mean()) / others.std(ddof=1))


def test_false_alarms_are_rare_and_a_collapsed_run_is_found() -> None:
    """Seeded rates over 4000 experiments: on normal seeds the check fires in 0.5-1.6% at
    3, 5 and 10 runs; a run 10 SDs off is found in over 30% at 5 runs, over 95% at 10."""
    rng = np.random.default_rng(99)
    for n in (3, 5, 10):
        x = rng.normal(0, 1, (4000, n))
        fired = np.mean([outlying_run(row)[0] >= 0 for row in x])
        assert 0.005 <= fired <= 0.016, (n, fired)
    for n, floor in ((5, 0.3), (10, 0.95)):
        x = rng.normal(0, 1, (1000, n))
        x[:, 0] = -10.0
        found = np.mean([outlying_run(row)[0] == 0 for row in x])
        assert found > floor, (n, found)


def test_collapsed_run_warns_from_mean_interval_welch_and_paired_t() -> None:
    """One run at 0.1 among runs near 0.7: 'outlier-seed' warnings that name the run, its
    value, its distance, and the robust call to use."""
    healthy = [0.71, 0.69, 0.70, 0.72, 0.68]
    collapsed = [0.71, 0.69, 0.10, 0.72, 0.68]
    with pytest.warns(StatsWarning) as record:
        lstats.mean_interval(collapsed)
    (warning,) = [w.message for w in record if w.message.kind == "outlier-seed"]
    text = str(warning)
    assert "run 2 of values (value 0.1)" in text and "standard deviations" in text
    assert "stats.trimmed_mean_interval(values)" in text and warning.n_runs == 5
    with pytest.warns(StatsWarning, match=r"run 2 of b .*stats\.yuen\(a, b\)"):
        lstats.welch(healthy, collapsed)
    with pytest.warns(StatsWarning, match=r"b - a.*trimmed_mean_interval\(b - a\)"):
        lstats.paired_t(healthy, collapsed)


def test_identical_other_runs_make_any_gap_an_outlier() -> None:
    """A coarse metric: four runs at 0.9 and one at 0.1. The others have no spread, so the
    message says the whole spread comes from the one run."""
    with pytest.warns(StatsWarning, match="which are all equal"):
        lstats.mean_interval([0.9, 0.9, 0.9, 0.9, 0.1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        lstats.mean_interval([0.9, 0.9, 0.9, 0.9, 0.9])


def test_ties_of_two_or_three_runs_are_not_outliers() -> None:
    """Coarse metrics tie: [0.7, 0.7, 0.66] or [0.7, 0.7, 0.7, 0.64] (the others of the odd
    run have no spread) stay silent; only 4 or more equal others make a gap infinite."""
    assert outlying_run(np.array([0.7, 0.7, 0.66]))[0] == -1
    assert outlying_run(np.array([0.7, 0.7, 0.7, 0.64]))[0] == -1
    index, distance, _ = outlying_run(np.array([0.7, 0.7, 0.7, 0.7, 0.64]))
    assert (index, distance) == (4, math.inf)


def test_three_runs_warn_that_nothing_can_discount_the_outlier() -> None:
    """Three runs, two identical-ish and one far: the advice says trimming needs 5 runs."""
    with pytest.warns(StatsWarning) as record:
        lstats.mean_interval([0.70, 0.7001, 0.1])
    texts = [str(w.message) for w in record if w.message.kind == "outlier-seed"]
    assert texts and "trims nothing below 5 runs" in texts[0]


@quiet
def test_trimmed_interval_coverage_with_a_collapsed_run() -> None:
    """Seeded coverage check: 2000 experiments of 6 normal runs with one collapsed 10 SDs
    below. The trimmed interval covers the healthy mean in at least 93% and is less than
    half as wide as the t interval, which the collapsed run inflates."""
    rng = np.random.default_rng(5)
    hits, widths, t_widths = 0, [], []
    for _ in range(2000):
        x = rng.normal(0, 1, 6)
        x[0] = -10.0
        robust, plain = trimmed_mean_interval(x), lstats.mean_interval(x)
        hits += robust.low <= 0 <= robust.high
        widths.append(robust.high - robust.low)
        t_widths.append(plain.high - plain.low)
    assert hits / 2000 >= 0.93
    assert np.median(widths) < 0.5 * np.median(t_widths)
