"""The journal writer the trial SDK appends with (the format: `labcoat.journal`)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from labcoat import environment


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
        try:
            line = json.dumps(record, separators=(",", ":"), allow_nan=True, default=_plain)
        except (TypeError, ValueError) as e:  # a params or event value JSON cannot hold
            raise ValueError(f"labcoat: cannot journal this {record.get('kind')} record: {e}; "
                             "pass numbers, strings, lists and dicts") from None
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


def _plain(value: Any) -> Any:
    """numpy and torch values as the plain numbers and lists they hold (without importing
    either); anything else JSON cannot hold is a TypeError naming its type."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{value!r:.60} ({type(value).__name__}) is not JSON")


def _torn_write_from_env() -> int | None:
    raw = os.environ.get(environment.JOURNAL_FAULT, "").strip()
    if not raw:
        return None
    if not (raw.startswith("torn@") and raw[5:].isdigit()):
        raise ValueError(f"LABCOAT_JOURNAL_FAULT={raw!r} is not a known fault; use torn@N")
    return int(raw[5:])
