"""Journal ingestion: trial journals -> store rows, idempotently and incrementally.

Each attempt remembers the byte offset and line number ingested so far, so a
poll reads only new lines; and every row is keyed (metric points by trial,
name, step; events by attempt and journal line), so re-reading a journal from
the start never duplicates anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from labcoat import store
from labcoat.sdk import JOURNAL_NAME, read_journal
from labcoat.store import Attempt


@dataclass
class Progress:
    """What one ingestion pass saw (for the live display)."""

    last_step: int | None = None
    latest: dict[str, float] = field(default_factory=dict)
    finish_status: str | None = None
    problems: int = 0
    records: int = 0  # lines read this pass (any line is a heartbeat)
    heartbeat_timeout: float | None = None  # declared by the trial in its start record
    alerts: list[dict[str, Any]] = field(default_factory=list)  # guard alerts seen this pass


def journal_path(attempt: Attempt) -> Path:
    return Path(attempt.run_dir or ".") / JOURNAL_NAME


def ingest_attempt(session: Session, attempt: Attempt) -> Progress:
    """Ingest the new complete lines of `attempt`'s journal into the store."""
    chunk = read_journal(journal_path(attempt), attempt.journal_offset, attempt.journal_line)
    progress = Progress(last_step=attempt.last_step)
    rows = _Rows(attempt)
    for line, record in chunk.records:
        try:
            rows.add(line, record, progress)
        except (KeyError, TypeError, ValueError) as e:
            rows.problem(line, f"malformed {record.get('kind')!r} record ({e})")
    for line, reason in chunk.bad_lines:
        rows.problem(line, reason)
    progress.problems = len(rows.problems)
    progress.records = len(chunk.records) + len(chunk.bad_lines)
    rows.write(session)
    attempt.journal_offset = chunk.offset
    attempt.journal_line = chunk.line
    attempt.last_step = progress.last_step
    session.flush()
    return progress


class _Rows:
    """Rows collected from journal records, written in a few bulk statements."""

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.ids = {"trial_id": attempt.trial_id, "attempt_id": attempt.id}
        self.points: list[dict[str, Any]] = []
        self.items: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.problems: list[dict[str, Any]] = []
        self.checkpoints: list[dict[str, Any]] = []
        self.alerts: list[dict[str, Any]] = []
        self.deleted: list[int] = []  # checkpoint steps removed by retention

    def add(self, line: int, record: dict[str, Any], progress: Progress) -> None:
        kind = record["kind"]
        step = record.get("step")
        if step is not None:
            step = _step(step)
            progress.last_step = max(step, progress.last_step or 0)
        self._times(kind, record.get("time"))
        if kind == "log":
            for name, value in record["metrics"].items():
                value = _value(value, f"metric {name!r}")
                self.points.append(
                    {
                        **self.ids,
                        "name": str(name),
                        "step": step,
                        "value": value,
                        "time": record.get("time"),
                    }
                )
                progress.latest[str(name)] = value
        elif kind == "items":
            items, scores = record["items"], record["scores"]
            if len(items) != len(scores):
                raise ValueError(f"{len(items)} items but {len(scores)} scores")
            self.items.extend(
                {
                    **self.ids,
                    "step": step,
                    "task": str(record["task"]),
                    "item": str(item),
                    "variant": str(record.get("variant") or ""),
                    "score": _value(score, "score"),
                }
                for item, score in zip(items, scores, strict=True)
            )
        elif kind == "event":
            self.events.append(self._event(line, record, step))
            self._known_event(
                str(record.get("event", "")), record.get("data") or {}, step, record.get("time")
            )
            if record.get("event") == "guard.alert":
                self._alert(line, record, step, progress)
        elif kind == "start":
            if record.get("total_steps"):
                self.attempt.trial.total_steps = int(record["total_steps"])
            if record.get("host"):
                self.attempt.host = str(record["host"])
            if record.get("heartbeat_timeout"):
                progress.heartbeat_timeout = float(record["heartbeat_timeout"])
        elif kind == "heartbeat":
            pass  # reading the line was the point
        elif kind == "finish":
            progress.finish_status = str(record.get("status", "done"))
        else:
            raise ValueError(f"unknown record kind {kind!r}")

    def _times(self, kind: str, time: Any) -> None:
        """First logged step and last journal line of the attempt (for goodput)."""
        if not isinstance(time, int | float):
            return
        if kind == "log" and self.attempt.first_step_time is None:
            self.attempt.first_step_time = float(time)
        self.attempt.last_record_time = max(float(time), self.attempt.last_record_time or 0.0)

    def _known_event(self, name: str, data: dict[str, Any], step: int | None, time: Any) -> None:
        """Events with a table of their own: checkpoints and where an attempt resumed."""
        if name == "checkpoint.saved" and step is not None:
            self.checkpoints.append(
                {
                    **self.ids,
                    "step": step,
                    "path": str(data.get("path", "")),
                    "bytes": data.get("bytes"),
                    "hash": data.get("sha256"),
                    "verified": bool(data.get("verified")),
                    "stall_s": data.get("stall_s"),
                    "write_s": data.get("write_s"),
                    "deleted": False,
                    "time": time,
                }
            )
        elif name == "checkpoint.deleted" and step is not None:
            self.deleted.append(step)
        elif name == "checkpoint.restored" and step is not None:
            self.attempt.restored_step = step
        elif name == "checkpoint.fresh_start":
            self.attempt.restored_step = 0

    def _alert(self, line: int, record: dict[str, Any], step: int | None,
               progress: Progress) -> None:
        """A guard alert (labcoat.torch.watch): a row of the alert table, and news for the
        live display."""
        data = record.get("data") or {}
        alert = {**self.ids, "seq": line, "step": step, "rule": str(data.get("rule", "?")),
                 "severity": str(data.get("severity", record.get("level", "warning"))),
                 "message": str(record.get("message", "")), "evidence": data.get("evidence"),
                 "time": record.get("time")}
        self.alerts.append(alert)
        progress.alerts.append(alert)

    def _event(self, line: int, record: dict[str, Any], step: int | None) -> dict[str, Any]:
        return {
            **self.ids,
            "seq": line,
            "step": step,
            "level": str(record.get("level", "info")),
            "kind": str(record.get("event", "event")),
            "message": str(record.get("message", "")),
            "data": record.get("data") or None,
            "time": record.get("time"),
            "host": self.attempt.host,
        }

    def problem(self, line: int, reason: str) -> None:
        path = journal_path(self.attempt)
        self.problems.append(
            {
                **self.ids,
                "seq": line,
                "level": "error",
                "kind": "journal.invalid",
                "message": f"{path}:{line}: skipped: {reason}",
                "data": None,
                "step": None,
                "time": None,
                "host": self.attempt.host,
            }
        )

    def write(self, session: Session) -> None:
        store.upsert_metric_points(session, self.points)
        store.upsert_eval_items(session, self.items)
        store.insert_events(session, sorted(self.events + self.problems, key=lambda e: e["seq"]))
        store.upsert_checkpoints(session, self.checkpoints)
        store.insert_alerts(session, self.alerts)
        store.mark_checkpoints_deleted(session, self.attempt.trial_id, self.deleted)


def _step(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"step {value!r} is not a non-negative integer")
    return value


def _value(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {value!r}, not a number")
    return float(value)  # NaN and inf are kept: they are evidence of a broken run
