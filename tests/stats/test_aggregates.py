"""Runs x tasks point estimates against scipy and rliable's definitions (Agarwal et al. 2021).

rliable's `metrics.py` defines: IQM = scipy.stats.trim_mean(scores, 0.25, axis=None);
mean/median = mean/median of np.mean(scores, axis=0); optimality gap =
gamma - np.mean(np.minimum(scores, gamma)); probability of improvement = per task
mannwhitneyu(x, y, alternative="greater").statistic / (n_x n_y), averaged over tasks.
Those expressions are the references below.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from labcoat.stats._aggregates import (
    aggregate_iqm,
    aggregate_mean,
    aggregate_median,
    aggregate_optimality_gap,
    aggregate_probability_of_improvement,
    batch_median,
)

SHAPES = [(1, 1), (3, 1), (5, 4), (10, 26), (7, 3), (2, 9)]


def _scores(shape: tuple[int, int], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).gamma(2.0, 0.4, size=shape)


@pytest.mark.parametrize("shape", SHAPES)
def test_iqm_is_scipy_trim_mean_of_all_scores(shape: tuple[int, int]) -> None:
    """IQM pools runs and tasks, as rliable: trim_mean(flattened, 0.25), any size (incl. N % 4)."""
    x = _scores(shape)
    assert aggregate_iqm(x) == pytest.approx(stats.trim_mean(x, 0.25, axis=None), rel=1e-12)


def test_iqm_hand_checked_with_ties() -> None:
    """8 scores 0..7 (with a tie): cut 2 at each end, keep 2, 3, 3, 5 -> 3.25."""
    x = np.array([[0.0, 7.0], [3.0, 1.0], [3.0, 6.0], [5.0, 2.0]])
    assert aggregate_iqm(x) == 3.25
    assert stats.trim_mean(x, 0.25, axis=None) == 3.25


@pytest.mark.parametrize("shape", SHAPES)
def test_mean_and_median_are_over_per_task_means(shape: tuple[int, int]) -> None:
    """rliable: aggregate_mean = mean(mean over runs), aggregate_median = median of the same."""
    x = _scores(shape, seed=1)
    task_means = np.mean(x, axis=0)
    assert aggregate_mean(x) == pytest.approx(np.mean(task_means), rel=1e-12)
    assert aggregate_median(x) == pytest.approx(np.median(task_means), rel=1e-12)


def test_median_is_of_task_means_not_of_all_scores() -> None:
    """Task means 1, 2, 10 -> median 2; the median of all six scores would be 2.5."""
    x = np.array([[0.0, 1.0, 10.0], [2.0, 3.0, 10.0]])
    assert aggregate_median(x) == 2.0
    assert aggregate_mean(x) == pytest.approx(13 / 3)


@pytest.mark.parametrize("tasks", [1, 2, 5, 26, 27])
def test_batch_median_matches_numpy_median(tasks: int) -> None:
    """The sort-based median used on resamples equals np.median for odd and even lengths."""
    means = np.random.default_rng(tasks).normal(size=(50, 1, tasks))
    np.testing.assert_array_equal(batch_median(means), np.median(means[:, 0, :], axis=1))


@pytest.mark.parametrize("gamma", [1.0, 0.5, 2.0])
def test_optimality_gap_matches_rliable_formula(gamma: float) -> None:
    """gamma - mean(min(scores, gamma)) over all runs and tasks."""
    x = _scores((6, 5), seed=2)
    expected = gamma - np.mean(np.minimum(x, gamma))
    assert aggregate_optimality_gap(x, gamma=gamma) == pytest.approx(expected, rel=1e-12)


def test_optimality_gap_hand_checked() -> None:
    """Scores 0.2, 1.5 (counts as 1), 0.8, 1.0 under gamma 1: 1 - (0.2+1+0.8+1)/4 = 0.25."""
    x = np.array([[0.2, 1.5], [0.8, 1.0]])
    assert aggregate_optimality_gap(x) == pytest.approx(0.25)


def _rliable_probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """rliable.metrics.probability_of_improvement, verbatim in numpy/scipy."""
    per_task = []
    for task in range(x.shape[1]):
        if np.array_equal(x[:, task], y[:, task]):
            per_task.append(0.5)
        else:
            u, _ = stats.mannwhitneyu(x[:, task], y[:, task], alternative="greater")
            per_task.append(u / (x.shape[0] * y.shape[0]))
    return float(np.mean(per_task))


@pytest.mark.parametrize(("runs_x", "runs_y", "tasks"), [(5, 5, 4), (3, 7, 2), (10, 10, 26)])
def test_probability_of_improvement_matches_mann_whitney(
    runs_x: int, runs_y: int, tasks: int
) -> None:
    """Per-task U / (n m), averaged over tasks; continuous scores and rounded (tied) ones."""
    rng = np.random.default_rng(runs_x * 100 + runs_y)
    x, y = rng.normal(0.3, 1, (runs_x, tasks)), rng.normal(0, 1, (runs_y, tasks))
    assert aggregate_probability_of_improvement(x, y) == pytest.approx(
        _rliable_probability_of_improvement(x, y), rel=1e-12
    )
    xr, yr = np.round(x), np.round(y)  # many ties
    assert aggregate_probability_of_improvement(xr, yr) == pytest.approx(
        _rliable_probability_of_improvement(xr, yr), rel=1e-12
    )


def test_probability_of_improvement_hand_checked() -> None:
    """x = (1, 2), y = (2, 0): pairs 1>2 no, 1>0 yes, 2=2 half, 2>0 yes -> 2.5 / 4."""
    assert aggregate_probability_of_improvement([[1.0], [2.0]], [[2.0], [0.0]]) == 0.625
    same = np.array([[1.0, 3.0], [2.0, 4.0]])
    assert aggregate_probability_of_improvement(same, same) == 0.5


@pytest.mark.parametrize(
    "bad",
    [np.ones(5), np.ones((2, 2, 2)), np.ones((0, 3)), np.ones((3, 0)),
     np.array([[1.0, np.nan]]), np.array([[1.0, np.inf]])],
)
def test_invalid_scores_raise(bad: np.ndarray) -> None:
    """Wrong rank, empty axes, NaN or inf raise ValueError instead of returning a number."""
    for function in (aggregate_iqm, aggregate_mean, aggregate_median, aggregate_optimality_gap):
        with pytest.raises(ValueError):
            function(bad)


def test_one_dimensional_scores_error_says_how_to_fix() -> None:
    with pytest.raises(ValueError, match=r"x\[:, None\]"):
        aggregate_iqm([1.0, 2.0, 3.0])


def test_probability_of_improvement_needs_same_tasks() -> None:
    with pytest.raises(ValueError, match="same tasks"):
        aggregate_probability_of_improvement(np.ones((3, 2)), np.ones((3, 4)))


def test_optimality_gap_rejects_non_finite_gamma() -> None:
    with pytest.raises(ValueError, match="gamma"):
        aggregate_optimality_gap(np.ones((2, 2)), gamma=float("nan"))
