"""Ad-hoc runs: a plain script's `labcoat.init()` journal, recorded when it finishes."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from labcoat import store
from labcoat.errors import LabcoatError
from labcoat.runner._ingest import ingest_attempt
from labcoat.sdk import read_journal
from labcoat.store import Trial

ADHOC_HASH = "adhoc"


def ingest_adhoc(journal: Path, *, experiment: str, trial: str) -> None:
    """Record the finished ad-hoc journal as a new attempt of `trial` in `experiment`."""
    start = next((r for _, r in read_journal(journal).records if r["kind"] == "start"), {})
    db = store.open_store()
    try:
        with db.session() as session:
            exp, _ = store.get_or_create_experiment(
                session,
                name=experiment,
                design_yaml="",
                design_hash=ADHOC_HASH,
                require_same_design=False,
            )
            if exp.design_hash != ADHOC_HASH:
                raise LabcoatError(
                    f"experiment {experiment!r} was created by `labcoat run`; record this "
                    f"script under another name: labcoat.init(experiment=...). "
                    f"Its journal is kept at {journal}"
                )
            row = session.scalar(
                select(Trial).where(Trial.experiment_id == exp.id, Trial.key == trial)
            )
            if row is None:
                row = Trial(
                    key=trial,
                    arm=start.get("arm") or "main",
                    seed=start.get("seed"),
                    params=start.get("params") or {},
                    status="pending",
                )
                exp.trials.append(row)
                session.flush()
            attempt = store.start_attempt(
                session,
                row,
                run_dir=str(journal.parent),
                host=start.get("host") or "",
                pid=start.get("pid"),
            )
            progress = ingest_attempt(session, attempt)
            status = "done" if progress.finish_status == "done" else "failed"
            store.end_attempt(
                session,
                attempt,
                exit_code=None,
                trial_status=status,
                cause=f"ad-hoc run finished ({progress.finish_status or 'no finish'})",
            )
            session.commit()
    finally:
        db.close()
