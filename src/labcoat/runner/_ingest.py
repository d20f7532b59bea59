"""Journal ingestion: trial journals -> store rows, idempotently and incrementally.

Each attempt remembers the byte offset and line number ingested so far, so a
poll reads only new lines; and every row is keyed (metric points by trial,
name, step; events by attempt and journal line), so re-reading a journal from
the start never duplicates anything.

A multi-rank trial adds one journal per rank r > 0 (`ingest_ranks`): their
events go to the store with their rank and stream ``journal.rank<r>``, their
step times become metric points ``step_s/rank<r>`` and ``work_s/rank<r>`` (rank
0's too), and their metrics, which the SDK leaves to rank 0, are never read. Every
rank's `phases` records become points ``phase_s/<phase>/rank<r>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from labcoat import store
from labcoat.journal import (  # MAX_RANKS keeps ranks' alert keys apart
    MAX_RANKS,
    PHASE_POINTS,
    Events,
)
from labcoat.sdk import JOURNAL_NAME, JournalChunk, rank_journal, read_journal
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
    # multi-rank trials: step times seen this pass, rank -> [seconds]; work_s is a rank's own
    # work before it waits for the others, step_s the wall time between its steps
    work_s: dict[int, list[float]] = field(default_factory=dict)
    step_s: dict[int, list[float]] = field(default_factory=dict)
    hosts: dict[int, str] = field(default_factory=dict)  # rank -> host, from start records
    # ranks r > 0: (time of the last record, last step) read this pass, and who finished
    last: dict[int, tuple[float, int | None]] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)


def journal_path(attempt: Attempt) -> Path:
    return Path(attempt.run_dir or ".") / JOURNAL_NAME


def ingest_attempt(session: Session, attempt: Attempt) -> Progress:
    """Ingest the new complete lines of `attempt`'s journal into the store."""
    chunk = read_journal(journal_path(attempt), attempt.journal_offset, attempt.journal_line)
    progress = Progress(last_step=attempt.last_step)
    _ingest_chunk(session, _Rows(attempt), chunk, progress)
    attempt.journal_offset = chunk.offset
    attempt.journal_line = chunk.line
    attempt.last_step = progress.last_step
    session.flush()
    return progress


def ingest_ranks(session: Session, attempt: Attempt, world: int,
                 offsets: dict[int, tuple[int, int]]) -> Progress:
    """Ingest the new lines of the journals of ranks 1..world-1 of a multi-rank attempt.

    offsets: rank -> (byte offset, line) read so far, updated here; kept by the caller
    (starting again from nothing re-reads each journal and duplicates nothing).
    Returns their step times and hosts; the attempt's last step stays rank 0's.
    """
    progress = Progress(last_step=attempt.last_step)
    for rank in range(1, world):
        offset, line = offsets.get(rank, (0, 0))
        chunk = read_journal(rank_journal(journal_path(attempt), rank), offset, line)
        _ingest_chunk(session, _Rows(attempt, rank=rank), chunk, progress)
        times = [r["time"] for _, r in chunk.records if isinstance(r.get("time"), int | float)]
        steps = [r["step"] for _, r in chunk.records if isinstance(r.get("step"), int)]
        if times:
            progress.last[rank] = (max(times), max(steps, default=None))
        if any(r["kind"] == "finish" for _, r in chunk.records):
            progress.finished.add(rank)
        offsets[rank] = (chunk.offset, chunk.line)
    progress.last_step = attempt.last_step
    session.flush()
    return progress


def _ingest_chunk(session: Session, rows: _Rows, chunk: JournalChunk,
                  progress: Progress) -> None:
    for line, record in chunk.records:
        try:
            rows.add(line, record, progress)
        except (KeyError, TypeError, ValueError) as e:
            rows.problem(line, f"malformed {record.get('kind')!r} record ({e})")
    for line, reason in chunk.bad_lines:
        rows.problem(line, reason)
    progress.problems += len(rows.problems)
    progress.records += len(chunk.records) + len(chunk.bad_lines)
    rows.write(session)


class _Rows:
    """Rows collected from journal records, written in a few bulk statements.

    rank: the rank r > 0 whose journal this is (None: rank 0's, the attempt's own).
    """

    def __init__(self, attempt: Attempt, rank: int | None = None) -> None:
        self.attempt = attempt
        self.rank = rank
        self.stream = "journal" if rank is None else f"journal.rank{rank}"
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
        if self.rank is not None:
            self._add_rank(line, kind, record, step, progress)
            return
        self._times(kind, record.get("time"))
        if kind == "step":
            self._step_times(record, step, progress)
        elif kind == "phases":
            self._phases(record, step)
        elif kind == "log":
            self._log(record["metrics"], step, record.get("time"), progress)
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
            if record.get("event") in _ALERTS:
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

    def _add_rank(self, line: int, kind: str, record: dict[str, Any], step: int | None,
                  progress: Progress) -> None:
        """A record of rank r > 0: its step times, events and alerts; metrics, items and
        checkpoints are rank 0's (the SDK journals them there alone)."""
        if kind == "step":
            self._step_times(record, step, progress)
        elif kind == "phases":
            self._phases(record, step)
        elif kind == "event":
            self.events.append(self._event(line, record, step))
            alert = record.get("event") == Events.GUARD_ALERT
            # dist.* alerts come from a table all ranks gathered: each rank raises the same
            # one, and rank 0's copy is already the record.
            if alert and not str((record.get("data") or {}).get("rule", "")).startswith("dist."):
                self._alert(line, record, step, progress)
        elif kind == "start" and record.get("host"):
            progress.hosts[self.rank or 0] = str(record["host"])
        elif kind not in ("log", "items", "heartbeat", "finish"):
            raise ValueError(f"unknown record kind {kind!r}")

    def _step_times(self, record: dict[str, Any], step: int | None,
                    progress: Progress) -> None:
        """A multi-rank step record: the rank's wall time per step and own work time."""
        rank = _rank(record.get("rank", self.rank))
        if step is None or rank is None:
            raise ValueError("a step record needs a step and a rank")
        for name, times in (("step_s", progress.step_s), ("work_s", progress.work_s)):
            if record.get(name) is not None:
                value = _value(record[name], name)
                times.setdefault(rank, []).append(value)
                self.points.append({**self.ids, "name": f"{name}/rank{rank}", "step": step,
                                    "value": value, "time": record.get("time")})

    def _phases(self, record: dict[str, Any], step: int | None) -> None:
        """A step's time by phase (labcoat.torch.time_phases, run.phase): metric points
        ``phase_s/<phase>/rank<r>`` (rank 0's too), which the slow-step alarm reads."""
        rank = _rank(record.get("rank", self.rank or 0))
        if step is None:
            raise ValueError("a phases record needs a step")
        for name, value in record["s"].items():
            self.points.append({**self.ids, "name": f"{PHASE_POINTS}{name}/rank{rank}",
                                "step": step, "value": _value(value, f"phase {name!r}"),
                                "time": record.get("time")})

    def _log(self, metrics: dict[str, Any], step: int | None, time: Any,
             progress: Progress) -> None:
        """A log record's points (the bulk of most journals: kept to one dict per point)."""
        trial_id, attempt_id = self.ids["trial_id"], self.ids["attempt_id"]
        for name, value in metrics.items():
            if type(value) is not float:  # the common case, checked fast
                value = _value(value, f"metric {name!r}")
            name = name if type(name) is str else str(name)
            self.points.append({"trial_id": trial_id, "attempt_id": attempt_id, "name": name,
                                "step": step, "value": value, "time": time})
            progress.latest[name] = value

    def _times(self, kind: str, time: Any) -> None:
        """First logged step and last journal line of the attempt (for goodput)."""
        if not isinstance(time, int | float):
            return
        if kind == "log" and self.attempt.first_step_time is None:
            self.attempt.first_step_time = float(time)
        self.attempt.last_record_time = max(float(time), self.attempt.last_record_time or 0.0)

    def _known_event(self, name: str, data: dict[str, Any], step: int | None, time: Any) -> None:
        """Events with a table of their own: checkpoints and where an attempt resumed."""
        if name == Events.CHECKPOINT_SAVED and step is not None:
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
        elif name == Events.CHECKPOINT_DELETED and step is not None:
            self.deleted.append(step)
        elif name == Events.CHECKPOINT_RESTORED and step is not None:
            self.attempt.restored_step = step
        elif name == Events.CHECKPOINT_FRESH_START:
            self.attempt.restored_step = 0

    def _alert(self, line: int, record: dict[str, Any], step: int | None,
               progress: Progress) -> None:
        """A guard alert (labcoat.torch.watch): a row of the alert table, and news for the
        live display."""
        data = record.get("data") or {}
        message = str(record.get("message", ""))
        seq = line
        if self.rank:  # alerts are keyed by (attempt, seq): keep rank r's apart from rank 0's
            seq, message = -(line * MAX_RANKS + self.rank), f"rank {self.rank}: {message}"
        alert = {**self.ids, "seq": seq, "step": step, "rule": str(data.get("rule", "?")),
                 "severity": str(data.get("severity", record.get("level", "warning"))),
                 "message": message, "evidence": data.get("evidence"),
                 "time": record.get("time")}
        self.alerts.append(alert)
        progress.alerts.append(alert)

    def _event(self, line: int, record: dict[str, Any], step: int | None) -> dict[str, Any]:
        return {
            **self.ids,
            "seq": line,
            "stream": self.stream,
            "rank": _rank(record.get("rank", self.rank)),
            "step": step,
            "level": str(record.get("level", "info")),
            "kind": str(record.get("event", "event")),
            "message": str(record.get("message", "")),
            "data": record.get("data") or None,
            "time": record.get("time"),
            "host": self.attempt.host,
        }

    def problem(self, line: int, reason: str) -> None:
        path = rank_journal(journal_path(self.attempt), self.rank or 0)
        self.problems.append(
            {
                **self.ids,
                "seq": line,
                "stream": self.stream,
                "rank": self.rank,
                "level": "error",
                "kind": Events.JOURNAL_INVALID,
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


# Journal events that are also rows of the alert table (shown by `labcoat status`, the
# report and the dashboard): the guard's, and the SDK's note that a logged value replaced
# an earlier one at the same step.
_ALERTS = (Events.GUARD_ALERT, Events.LOG_OVERWRITTEN)
_STEP_MAX = 2**63 - 1  # the store's 64-bit integers


def _rank(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_RANKS:
        raise ValueError(f"rank {value!r} is not an integer in [0, {MAX_RANKS})")
    return value


def _step(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _STEP_MAX:
        raise ValueError(f"step {value!r:.40} is not an integer in [0, 2**63)")
    return value


def _value(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {value!r}, not a number")
    return float(value)  # NaN and inf are kept: they are evidence of a broken run
