"""Restart policy: retry budget, backoff, hang detection and the failure rate (MTBF)."""

from __future__ import annotations

from dataclasses import dataclass

from labcoat.spec import Restart
from labcoat.store import Experiment

MAX_BACKOFF = 60.0
# Prior for the mean time between failures, so a trial's first attempts do not
# see an infinite MTBF (no failure yet) or a tiny one (one early crash): it
# counts as one failure observed over PRIOR_MTBF seconds.
PRIOR_MTBF = 24 * 3600.0
CLEAN_CAUSES = ("exit 0", "interrupted", "finished", "lost", "ad-hoc")


def backoff_seconds(policy: Restart, restart_number: int) -> float:
    """Delay before restart number `restart_number` (1-based): backoff * 2^(n-1), capped."""
    return min(MAX_BACKOFF, policy.backoff * 2 ** (restart_number - 1))


def is_failure(cause: str | None) -> bool:
    """Whether an attempt's cause counts against the failure rate (crashes and hangs do;
    a clean exit or a user stopping the run does not)."""
    return bool(cause) and not cause.startswith(CLEAN_CAUSES)


def mtbf_seconds(experiment: Experiment) -> float:
    """Mean time between failures over the experiment's recorded attempts, with a prior."""
    seconds, failures = PRIOR_MTBF, 1
    for trial in experiment.trials:
        for attempt in trial.attempts:
            duration = attempt.seconds()
            if duration is not None:
                seconds += duration
                failures += is_failure(attempt.cause)
    return seconds / failures


@dataclass
class Hang:
    """Hang detection for one running attempt: no journal line for `timeout` seconds."""

    timeout: float | None
    last_activity: float

    def touch(self, now: float) -> None:
        self.last_activity = now

    def hung(self, now: float) -> bool:
        return self.timeout is not None and now - self.last_activity > self.timeout
