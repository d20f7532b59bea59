"""The runner's one interface to live monitoring (`labcoat.monitor` implements it).

While trials run, the loop hands each polled attempt to every monitor; a monitor
writes its own alerts to the store and returns them (and at most a note) for the
live display. The runner knows nothing of what a monitor computes, so it imports
neither the statistics nor the scaling laws behind early warning or extrapolation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy.orm import Session

from labcoat.store import Attempt, Experiment, Trial


class Monitor(Protocol):
    def check(self, session: Session, trial: Trial, attempt: Attempt, *,
              final: bool = False) -> tuple[list[dict[str, Any]], str | None]:
        """(new alerts, already in the alert table; a note for the display, or None).
        final: the process has exited, so check now whatever the throttle says."""


# Builds a monitor for one run of an experiment (may raise LabcoatError, e.g. an unknown
# reference experiment).
MonitorFactory = Callable[[Session, Experiment], Monitor]
