"""The slow-step alarm: while a trial trains, say which phase of which rank got slower,
and from which step ("data +15 ms/step on rank 1 from step 300").

It reads the per-step phase times every rank journals (`labcoat.torch.time_phases`,
stored as points ``phase_s/<phase>/rank<r>``) and runs `stats.slow_steps` on them: per
rank and phase against the rank's own history and against the other ranks. A rank that
waits at the all-reduce for a slow peer is marked as waiting for it, never named as the
cause; a slowdown its own wait for a CPU explains (``cpu_wait``: other processes held the
cores) is marked as the machine's. Each alarm is one alert row (rule ``phase.slow``; a
wait's or a busy machine's at level info), shown
live, by `labcoat status`, the report and the dashboard; goodput counts the time the
slowdowns cost (`runner`'s "slow steps" line). Trials that time no phases: inert.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from labcoat import stats, store
from labcoat.journal import CPU_WAIT, PHASE_POINTS, WAIT_PHASES, Events
from labcoat.store import Attempt, Experiment, Trial

RULE = Events.PHASE_SLOW  # the alert's rule
CHECK_SECONDS = 5.0  # a timed trial is judged at most this often (and at its exit)
ALERT_SEQ = -1000  # alert keys: ALERT_SEQ - k for an attempt's k-th slow-step alarm
TOTALS = ("total", "other")  # the step's wall time and its untimed rest: not judged


def phase_times(session: Session, trial_ids: Sequence[int]
                ) -> dict[int, dict[int, dict[str, dict[int, float]]]]:
    """Stored phase times: trial id -> rank -> phase -> step -> seconds."""
    return {trial_id: {rank: {phase: dict(zip(steps.tolist(), seconds.tolist(), strict=True))
                              for phase, (steps, seconds) in per.items()}
                       for rank, per in ranks.items()}
            for trial_id, ranks in phase_arrays(session, trial_ids).items()}


def phase_arrays(session: Session, trial_ids: Sequence[int]
                 ) -> dict[int, dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]]:
    """Stored phase times as arrays: trial id -> rank -> phase -> (steps, seconds), steps
    increasing (no dict per series: a report may read a million points)."""
    out: dict[int, dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]] = {}
    for name in store.metric_names(session, list(trial_ids)):
        parsed = parse_point_name(name)
        if parsed is None:
            continue
        phase, rank = parsed
        for trial_id, (steps, values) in store.metric_series(session, trial_ids, name).items():
            out.setdefault(trial_id, {}).setdefault(rank, {})[phase] = (
                np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=float))
    return out


def parse_point_name(name: str) -> tuple[str, int] | None:
    """("data", 1) for ``phase_s/data/rank1``; None for any other metric."""
    if not name.startswith(PHASE_POINTS):
        return None
    phase, _, rank = name[len(PHASE_POINTS):].rpartition("/rank")
    return (phase, int(rank)) if phase and rank.isdigit() else None


def find_slow_steps(times: dict[int, dict[str, dict[int, float]]]) -> list[stats.SlowStep]:
    """The alarms of one trial's phase times (rank -> phase -> step -> seconds)."""
    return stats.slow_steps(times, waits=WAIT_PHASES, totals=TOTALS, busy=CPU_WAIT)


@dataclass
class _Watch:
    alerted: set[tuple[int, str, bool]] = field(default_factory=set)
    checked_at: float = 0.0


@dataclass
class SlowSteps:
    """Per-run state of the alarm (built by the runner loop, one per experiment)."""

    experiment: Experiment
    _watches: dict[int, _Watch] = field(default_factory=dict)  # attempt id -> watch

    @classmethod
    def for_experiment(cls, session: Session, experiment: Experiment) -> SlowSteps:
        return cls(experiment)

    def check(self, session: Session, trial: Trial, attempt: Attempt, *,
              final: bool = False) -> tuple[list[dict[str, Any]], str | None]:
        """(new alerts, already in the alert table; no note)."""
        watch = self._watches.setdefault(attempt.id, _Watch())
        now = time.monotonic()
        if now - watch.checked_at < CHECK_SECONDS and not final:
            return [], None
        watch.checked_at = now
        times = phase_times(session, [trial.id]).get(trial.id)
        if not times:
            return [], None
        new = []
        for alarm in find_slow_steps(times):
            key = (alarm.rank, alarm.phase, alarm.cause)  # a busy spell, then a cause: both
            if key in watch.alerted:
                continue
            watch.alerted.add(key)
            new.append(alert_row(trial, attempt, alarm, ALERT_SEQ - len(watch.alerted)))
        if new:
            store.insert_alerts(session, new)
        return new, None


def alert_row(trial: Trial, attempt: Attempt, alarm: stats.SlowStep, seq: int
              ) -> dict[str, Any]:
    """The alert table's row for one alarm (its evidence is what goodput reads)."""
    return {
        "trial_id": trial.id, "attempt_id": attempt.id, "seq": seq, "step": alarm.step,
        "rule": RULE, "severity": "warning" if alarm.cause else "info",
        "message": alarm.message(),
        "evidence": {"phase": alarm.phase, "rank": alarm.rank, "step": alarm.step,
                     "detected": alarm.detected, "before_s": alarm.before,
                     "after_s": alarm.after, "delta_s": alarm.delta,
                     "against": alarm.against, "wait": alarm.wait,
                     "waits_for": alarm.waits_for, "busy_s": alarm.busy},
        "time": time.time(),
    }
