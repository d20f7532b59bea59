"""Ad-hoc runs: a plain script's `labcoat.init()` journals, ingested by the reading side.

The trial only journals (under ``$LABCOAT_HOME/adhoc/<experiment>/<trial>/<run>/``);
the read commands (`labcoat status`, `report`, `ui`...) call `ingest_adhoc_runs`
before they read, which records each finished journal not yet in the store as a
new attempt. Idempotent: a journal whose run directory is already an attempt is
skipped, so any number of readers may call it. A journal without its finish
record waits while its process runs; once that process is gone (killed, or
crashed hard: SIGKILL and the OOM killer skip the exit hook), it is recorded as
a failed attempt holding every complete line, rather than waiting forever.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from labcoat import environment as env
from labcoat import journal as fmt
from labcoat import store
from labcoat.errors import LabcoatError
from labcoat.runner._ingest import ingest_attempt
from labcoat.store import Attempt, Trial

ADHOC_HASH = "adhoc"
_LOCK = "(ad-hoc ingestion)"  # never an experiment name (spec.NAME allows no parentheses)
_THREAD = threading.Lock()  # the store's lock is per process; threads of one (the UI) too


def ingest_adhoc_runs(db: store.Store, home: Path | None = None) -> list[str]:
    """Record every finished ad-hoc journal under `home` (default: the labcoat home) that
    the store does not hold yet; returns their "experiment/trial" names, oldest first.

    One reader at a time ingests (a lock in the store, like a runner's); a reader that
    finds it held skips, since the holder records the same journals.
    """
    root = (home or env.home()) / "adhoc"
    if not root.is_dir():
        return []
    journals = sorted(root.glob(f"*/*/*/{fmt.JOURNAL_NAME}"), key=lambda p: p.stat().st_mtime)
    if not journals or not _THREAD.acquire(blocking=False):
        return []
    try:
        with store.experiment_lock(db, _LOCK), db.session() as session:
            return _ingest_new(session, journals)
    except LabcoatError:  # another reader holds the lock and ingests them
        return []
    finally:
        _THREAD.release()


def _ingest_new(session: Session, journals: list[Path]) -> list[str]:
    known = set(session.scalars(select(Attempt.run_dir).where(
        Attempt.run_dir.in_([str(j.parent) for j in journals]))))
    recorded = []
    for journal in journals:
        if str(journal.parent) in known:
            continue
        gone = None if _finished(journal) else _writer_gone(journal)
        if gone is False:
            continue  # still running: recorded once it finishes
        experiment, trial = journal.parent.parent.parent.name, journal.parent.parent.name
        try:
            ingest_adhoc(session, journal, experiment=experiment, trial=trial)
        except LabcoatError as e:  # one misnamed run must not hide the others
            session.rollback()
            print(f"labcoat: {e}", file=sys.stderr, flush=True)
            continue
        recorded.append(f"{experiment}/{trial}" + (f" ({gone})" if gone else ""))
    return recorded


def ingest_adhoc(session: Session, journal: Path, *, experiment: str, trial: str) -> None:
    """Record the finished ad-hoc journal as a new attempt of `trial` in `experiment`."""
    start, end = _start_and_finish(journal)
    exp, _ = store.get_or_create_experiment(
        session, name=experiment, design_yaml="", design_hash=ADHOC_HASH,
        require_same_design=False)
    if exp.design_hash != ADHOC_HASH:
        raise LabcoatError(
            f"experiment {experiment!r} was created by `labcoat run`; record this script "
            f"under another name: labcoat.init(experiment=...). Its journal is kept at "
            f"{journal}")
    row = session.scalar(select(Trial).where(Trial.experiment_id == exp.id, Trial.key == trial))
    if row is None:
        row = Trial(key=trial, arm=start.get("arm") or "main", seed=start.get("seed"),
                    params=start.get("params") or {}, status="pending")
        exp.trials.append(row)
        session.flush()
    attempt = store.start_attempt(session, row, run_dir=str(journal.parent),
                                  host=start.get("host") or "", pid=start.get("pid"))
    progress = ingest_attempt(session, attempt)
    status = "done" if progress.finish_status == "done" else "failed"
    cause = (f"ad-hoc run finished ({progress.finish_status})" if progress.finish_status
             else f"ad-hoc run: {_writer_gone(journal) or 'no finish record'}")
    store.end_attempt(session, attempt, exit_code=None, trial_status=status, cause=cause)
    # Ingested after the fact: the attempt's times are the journal's, not the reader's.
    if isinstance(start.get("time"), int | float):
        attempt.started_at = datetime.fromtimestamp(start["time"], UTC)
    ended = end.get("time", attempt.last_record_time)
    if isinstance(ended, int | float):
        attempt.ended_at = datetime.fromtimestamp(ended, UTC)
    session.commit()


def _start_and_finish(journal: Path) -> tuple[dict, dict]:
    """The journal's first start record and last finish record ({} where there is none).

    They are its first and last lines as the SDK writes it, read alone (the whole journal
    is read once, by the ingestion); any other layout is searched line by line.
    """
    with open(journal, "rb") as f:
        head = f.readline()
        f.seek(max(0, f.seek(0, 2) - 4096))
        tail = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    first, last = (_record(line) for line in (head, tail))
    if first.get("kind") == fmt.START and last.get("kind") == fmt.FINISH:
        return first, last
    records = [r for _, r in fmt.read_journal(journal).records]
    return (next((r for r in records if r["kind"] == fmt.START), {}),
            next((r for r in reversed(records) if r["kind"] == fmt.FINISH), {}))


def _record(raw: bytes) -> dict:
    try:
        record = json.loads(raw)
    except ValueError:  # not JSON, or not UTF-8
        return {}
    return record if isinstance(record, dict) else {}


def _writer_gone(journal: Path) -> str | None | bool:
    """Why an unfinished journal's run is over ("process N ended without ..."), or False
    while its process may still be writing it (alive, or on another host: it waits)."""
    with open(journal, "rb") as f:
        start = _record(f.readline())
    pid, host = start.get("pid"), start.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool) or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"process {pid} ended without finishing (killed?)"
    except (PermissionError, OverflowError, ValueError):  # another user's process
        pass
    return False


def _finished(journal: Path) -> bool:
    """Whether the journal's run has ended: its finish record is the last line (read from
    the end, so a long journal still being written costs one small read)."""
    with open(journal, "rb") as f:
        f.seek(max(0, f.seek(0, 2) - 4096))
        tail = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return f'"kind":"{fmt.FINISH}"'.encode() in tail
