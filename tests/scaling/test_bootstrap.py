"""The residual bootstrap's pieces, on inputs small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import t as student_t

from labcoat import scaling
from labcoat.scaling._bootstrap import noise_pool, prediction_noise, stretch, stretch_bounds


def test_noise_pool_drops_the_p_residuals_nearest_zero_and_keeps_the_noise_variance() -> None:
    r = np.array([0.0, 0.0005, -0.01, 0.02, -0.03, 0.01, 0.04])
    pool = noise_pool(r, n_params=2, delta=1e-3)
    # The two near-zero residuals (the points a 2-parameter L1 fit passes through) are
    # gone; the rest, -0.01, 0.02, -0.03, 0.01, 0.04, are centred at their Huber location,
    # with delta far below their spread the median 0.01, and the median itself (now 0)
    # goes too: no atom at zero, two residuals on each side.
    centred = np.array([-0.02, 0.01, -0.04, 0.03])
    # mean square = sum(r^2) / (n - p), the unbiased noise variance
    scale = np.sqrt(np.sum(r**2) / 5 / np.mean(centred**2))
    assert pool == pytest.approx(centred * scale, rel=1e-9)
    assert np.mean(pool**2) == pytest.approx(np.sum(r**2) / 5, rel=1e-12)


def test_noise_pool_large_delta_centres_at_the_mean_and_edge_cases() -> None:
    r = np.array([0.3, -0.1, 0.0, 0.05, -0.2, 0.4, -0.45])
    pool = noise_pool(r, n_params=3, delta=10.0)  # delta >> residuals: least squares
    assert pool.mean() == pytest.approx(0.0, abs=1e-12)
    assert np.mean(pool**2) == pytest.approx(np.sum(r**2) / 4, rel=1e-12)
    # a perfect fit has no noise to resample; one residual left gives both signs
    assert np.all(noise_pool(np.zeros(5), 3, 1e-3) == 0)
    one = noise_pool(np.array([0.0, 1e-4, 0.02]), 2, 1e-3)
    size = np.sqrt(0.02**2 + 1e-4**2)  # sqrt(sum r^2 / (n - p)), n - p = 1
    assert sorted(one) == pytest.approx([-size, size], rel=1e-12)


def test_prediction_noise_keeps_the_pool_variance_and_has_tails() -> None:
    pool = np.array([-0.02, -0.01, 0.01, 0.02])
    draws = prediction_noise(pool, 200_000, np.random.default_rng(0))
    assert np.mean(draws**2) == pytest.approx(np.mean(pool**2), rel=0.02)
    assert np.abs(draws).max() > 0.03  # beyond the largest residual: smoothed


def test_stretch_is_t_over_z_and_moves_bounds_away_from_the_point() -> None:
    assert stretch(0.95, None) == 1.0
    assert stretch(0.95, 5) == pytest.approx(student_t.ppf(0.975, 5) / 1.959963985, rel=1e-9)
    assert stretch(0.95, 10_000) == pytest.approx(1.0, abs=1e-3)
    low, high = stretch_bounds(1.0, 0.5, 2.0, 2.0)
    assert (low, high) == (0.0, 3.0)  # asymmetry kept: 0.5 below -> 1.0, 1.0 above -> 2.0


def test_interval_method_is_recorded_and_pairs_is_selectable() -> None:
    N = np.geomspace(1e6, 1e9, 10)
    loss = (1.5 + 300 * N**-0.3) * np.exp(np.random.default_rng(0).normal(0, 0.01, N.size))
    new = scaling.fit(N=N, loss=loss, bootstrap=200, seed=0)
    old = scaling.fit(N=N, loss=loss, bootstrap=200, seed=0, interval_method="pairs")
    assert new.interval_method == "residual" and old.interval_method == "pairs"
    assert new.to_dict()["interval_method"] == "residual"
    assert new.params == old.params
    assert new.intervals["alpha"] != old.intervals["alpha"]
