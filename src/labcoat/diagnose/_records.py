"""Plain-data inputs of a diagnosis: printed lines, metric points, events, the attempt's end.

Everything `diagnose` needs is in these records, so it runs on logs from
anywhere (a file, a test, another tool); `diagnose_trial` fills them from the
store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class LogLine:
    """One line a trial printed.

    trial, attempt: which run printed it (any labels; references may mix trials).
    rank, host: who printed it; None if unknown (then a ``[rank3]:``-style prefix in
        the text is used).
    step: the training step reached when it was printed; None if unknown (then a
        ``step N`` in the text, carried forward per rank, is used).
    time: unix seconds; None if unknown (then a leading ISO timestamp is used).
    stream: ``"stdout"`` or ``"stderr"``.
    text: the line, without its newline.
    """

    text: str
    trial: str | None = None
    attempt: int | None = None
    rank: int | None = None
    host: str | None = None
    step: int | None = None
    time: float | None = None
    stream: str = "stdout"


@dataclass(frozen=True, kw_only=True)
class MetricPoint:
    """A logged metric value (e.g. the loss); rank None for metrics logged once per step."""

    step: int
    name: str
    value: float
    rank: int | None = None
    time: float | None = None


@dataclass(frozen=True, kw_only=True)
class RunEvent:
    """A structured event from the trial's journal or the runner, e.g. ``guard.alert``
    (data: ``{"rule": "nonfinite.loss", ...}``), ``checkpoint.saved`` or ``chaos.kill``."""

    kind: str
    message: str = ""
    step: int | None = None
    rank: int | None = None
    host: str | None = None
    time: float | None = None
    level: str = "info"
    data: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class AttemptEnd:
    """How the runner saw the attempt end.

    cause: the runner's cause string, e.g. ``"exit 1: RuntimeError: ..."``,
        ``"killed by signal SIGKILL"``, ``"hang: no journal line for 300 s"``.
    exit_code: the process's exit code (negative: killed by that signal).
    last_step: the last step in the trial's journal (its last heartbeat of progress).
    last_time: unix seconds of the journal's last record.
    """

    cause: str | None = None
    exit_code: int | None = None
    last_step: int | None = None
    last_time: float | None = None
