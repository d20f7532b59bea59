"""spread_of_means: the range of condition means, paired over items."""

import itertools

import numpy as np
import pytest

from labcoat import stats


def test_worked_example():
    scores = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [1, 1, 1]]  # column means 0.75, 0.25, 0.75
    s = stats.spread_of_means(scores, reps=200)
    assert s.estimate == pytest.approx(0.5)
    assert s.means.tolist() == pytest.approx([0.75, 0.25, 0.75])
    assert s.worst == 1 and s.best in (0, 2)
    assert s.n == 4


def test_two_conditions_match_the_exact_sign_flip_test():
    # With 2 conditions, shuffling labels within an item flips the sign of its difference;
    # the exact p-value enumerates all 2^n sign patterns (brute force, independent).
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.normal(0, 1, 10), rng.normal(0.5, 1, 10)])
    d = x[:, 1] - x[:, 0]
    observed = abs(d.mean())
    flips = np.array(list(itertools.product([-1, 1], repeat=d.size)))
    exact = np.mean(np.abs((flips * d).mean(axis=1)) >= observed - 1e-12)
    s = stats.spread_of_means(x, reps=20_000, seed=1)
    assert s.p_value == pytest.approx(exact, abs=0.01)


def test_no_template_effect_is_rejected_at_about_alpha():
    # 4 templates with the same accuracy per item (item difficulty varies): p < 0.05 in
    # about 5% of data sets, whatever the (upward-biased) range says.
    rng = np.random.default_rng(7)
    rejections = 0
    datasets = 120
    for _ in range(datasets):
        p_item = rng.uniform(0.2, 0.9, size=(50, 1))
        x = (rng.random((50, 4)) < p_item).astype(float)
        rejections += stats.spread_of_means(x, reps=199, seed=rng).p_value < 0.05
    assert rejections / datasets < 0.11


def test_a_real_template_effect_is_found_and_its_interval_covers_it():
    rng = np.random.default_rng(11)
    x = np.column_stack([rng.random(400) < 0.8, rng.random(400) < 0.4]).astype(float)
    s = stats.spread_of_means(x, reps=1000, seed=0)
    assert s.p_value < 0.01
    assert s.low < 0.4 < s.high


def test_same_seed_same_answer_and_bad_input():
    x = np.random.default_rng(0).random((30, 3))
    a, b = stats.spread_of_means(x, seed=5), stats.spread_of_means(x, seed=5)
    assert (a.low, a.high, a.p_value) == (b.low, b.high, b.p_value)
    with pytest.raises(ValueError, match="2 or more conditions"):
        stats.spread_of_means(np.ones((5, 1)))
    with pytest.raises(ValueError, match="NaN"):
        stats.spread_of_means([[1.0, float("nan")], [0.0, 1.0]])
