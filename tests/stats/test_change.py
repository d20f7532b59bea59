"""The slow-step detector (stats._change) against brute force and planted changes.

The Bernoulli CUSUM is checked against its definition unrolled (the maximum over every
start j of the summed log-likelihood ratios since j, O(n^2)); the detector against
series with a known change point drawn from heavy-tailed noise like a busy machine's.
"""

import math

import numpy as np
import pytest

from labcoat.stats import SlowStepRule, bernoulli_cusum, busy_rise, detect_shift, slow_steps


def _brute_cusum(exceeded, p0, p1):
    llr = [math.log(p1 / p0) if e else math.log((1 - p1) / (1 - p0)) for e in exceeded]
    s, start = [], []
    for t in range(len(llr)):
        sums = [sum(llr[j:t + 1]) for j in range(t + 1)]
        best = max(sums)
        if best <= 0:
            s.append(0.0)
            start.append(t + 1)
        else:
            s.append(best)
            # the run the recursion sums starts after its last reset: the latest argmax
            # among maximal sums equals it when the maximum is positive
            start.append(max(j for j in range(t + 1) if math.isclose(sums[j], best)))
    return np.array(s), np.array(start)


@pytest.mark.parametrize("seed", range(5))
def test_bernoulli_cusum_equals_its_unrolled_definition(seed):
    rng = np.random.default_rng(seed)
    exceeded = rng.random(120) < rng.uniform(0.05, 0.6)
    s, start = bernoulli_cusum(exceeded, 0.1, 0.5)
    s_ref, start_ref = _brute_cusum(exceeded.tolist(), 0.1, 0.5)
    np.testing.assert_allclose(s, s_ref, atol=1e-9)
    positive = s > 0
    # where S > 0 the run's start is the (unique, for generic sums) maximizing j
    assert (start[~positive] == start_ref[~positive]).all()
    for t in np.flatnonzero(positive):
        llr = np.where(exceeded, math.log(5), math.log(0.5 / 0.9))
        assert math.isclose(llr[start[t]:t + 1].sum(), s[t], abs_tol=1e-9)


def _busy_machine(n, rng, median=0.5e-3):
    """Phase durations on a shared machine: lognormal around `median`, one step in ten hit
    by a 4-20 ms time slice."""
    x = median * rng.lognormal(0.0, 0.15, n)
    hit = rng.random(n) < 0.1
    return x + hit * rng.uniform(4e-3, 20e-3, n)


def test_a_planted_15_ms_slowdown_is_found_at_its_step_within_20_steps():
    rng = np.random.default_rng(0)
    for trial in range(20):
        x = _busy_machine(400, rng)
        x[300:] += 15e-3
        shift = detect_shift(x, step_time=8e-3)
        assert shift is not None, trial
        # the change point: a spike just before the change may open the run (a step or few)
        assert 290 <= shift.start <= 302 and shift.detected < 320, (trial, shift)
        assert shift.delta == pytest.approx(15e-3, abs=3e-3)


def test_heavy_tailed_noise_alone_never_alarms():
    rng = np.random.default_rng(1)
    alarms = [detect_shift(_busy_machine(3000, rng), step_time=8e-3) for _ in range(20)]
    assert alarms == [None] * 20  # 60,000 noisy steps


def test_spikes_that_leave_the_median_in_place_are_not_a_slow_step():
    rng = np.random.default_rng(2)
    x = _busy_machine(600, rng)
    x[200:212:2] += 12e-3  # a neighbour's burst: every other step hit, for a while
    x[300:500:3] += 12e-3  # every third step hit for 200 steps: the CUSUM climbs, the
    assert detect_shift(x, step_time=8e-3) is None  # median does not move: no alarm
    x[300:500] += 12e-3  # every step: a slow step
    assert detect_shift(x, step_time=8e-3) is not None


def test_two_ranks_the_slow_ranks_compute_is_named_and_the_others_wait_explained():
    rng = np.random.default_rng(3)
    n = 400
    times = {r: {p: dict(enumerate(_busy_machine(n, rng), 1)) for p in
                 ("data", "forward", "backward", "optimizer", "comm")} for r in (0, 1)}
    for s in range(300, n + 1):
        times[1]["forward"][s] += 15e-3
        times[0]["comm"][s] += 15e-3  # rank 0 waits at the all-reduce for rank 1
    alarms = slow_steps(times)
    causes = [a for a in alarms if a.waits_for is None]
    assert [(a.phase, a.rank) for a in causes] == [("forward", 1)]
    assert 295 <= causes[0].step <= 302
    waits = [a for a in alarms if a.waits_for is not None]
    assert [(a.phase, a.rank, a.waits_for) for a in waits] == [("comm", 0, 1)]
    assert "forward +1" in causes[0].message() and "on rank 1 from step" in causes[0].message()


def test_a_slowdown_the_wait_for_a_cpu_explains_is_the_machines_not_a_cause():
    """Other processes take the cores from step 200: forward and backward get 6 ms slower
    for real, and the thread's run-queue wait rises by their sum; a data loader that gets
    slower at the same time (a sleep: no wait for a CPU in it) stays a cause."""
    rng = np.random.default_rng(4)
    n = 400
    times = {0: {p: dict(enumerate(_busy_machine(n, rng), 1))
                 for p in ("data", "forward", "backward", "optimizer")}}
    times[0]["cpu_wait"] = dict(enumerate(rng.uniform(0, 0.2e-3, n), 1))
    for s in range(200, n + 1):
        times[0]["forward"][s] += 6e-3
        times[0]["backward"][s] += 6e-3
        times[0]["cpu_wait"][s] += 12e-3
        times[0]["data"][s] += 15e-3 if s >= 300 else 0.0
    alarms = slow_steps(times, busy="cpu_wait")
    assert [(a.phase, a.step) for a in alarms if a.cause] == [("data", 300)]
    busy = [a for a in alarms if not a.cause]  # forward's baseline may be too noisy to judge
    assert busy and {a.phase for a in busy} <= {"forward", "backward"}
    assert all(a.busy == pytest.approx(12e-3, abs=1e-3) for a in busy)
    assert "the machine was busy (this rank waited +12" in busy[0].message()
    assert "cpu_wait" not in {a.phase for a in alarms}  # not judged itself
    # without the wait recorded, the same slowdowns are causes
    del times[0]["cpu_wait"]
    assert all(a.cause for a in slow_steps(times, busy="cpu_wait"))


def test_a_busy_spell_does_not_hide_a_later_slowdown_of_the_same_phase():
    """Steps 100-180: the machine is busy (data +8 ms, the wait for a CPU +9 ms); from step
    300 the loader sleeps 15 ms. The alarm names the sleep, the run's cause."""
    rng = np.random.default_rng(5)
    n = 400
    times = {0: {"data": dict(enumerate(_busy_machine(n, rng), 1)),
                 "cpu_wait": dict(enumerate(rng.uniform(0, 0.2e-3, n), 1))}}
    for s in range(100, 181):
        times[0]["data"][s] += 8e-3
        times[0]["cpu_wait"][s] += 9e-3
    for s in range(300, n + 1):
        times[0]["data"][s] += 15e-3
    (alarm,) = slow_steps(times, busy="cpu_wait")
    assert alarm.cause and 295 <= alarm.step <= 302 and alarm.detected < 320, alarm
    # the busy spell alone: reported, as the machine's
    for s in range(300, n + 1):
        times[0]["data"][s] -= 15e-3
    (alarm,) = slow_steps(times, busy="cpu_wait")
    assert not alarm.cause and 95 <= alarm.step <= 102, alarm


def test_busy_rise_needs_half_the_slowdown():
    from labcoat.stats import Shift

    waited = np.r_[np.full(100, 1e-4), np.full(20, 1e-4 + 2.4e-3)]
    shift = Shift(start=100, detected=119, before=1e-3, after=6e-3)  # +5 ms
    assert busy_rise(waited, shift) is None  # 2.4 ms of 5: under half, the run's
    assert busy_rise(waited, shift, SlowStepRule(busy_share=0.4)) == pytest.approx(2.4e-3)
    waited[100:] += 0.2e-3  # 2.6 ms of 5: the machine's
    assert busy_rise(waited, shift) == pytest.approx(2.6e-3)
    assert busy_rise(np.full(120, np.nan), shift) is None  # not measured


def test_rule_checks_its_settings():
    with pytest.raises(ValueError, match="p1"):
        SlowStepRule(p1=0.05)
    with pytest.raises(ValueError, match="quantile"):
        SlowStepRule(quantile=0.2)
