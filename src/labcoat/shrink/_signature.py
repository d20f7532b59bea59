"""A failure's signature: what failed (a guard rule, else the diagnosed cause) and when
(the step, relative to the trial's steps), read from the store.

Two failures are the same when their names agree and their relative steps lie within a
tolerance: a NaN at 2% of training is another bug than the NaN at 50% that was being
shrunk, even though both are `nonfinite.loss` (minifiers that ignore this "slip" to a
different failure). The guard's `nonfinite.*` rules name one failure: which of loss,
gradient or parameter shows the NaN first depends on the check cadence, not on the bug.
For the same reason a guard rule may see a failure up to one check interval late (the
causality probe every `causal_every` steps, the other periodic checks every `check_every`,
as the guard's `guard.started` event records them): in a run of 8 steps probed every 4 that
is half of training, so that lag is added to the tolerance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labcoat import diagnose, store
from labcoat.journal import JOURNAL_NAME, LEVELS, Events

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from labcoat.store import Attempt, Trial

# Guard rules that name one failure, seen at different places (compared by this prefix).
SAME_FAILURE = ("nonfinite.",)
# An attempt that ended this way did not fail: it finished, or something outside stopped it.
CLEAN = ("exit 0", "interrupted", "finished", "lost", "ad-hoc")
TIME_LIMIT = "time limit"  # the runner's cause for an attempt stopped at its time limit


@dataclass(frozen=True)
class Signature:
    """kind: "guard" (name is the alert's rule) or "cause" (name is diagnose's cause).
    step: the step of the first failure (None if unknown); relative: step / total steps."""

    kind: str
    name: str
    step: int | None
    relative: float | None
    lag: float = 0.0  # how late the rule may see it: its check interval / total steps

    def same(self, other: Signature, tolerance: float) -> bool:
        """Same kind and name (any two `nonfinite.*` rules agree), at a relative step within
        `tolerance` plus the larger check lag (unknown steps agree)."""
        if (self.kind, _family(self.name)) != (other.kind, _family(other.name)):
            return False
        if self.relative is None or other.relative is None:
            return True
        slack = tolerance + max(self.lag, other.lag)
        return abs(self.relative - other.relative) <= slack + 1e-9

    def describe(self) -> str:
        what = f"guard {self.name}" if self.kind == "guard" else f"cause {self.name}"
        if self.step is None:
            return what
        at = f" ({self.relative:.0%} of training)" if self.relative is not None else ""
        return f"{what} at step {self.step}{at}"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Failure:
    """How one attempt ended, as shrink judges it.

    signature: None if it neither failed nor alerted. stopped: stopped at its time limit.
    time_to_failure: seconds from the trial's start (its first journal record) to the failure
    (None without one); wall: seconds from launch to the failure, or to the attempt's end.
    """

    signature: Signature | None
    stopped: bool
    time_to_failure: float | None
    wall: float | None
    cause: str | None


def failure_of(session: Session, trial: Trial) -> Failure:
    """The failure of `trial`'s last failed attempt (else its last attempt)."""
    attempt = diagnose.attempt_to_diagnose(trial)
    total = trial.total_steps
    alerts = [a for a in store.alerts(session, [trial.id]) if a.attempt_id == attempt.id]
    signature, at = None, None
    if alerts:
        worst = max(LEVELS.index(a.severity) if a.severity in LEVELS else 0 for a in alerts)
        first = min((a for a in alerts if (LEVELS.index(a.severity)
                                           if a.severity in LEVELS else 0) == worst),
                    key=lambda a: (a.step if a.step is not None else -1, a.id))
        signature = Signature("guard", first.rule, first.step, _relative(first.step, total),
                              _lag(session, attempt, first.rule, total))
        at = first.time
    cause = attempt.cause or ""
    stopped = cause.startswith(TIME_LIMIT)
    failed = bool(cause) and not cause.startswith(CLEAN) and not stopped
    if signature is None and failed:
        found = diagnose.diagnose_trial(session, trial, attempt=attempt.number, max_references=0)
        name = found.cause or "unknown"
        if found.cause == "exception" and found.exception:
            name = f"exception: {found.exception.split(':', 1)[0]}"
        step = found.step if found.step is not None else attempt.last_step
        signature = Signature("cause", name, step, _relative(step, total))
        at = attempt.last_record_time
    started = store.as_utc(attempt.started_at).timestamp()
    ended = store.as_utc(attempt.ended_at).timestamp() if attempt.ended_at else None
    if signature is not None and at is None:
        at = ended
    begun = _start_record_time(attempt)
    return Failure(
        signature=signature, stopped=stopped,
        time_to_failure=None if signature is None or at is None else max(0.0, at - (
            begun if begun is not None else started)),
        wall=(at if signature is not None and at is not None else ended or started) - started,
        cause=attempt.cause)


def _family(rule: str) -> str:
    return next((prefix for prefix in SAME_FAILURE if rule.startswith(prefix)), rule)


def _relative(step: int | None, total: int | None) -> float | None:
    if step is None or not total:
        return None
    return min(1.0, step / total)


def _lag(session: Session, attempt: Attempt, rule: str, total: int | None) -> float:
    """The rule's check interval over the run's steps, from its `guard.started` event."""
    started = next((e.data or {} for e in store.events(
        session, [attempt.trial_id], kind=Events.GUARD_STARTED) if e.attempt_id == attempt.id),
        {})
    every = started.get("causal_every" if rule.startswith("model.causality") else
                        "check_every")
    if not isinstance(every, int) or not total:
        return 0.0
    return min(1.0, every / total)


def _start_record_time(attempt: Attempt) -> float | None:
    """When the trial started (its journal's first record, written by `labcoat.init`): after
    the interpreter and imports, before any of its own work."""
    if not attempt.run_dir:
        return None
    try:
        with open(Path(attempt.run_dir) / JOURNAL_NAME, encoding="utf-8") as f:
            record = json.loads(f.readline())
    except (OSError, ValueError):
        return None
    value = record.get("time") if isinstance(record, dict) else None
    return float(value) if isinstance(value, int | float) else None
