"""The trial journal: append-only JSON lines, one file per trial attempt.

Trials never touch the database; they append records here and the runner
ingests them (the single writer). Every record is one line, written and
flushed in one call, so a killed process leaves at most one partial last line,
which the reader leaves for later (it may still be completed) and never
misreads.

Record kinds (format version 1):
    {"kind": "start", "v": 1, "time", "pid", "host", "total_steps"}
    {"kind": "log", "time", "step", "metrics": {name: value}}
    {"kind": "items", "time", "step", "task", "variant", "items": [...], "scores": [...]}
    {"kind": "event", "time", "step", "level", "event", "message", "data"}
    {"kind": "finish", "time", "status"}
    {"kind": "step", "time", "step", "step_s"?, "work_s"?}   multi-rank trials only
Multi-rank trials (``ranks: N``) write one journal per rank: rank 0 the usual
``journal.jsonl``, rank r > 0 ``journal-rank<r>.jsonl`` beside it (`rank_journal`).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labcoat import environment

VERSION = 1
JOURNAL_NAME = "journal.jsonl"  # inside an attempt's run directory


def rank_journal(journal: str | os.PathLike[str], rank: int) -> Path:
    """The journal rank `rank` of a multi-rank trial writes, beside rank 0's `journal`."""
    path = Path(journal)
    return path if rank == 0 else path.with_name(f"{path.stem}-rank{rank}{path.suffix}")


class JournalWriter:
    """Appends records to a journal file; each record is flushed when written.

    Thread-safe: a background thread (e.g. an asynchronous checkpoint save) may
    write events while the training thread logs metrics.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Line buffering is not enough for long lines; we flush explicitly.
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()
        self._writes = 0
        self._torn_at = _torn_write_from_env()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), allow_nan=True)
        with self._lock:
            if self._file.closed:
                raise RuntimeError(f"journal {self.path} is closed (the run has finished)")
            self._writes += 1
            if self._writes == self._torn_at:
                self._die_mid_line(line)
            self._file.write(line + "\n")
            self._file.flush()

    def _die_mid_line(self, line: str) -> None:
        """Fault injection (LABCOAT_JOURNAL_FAULT=torn@N): the process dies halfway through
        writing its N-th record, as a kill during a journal flush would leave it."""
        self._file.write(line[: len(line) // 2])
        self._file.flush()
        os.fsync(self._file.fileno())
        os._exit(137)

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()


def _torn_write_from_env() -> int | None:
    raw = os.environ.get(environment.JOURNAL_FAULT, "").strip()
    if not raw:
        return None
    if not (raw.startswith("torn@") and raw[5:].isdigit()):
        raise ValueError(f"LABCOAT_JOURNAL_FAULT={raw!r} is not a known fault; use torn@N")
    return int(raw[5:])


@dataclass
class JournalChunk:
    """Records read from a journal since a byte offset.

    records: (line_number, record) pairs, line numbers 1-based over the whole file.
    bad_lines: (line_number, reason) for complete lines that are not valid records.
    offset / line: where the next read starts.
    """

    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    offset: int = 0
    line: int = 0


def read_journal(path: str | os.PathLike[str], offset: int = 0, line: int = 0) -> JournalChunk:
    """Read complete lines of a journal from byte `offset` (line count `line`).

    A trailing line without a newline is left unread: its writer may still be
    writing it. Re-reading from the returned offset never yields a record twice.
    """
    lines, chunk_offset, chunk_line = read_lines(path, offset, line)
    chunk = JournalChunk(offset=chunk_offset, line=chunk_line)
    for number, raw in lines:
        record, reason = _parse(raw)
        if record is None:
            chunk.bad_lines.append((number, reason))
        else:
            chunk.records.append((number, record))
    return chunk


def read_lines(path: str | os.PathLike[str], offset: int = 0, line: int = 0
               ) -> tuple[list[tuple[int, bytes]], int, int]:
    """Complete lines of any growing file from byte `offset`: ([(line number, bytes)],
    next offset, next line count). A trailing partial line is left for the next read."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset, line
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset, line
    raws = data[:end].split(b"\n")
    return ([(line + i, raw) for i, raw in enumerate(raws, start=1)], offset + end + 1,
            line + len(raws))


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        record = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"not JSON ({e.__class__.__name__}: {e})"
    if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
        return None, "not a journal record (expected an object with a 'kind')"
    return record, ""
