"""Issue 30: score tables a user gets wrong end in one ValueError naming the table and the
fix (numpy's "inhomogeneous shape" said neither)."""

from __future__ import annotations

import numpy as np
import pytest

from labcoat import stats


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ([[0.1, 0.2, 0.3], [0.4, 0.5]], r"scores\['a'\] has runs with different numbers of "
         r"scores \(3, 2\): each run needs one score per task, in the same task order; "
         r"complete or drop the short runs"),
        ([np.ones(2), np.ones(3)], r"different numbers of scores \(2, 3\)"),
        ([[0.1, 0.2], 0.3], r"different numbers of scores \(2, 1 \(a number\)\)"),
        ([["x", "y"], ["z", "w"]], r"scores\['a'\] is not a table of numbers \(could not "
         r"convert string to float: 'x'\); pass a \(num_runs, num_tasks\) array of floats"),
        ([0.1, 0.2, 0.3], r"scores\['a'\] has shape \(3,\); pass a 2-D array"),
    ],
)
def test_interval_estimates_names_a_ragged_or_non_numeric_table(scores, message):
    with pytest.raises(ValueError, match=message):
        stats.interval_estimates({"a": scores}, reps=100)


def test_probability_of_improvement_names_a_ragged_table():
    with pytest.raises(ValueError, match=r"^y has runs with different numbers of scores"):
        stats.probability_of_improvement([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0]],
                                          reps=100)


def test_a_rectangular_list_of_lists_still_gives_the_arrays_interval():
    rows = [[0.1, 0.4], [0.3, 0.2], [0.5, 0.6], [0.2, 0.9], [0.7, 0.3]]
    from_lists = stats.interval_estimates({"a": rows}, reps=200)["a"]
    from_array = stats.interval_estimates({"a": np.array(rows)}, reps=200)["a"]
    assert from_lists == from_array
    from scipy.stats import trim_mean

    assert from_lists.point == pytest.approx(trim_mean(np.ravel(rows), 0.25))  # the IQM
