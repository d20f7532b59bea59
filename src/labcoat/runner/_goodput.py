"""Goodput: how much of a trial's wall-clock time went into training that counted.

Effective training time ratio = productive time / wall-clock time (the
measure Meta reports for Llama 3: over 90% despite 419 interruptions), with the
lost time broken down so the expensive part is visible:

- checkpoint_saves: training stalled by checkpoint saves (`stall_s` of each save);
- startup: from an attempt's start to its first logged step when it restored no
  checkpoint (process start, imports, building the model and data);
- startup_restore: the same for an attempt that resumed from a checkpoint (that,
  plus reading and loading the checkpoint);
- redone_work: steps computed again after a restart (last step reached minus the
  step resumed from), at the attempt's measured step time;
- failure_detection: from a failed attempt's last journal line to its end (e.g.
  the heartbeat timeout of a hang);
- restart_delays: from a failed attempt's end to the next attempt's start
  (backoff, and waiting for a free slot);
- slow_steps: steps made slower by a phase the slow-step alarm named (`phase.slow`
  alerts, labcoat.monitor): each alarm's added seconds per step times the steps from
  its change point to the attempt's last step. Ranks of a group wait for the slowest, so
  per attempt the costliest rank's alarms count, once; a rank waiting for another is
  never counted.

Wall-clock time is the attempts' durations plus the restart delays: the time
between a user stopping `labcoat run` and running it again is nobody's loss.
Queueing (waiting for a free slot before an attempt that is not a restart) is
reported beside it: it depends on the experiment's parallelism, not on the trial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from labcoat import store
from labcoat.journal import Events
from labcoat.runner._restart import is_failure
from labcoat.store import Alert, Attempt, Event, Experiment, Trial

LOSSES = ("checkpoint_saves", "startup", "startup_restore", "redone_work", "failure_detection",
          "restart_delays", "slow_steps")
SLOW_STEP_RULE = Events.PHASE_SLOW


@dataclass
class Goodput:
    wall_s: float = 0.0
    lost: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LOSSES, 0.0))
    queued_s: float = 0.0
    redone_steps: int = 0

    @property
    def productive_s(self) -> float:
        return max(0.0, self.wall_s - sum(self.lost.values()))

    @property
    def ratio(self) -> float | None:
        return self.productive_s / self.wall_s if self.wall_s > 0 else None

    def add(self, other: Goodput) -> None:
        self.wall_s += other.wall_s
        self.queued_s += other.queued_s
        self.redone_steps += other.redone_steps
        for name in LOSSES:
            self.lost[name] += other.lost[name]


def trial_goodput(trial: Trial, saves: Sequence[Event], slow: Sequence[Alert] = ()
                  ) -> Goodput:
    """Goodput of one trial from its attempts, its `checkpoint.saved` events and its
    slow-step alerts (`phase.slow`)."""
    result = Goodput()
    result.lost["checkpoint_saves"] = sum(float((e.data or {}).get("stall_s") or 0.0)
                                          for e in saves)
    result.lost["slow_steps"] = _slow_steps(trial, slow)
    previous: Attempt | None = None
    for attempt in trial.attempts:
        _add_attempt(result, previous, attempt)
        previous = attempt
    return result


def _add_attempt(result: Goodput, previous: Attempt | None, attempt: Attempt) -> None:
    start, end = _seconds(attempt.started_at), _end(attempt)
    result.wall_s += max(0.0, end - start)
    first_step = attempt.first_step_time
    startup = "startup_restore" if attempt.restored_step else "startup"
    if first_step is not None:
        result.lost[startup] += max(0.0, min(first_step, end) - start)
    elif attempt.last_step is None:  # never reached a step: all of it was startup
        result.lost[startup] += max(0.0, end - start)
    restart = previous is not None and is_failure(previous.cause)
    if restart:
        delay = max(0.0, start - _end(previous))
        result.wall_s += delay
        result.lost["restart_delays"] += delay
        redone = (previous.last_step or 0) - (attempt.restored_step or 0)
        if redone > 0:
            result.redone_steps += redone
            result.lost["redone_work"] += redone * _step_seconds(previous)
    elif attempt.queued_s:
        result.queued_s += attempt.queued_s
    if is_failure(attempt.cause) and attempt.last_record_time and attempt.ended_at:
        result.lost["failure_detection"] += max(0.0, end - attempt.last_record_time)


def _slow_steps(trial: Trial, slow: Sequence[Alert]) -> float:
    """Seconds the named slowdowns cost: per attempt, the costliest rank's alarms."""
    last = {a.id: a.last_step for a in trial.attempts}
    cost: dict[int, dict[int, float]] = {}  # attempt id -> rank -> seconds
    for alert in slow:
        evidence = alert.evidence or {}
        if (alert.rule != SLOW_STEP_RULE or evidence.get("waits_for") is not None
                or evidence.get("busy_s") is not None):  # a wait, or the machine's
            continue
        end, start = last.get(alert.attempt_id), evidence.get("step", alert.step)
        delta = float(evidence.get("delta_s") or 0.0)
        if end is None or start is None or delta <= 0:
            continue
        ranks = cost.setdefault(alert.attempt_id, {})
        rank = int(evidence.get("rank") or 0)
        ranks[rank] = ranks.get(rank, 0.0) + delta * max(0, end - int(start) + 1)
    return sum(max(ranks.values()) for ranks in cost.values())


def _step_seconds(attempt: Attempt) -> float:
    """Mean time per step of an attempt, from its first logged step to its last line."""
    if not (attempt.first_step_time and attempt.last_record_time and attempt.last_step):
        return 0.0
    steps = attempt.last_step - (attempt.restored_step or 0)
    return max(0.0, attempt.last_record_time - attempt.first_step_time) / max(1, steps)


def _seconds(moment) -> float:
    return store.as_utc(moment).timestamp()


def _end(attempt: Attempt) -> float:
    return _seconds(attempt.ended_at or store.utcnow())


def experiment_goodput(session: Session, experiment: Experiment
                       ) -> tuple[dict[str, Goodput], Goodput]:
    """Goodput per trial key, and summed over the experiment's trials."""
    ids = [t.id for t in experiment.trials]
    saves: dict[int, list[Event]] = {i: [] for i in ids}
    for event in store.events(session, ids, kind=Events.CHECKPOINT_SAVED):
        saves[event.trial_id].append(event)
    slow: dict[int, list[Alert]] = {i: [] for i in ids}
    for alert in store.alerts(session, ids):
        if alert.rule == SLOW_STEP_RULE:
            slow[alert.trial_id].append(alert)
    per_trial = {t.key: trial_goodput(t, saves[t.id], slow[t.id]) for t in experiment.trials}
    total = Goodput()
    for goodput in per_trial.values():
        total.add(goodput)
    return per_trial, total
