"""Goodput and work lost, computed from attempts laid out by hand."""

from datetime import UTC, datetime, timedelta

import pytest

from labcoat.runner import trial_goodput
from labcoat.store import Attempt, Event, Trial

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _attempt(number, start, end, cause, *, first_step, last_record, last_step, restored,
             queued=0.0):
    return Attempt(number=number, started_at=T0 + timedelta(seconds=start),
                   ended_at=T0 + timedelta(seconds=end), cause=cause,
                   first_step_time=T0.timestamp() + first_step,
                   last_record_time=T0.timestamp() + last_record, last_step=last_step,
                   restored_step=restored, queued_s=queued)


def test_a_crash_and_restart_split_into_their_losses():
    # attempt 1: starts at 0, first step at 5 s, steps 1..100 by 105 s (1 s/step), then
    # hangs until the runner kills it at 125 s. Attempt 2 starts at 127 s, resumes from
    # step 80, first step at 131 s, finishes step 200 at 251 s.
    trial = Trial(key="t", arm="a", attempts=[
        _attempt(1, 0, 125, "hang: no journal line for 20 s", first_step=5, last_record=105,
                 last_step=100, restored=0, queued=3.0),
        _attempt(2, 127, 252, "exit 0", first_step=131, last_record=251, last_step=200,
                 restored=80),
    ])
    saves = [Event(kind="checkpoint.saved", data={"stall_s": 0.5}) for _ in range(4)]
    g = trial_goodput(trial, saves)
    assert g.wall_s == pytest.approx(125 + 2 + 125)
    assert g.lost == pytest.approx({
        "checkpoint_saves": 2.0,
        "startup": 5,  # attempt 1 restored nothing: process start and imports
        "startup_restore": 4,  # attempt 2 resumed from step 80
        "redone_work": 20 * 1.0,  # steps 81..100 again, at attempt 1's 1 s/step
        "failure_detection": 20.0,  # last line at 105 s, killed at 125 s
        "restart_delays": 2.0,
        "slow_steps": 0.0,  # no slow-step alarm
    })
    assert g.redone_steps == 20 and g.queued_s == 3.0
    assert g.ratio == pytest.approx((252 - 2 - 9 - 20 - 20 - 2) / 252)


def test_a_user_stop_is_not_counted_as_lost_time():
    trial = Trial(key="t", arm="a", attempts=[
        _attempt(1, 0, 50, "interrupted (labcoat run was stopped)", first_step=2,
                 last_record=50, last_step=48, restored=0),
        # resumed the next day: the gap is nobody's loss, and so is the redone work
        _attempt(2, 86_400, 86_460, "exit 0", first_step=86_402, last_record=86_460,
                 last_step=100, restored=40),
    ])
    g = trial_goodput(trial, [])
    assert g.wall_s == pytest.approx(110)
    assert g.lost["restart_delays"] == 0 and g.lost["redone_work"] == 0
    assert g.lost["startup"] == pytest.approx(2) and g.lost["startup_restore"] == 2
