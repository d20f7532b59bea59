"""stats.ratio_of_means: the ratio estimate, its item bootstrap against scipy's, and the
two-way (seeds x items) bootstrap against a brute-force loop over drawn rows and columns."""

import numpy as np
import pytest
from scipy import stats as sps

from labcoat import stats


def test_one_seed_matches_scipy_bootstrap_percentile_interval():
    rng = np.random.default_rng(1)
    den = rng.normal(1.0, 0.5, 400)
    num = 0.6 * den + rng.normal(0, 0.3, 400)
    got = stats.ratio_of_means(num, den, reps=20_000, seed=0)
    assert got.estimate == pytest.approx(num.mean() / den.mean(), rel=1e-12)
    ref = sps.bootstrap((num, den), lambda a, b: a.mean() / b.mean(), paired=True,
                        vectorized=False, n_resamples=20_000, method="percentile",
                        random_state=np.random.default_rng(5))
    # two Monte Carlo draws of the same percentile interval
    assert got.low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert got.high == pytest.approx(ref.confidence_interval.high, abs=0.01)
    assert got.se == pytest.approx(ref.standard_error, rel=0.05)
    assert got.method == "item bootstrap" and got.p_value < 0.001


def test_two_way_matches_a_brute_force_loop_and_widens_with_a_seed_effect():
    rng = np.random.default_rng(2)
    seeds, items = 4, 60
    x = rng.normal(0, 1, (seeds, items)) + rng.normal(0, 1, (seeds, 1)) + 0.3
    got = stats.ratio_of_means(x, reps=4000, seed=0)
    reps = []
    draw = np.random.default_rng(9)
    for _ in range(4000):  # the pigeonhole bootstrap written out: rows, then columns
        rows = draw.integers(0, seeds, seeds)
        cols = draw.integers(0, items, items)
        reps.append(x[np.ix_(rows, cols)].mean())
    assert got.se == pytest.approx(np.std(reps, ddof=1), rel=0.08)
    items_only = stats.ratio_of_means(x.mean(axis=0), reps=4000, seed=0)
    assert got.se > 2 * items_only.se  # the seed effect is counted
    assert got.method.startswith("two-way")


def test_same_seed_same_interval_and_bad_input_raises():
    x = np.arange(20.0)
    assert stats.ratio_of_means(x, seed=3) == stats.ratio_of_means(x, seed=3)
    with pytest.raises(ValueError, match="shape"):
        stats.ratio_of_means(np.ones(5), np.ones(6))
    with pytest.raises(ValueError, match="undefined"):
        stats.ratio_of_means(np.ones(5), np.zeros(5))
    with pytest.raises(ValueError, match="non-finite"):
        stats.ratio_of_means([1.0, np.nan, 2.0])
