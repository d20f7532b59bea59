"""LiveMonitor / check_curve: a larger run's curve against the band of smaller runs' fit."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from labcoat import scaling

TOKENS_PER_STEP = 1e6
BIG_N = 1e9
STEPS = np.arange(500, 40_001, 500)


@pytest.fixture(scope="module")
def small_runs_fit(law: Callable, epoch: dict) -> scaling.ScalingFit:
    """A chinchilla fit on the checkpoints of six small runs (D = tokens seen)."""
    rng = np.random.default_rng(0)
    sizes = np.geomspace(1e7, 3e8, 6)
    N = np.repeat(sizes, 8)
    D = np.concatenate([np.geomspace(2 * n, 60 * n, 8) for n in sizes])
    loss = law(N, D, epoch) * np.exp(rng.normal(0, 0.005, N.size))
    return scaling.fit(N=N, D=D, loss=loss, bootstrap=300, seed=0,
                       groups=np.repeat(np.arange(6), 8))


def _curve(law: Callable, epoch: dict, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return law(BIG_N, STEPS * TOKENS_PER_STEP, epoch) * np.exp(rng.normal(0, 0.002, STEPS.size))


def test_a_curve_on_the_law_stays_inside(small_runs_fit: scaling.ScalingFit, law: Callable,
                                         epoch: dict) -> None:
    check = scaling.check_curve(small_runs_fit, STEPS, _curve(law, epoch), N=BIG_N,
                                tokens_per_step=TOKENS_PER_STEP)
    assert not check.left_band and check.departure is None
    states = {p.state for p in check.points}
    assert states <= {"inside", "unmonitored"} and "inside" in states
    # steps before the fit's smallest D (2e7 tokens = step 20) are not monitored; all are after
    assert check.points[0].tokens == 500 * TOKENS_PER_STEP


def test_departure_is_reported_at_the_first_point_of_the_streak(
        small_runs_fit: scaling.ScalingFit, law: Callable, epoch: dict) -> None:
    loss = _curve(law, epoch)
    bend = int(np.searchsorted(STEPS, 20_000))
    loss[bend:] *= 1.06  # from step 20,000 the run is 6% worse than its siblings predict
    check = scaling.check_curve(small_runs_fit, STEPS, loss, N=BIG_N,
                                tokens_per_step=TOKENS_PER_STEP, patience=3)
    dep = check.departure
    assert dep is not None and dep.direction == "above"
    assert dep.step == 20_000 and dep.confirmed_step == 21_000
    assert dep.loss > dep.high


def test_one_noisy_point_does_not_alarm(small_runs_fit: scaling.ScalingFit, law: Callable,
                                        epoch: dict) -> None:
    loss = _curve(law, epoch)
    loss[30] *= 1.3
    loss[50:52] *= 0.8  # two in a row, below: still short of patience=3
    monitor = scaling.LiveMonitor(small_runs_fit, N=BIG_N, tokens_per_step=TOKENS_PER_STEP,
                                  patience=3)
    states = [monitor.update(int(s), float(v)).state for s, v in zip(STEPS, loss, strict=True)]
    assert states[30] == "above" and states[50] == states[51] == "below"
    assert not monitor.alarm


def test_better_than_predicted_is_below(small_runs_fit: scaling.ScalingFit, law: Callable,
                                        epoch: dict) -> None:
    loss = _curve(law, epoch) * 0.9
    monitor = scaling.LiveMonitor(small_runs_fit, N=BIG_N, tokens_per_step=TOKENS_PER_STEP,
                                  patience=2)
    monitor.extend(STEPS, loss)
    assert monitor.alarm and monitor.departure.direction == "below"
    assert monitor.departure.step == STEPS[0]


def test_callable_band_and_min_tokens() -> None:
    def band(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.full(steps.shape, 2.0), np.full(steps.shape, 1.9), np.full(steps.shape, 2.1)

    monitor = scaling.LiveMonitor(band, patience=2, tokens_per_step=10.0, min_tokens=25.0)
    points = monitor.extend([1, 2, 3, 4, 5], [3.0, 3.0, 2.0, 3.0, 3.0])
    assert [p.state for p in points] == ["unmonitored", "unmonitored", "inside", "above",
                                         "above"]
    assert monitor.departure.step == 4 and monitor.departure.confirmed_step == 5


def test_live_monitor_validation(small_runs_fit: scaling.ScalingFit) -> None:
    power = scaling.fit(N=np.geomspace(1e6, 1e9, 8), loss=1.5 + 300 * np.geomspace(
        1e6, 1e9, 8) ** -0.3, bootstrap=10)
    with pytest.raises(ValueError, match="needs a chinchilla fit"):
        scaling.LiveMonitor(power, N=1e9, tokens_per_step=1e6)
    with pytest.raises(ValueError, match="tokens_per_step=None"):
        scaling.LiveMonitor(small_runs_fit, N=1e9)
    with pytest.raises(ValueError, match="patience=0"):
        scaling.LiveMonitor(small_runs_fit, N=1e9, tokens_per_step=1e6, patience=0)
    with pytest.raises(ValueError, match="strictly increasing"):
        scaling.check_curve(small_runs_fit, [2, 1], [3.0, 3.0], N=1e9, tokens_per_step=1e6)
    with pytest.raises(ValueError, match="ScalingFit or a callable"):
        scaling.LiveMonitor(42)
