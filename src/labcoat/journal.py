"""The journal format: append-only JSON lines, one file per trial attempt (and rank).

Trials never touch the database; they append records (``labcoat.sdk`` writes them)
and the reading side ingests them into the store (the runner for its trials,
the read commands for ad-hoc runs). Every record is one line, written and
flushed in one call, so a killed process leaves at most one partial last line,
which the reader leaves for later (it may still be completed) and never
misreads. This module is the one definition of the format: record kinds, the
event names labcoat itself writes, and levels. Stdlib only: the SDK imports it.

Record kinds (format version 1):
    {"kind": "start", "v": 1, "time", "pid", "host", "total_steps", "heartbeat_timeout",
     "arm", "seed", "params", "rank"?, "world"?}
    {"kind": "log", "time", "step", "metrics": {name: value}}
    {"kind": "items", "time", "step", "task", "variant", "items": [...], "scores": [...]}
    {"kind": "event", "time", "step", "level", "event", "message", "data"}
    {"kind": "heartbeat", "time", "step"}
    {"kind": "finish", "time", "status"}
    {"kind": "step", "time", "step", "step_s"?, "work_s"?}   multi-rank trials only
    {"kind": "phases", "time", "step", "s": {phase: seconds}, "rank"?}   one per step
`phases` is a step's time by phase (`STEP_PHASES` below, or a user's `run.phase` name), written
by `labcoat.torch.time_phases` (or by the SDK for `run.phase` alone): one record per step,
so timing stays cheap; `total` in it is the step's wall time, `other` what no phase took,
and `cpu_wait` (Linux) the time the training thread waited for a CPU during the step: not a
phase, the machine's share of the step's time.
Multi-rank trials (``ranks: N``) write one journal per rank: rank 0 the usual
``journal.jsonl``, rank r > 0 ``journal-rank<r>.jsonl`` beside it (`rank_journal`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERSION = 1
JOURNAL_NAME = "journal.jsonl"  # inside an attempt's run directory
# Ranks per trial (journal.rank0 ... journal.rank127): the design's `ranks:` bound too.
MAX_RANKS = 128  # processes per trial on one machine (torchrun --nproc-per-node)

# Record kinds.
START, LOG, ITEMS, EVENT, HEARTBEAT, FINISH, STEP, PHASES = (
    "start", "log", "items", "event", "heartbeat", "finish", "step", "phases")
KINDS = (START, LOG, ITEMS, EVENT, HEARTBEAT, FINISH, STEP, PHASES)

# The phases of a training step labcoat times itself (docs/phases.md); a `run.phase(name)`
# adds any other name. WAIT_PHASES are time spent waiting for other ranks: a rank slow there
# is a symptom of another rank's slow compute, never a cause by itself.
STEP_PHASES = ("data", "forward", "backward", "optimizer", "comm", "eval", "checkpoint", "other")
WAIT_PHASES = ("comm",)
# Not a phase: a step's time on a run queue (other processes held the CPUs), read from Linux
# schedstat; it overlaps the phases, and it tells a busy machine from a slower run.
CPU_WAIT = "cpu_wait"
PHASE_POINTS = "phase_s/"  # phases records in the store: metric points phase_s/<phase>/rank<r>

# Event levels, lowest first.
LEVELS = ("debug", "info", "warning", "error", "critical")


class Events:
    """Names of the events labcoat's own code writes (a user's `run.event` may use any)."""

    GUARD_ALERT = "guard.alert"
    GUARD_PROFILE = "guard.profile"
    GUARD_STARTED = "guard.started"
    GUARD_STOPPED = "guard.stopped"
    CHECKPOINT_SAVED = "checkpoint.saved"
    CHECKPOINT_RESTORED = "checkpoint.restored"
    CHECKPOINT_FRESH_START = "checkpoint.fresh_start"
    CHECKPOINT_DELETED = "checkpoint.deleted"
    CHECKPOINT_CORRUPT = "checkpoint.corrupt"
    CHECKPOINT_FAILED = "checkpoint.failed"
    REPLAY_RESTORED = "replay.restored"
    REPLAY_DONE = "replay.done"
    EVAL_SUBSET = "eval.subset"
    EVAL_BUDGET = "eval.budget"
    # Written by the SDK: a value logged again at a step this run already logged (the store
    # keeps the later one), and init() arguments the runner's identity overrode.
    LOG_OVERWRITTEN = "log.overwritten"
    INIT_OVERRIDDEN = "init.overridden"
    # Written by the runner into the store (not into journals).
    LOG_LINE = "log"
    JOURNAL_INVALID = "journal.invalid"
    RANK_FAILED = "rank.failed"
    RANK_STRAGGLER = "rank.straggler"
    # A phase of a step got slower and stayed slow (labcoat.monitor's slow-step alarm; also
    # an alert row), and the short torch.profiler window captured on it in the trial.
    PHASE_SLOW = "phase.slow"
    PHASE_PROFILE = "phase.profile"


def rank_journal(journal: str | os.PathLike[str], rank: int) -> Path:
    """The journal rank `rank` of a multi-rank trial writes, beside rank 0's `journal`."""
    path = Path(journal)
    return path if rank == 0 else path.with_name(f"{path.stem}-rank{rank}{path.suffix}")


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
