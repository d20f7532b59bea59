"""Structured capture: every line a trial prints becomes an event.

The runner tails each attempt's stdout.log and stderr.log (kept whole on disk)
and records each complete line as an `Event(kind="log")` with the attempt, its
stream and line number (so re-reading adds nothing twice), the level read from
the line, the rank a multi-process launcher's prefix names (torchrun --tee's
``[default3]:``, PyTorch's ``[rank3]:``; None without one), and the step the trial
had reached by then (the latest step in its journal when the line was read, so
within one poll of the truth). Known noise (banners, progress bars) is flagged,
not dropped.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from labcoat import store
from labcoat.diagnose import is_noise, rank_of
from labcoat.runner._local import STDERR_NAME, STDOUT_NAME
from labcoat.sdk import read_lines
from labcoat.store import Attempt

MAX_LINE = 10_000  # characters kept per line in the event (the file keeps everything)
LEVELS = (  # first match wins
    ("critical", re.compile(r"\b(CRITICAL|FATAL|Segmentation fault|core dumped)\b")),
    ("error", re.compile(r"\b(Traceback|ERROR|Error|Exception|error:|Killed)\b")),
    ("warning", re.compile(r"\b(WARNING|Warning|WARN|warning:|[A-Za-z]+Warning)\b")),
    ("debug", re.compile(r"\bDEBUG\b")),
)


def capture_output(session: Session, attempt: Attempt, step: int | None) -> int:
    """Record the new complete lines of the attempt's stdout and stderr; returns how many."""
    rows: list[dict[str, Any]] = []
    now = time.time()
    for stream, name in (("stdout", STDOUT_NAME), ("stderr", STDERR_NAME)):
        offset, line = getattr(attempt, f"{stream}_offset"), getattr(attempt, f"{stream}_line")
        lines, offset, line = read_lines(Path(attempt.run_dir or ".") / name, offset, line)
        setattr(attempt, f"{stream}_offset", offset)
        setattr(attempt, f"{stream}_line", line)
        rows += [_row(attempt, stream, number, raw, step, now) for number, raw in lines]
    if rows:
        _flag_noise(rows)
        store.insert_events(session, rows)
    return len(rows)


def _row(attempt: Attempt, stream: str, number: int, raw: bytes, step: int | None,
         now: float) -> dict[str, Any]:
    text = raw.decode("utf-8", "replace").rstrip("\r")
    text = text.rsplit("\r", 1)[-1]  # a progress bar redraws the line: keep what was shown
    return {"trial_id": attempt.trial_id, "attempt_id": attempt.id, "stream": stream,
            "seq": number, "step": step, "rank": rank_of(text, tags=False), "host": attempt.host,
            "level": level_of(text), "kind": "log", "message": text[:MAX_LINE],
            "data": {"noise": False}, "time": now}


def level_of(text: str) -> str:
    for level, pattern in LEVELS:
        if pattern.search(text):
            return level
    return "info"


def _flag_noise(rows: list[dict[str, Any]]) -> None:
    """Mark library banners and progress bars (labcoat.diagnose's classifier)."""
    for row, noise in zip(rows, is_noise([r["message"] for r in rows]), strict=True):
        row["data"] = {"noise": bool(noise)}
