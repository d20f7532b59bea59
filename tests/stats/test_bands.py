"""prediction_band: a new run from the reference process leaves the band at the stated rate."""

import math

import numpy as np
import pytest

from labcoat import stats


def test_worked_example_two_runs():
    # Two runs 0 and 2: mean 1, sd sqrt(2); t(0.975, df=1) = 12.7062 (t table);
    # half width = 12.7062 * sqrt(2) * sqrt(1 + 1/2).
    band = stats.prediction_band([[0.0], [2.0]], ci=0.95)
    half = 12.7062 * math.sqrt(2) * math.sqrt(1.5)
    assert band.mean[0] == pytest.approx(1.0)
    assert band.low[0] == pytest.approx(1 - half, rel=1e-4)
    assert band.high[0] == pytest.approx(1 + half, rel=1e-4)


def test_a_new_run_leaves_the_band_at_rate_one_minus_ci():
    # Simulation, independent of the formula: K reference runs and one new run, all
    # from the same normal; the new run falls outside in 10% of repetitions.
    rng = np.random.default_rng(0)
    reps, k = 20_000, 5
    x = rng.normal(3.0, 2.0, size=(reps, k + 1))
    band = stats.prediction_band(x[:, :k].T, ci=0.90)  # each repetition is one "step"
    outside = np.mean((x[:, k] < band.low) | (x[:, k] > band.high))
    assert outside == pytest.approx(0.10, abs=0.008)


def test_looks_split_the_false_alarm_rate():
    # 8 independent looks at 90% overall: the chance that a new run leaves the band at
    # any look is at most 10% (Bonferroni; about 1 - (1 - 0.1/8)^8 = 9.6% here).
    rng = np.random.default_rng(1)
    reps, k, looks = 4000, 6, 8
    alarms = 0
    for _ in range(reps):
        x = rng.normal(size=(k + 1, looks))
        band = stats.prediction_band(x[:k], ci=0.90, looks=looks)
        alarms += bool(np.any((x[k] < band.low) | (x[k] > band.high)))
    assert 0.07 < alarms / reps <= 0.11


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="at least 2 reference runs"):
        stats.prediction_band([[1.0, 2.0]])
    with pytest.raises(ValueError, match="NaN"):
        stats.prediction_band([[1.0], [float("nan")]])
    with pytest.raises(ValueError, match="looks"):
        stats.prediction_band([[1.0], [2.0]], looks=0)
