"""Writes for results computed elsewhere (lm-eval-harness, Inspect AI): each import is one
finished attempt of a trial (one per arm and seed) of an experiment without a design."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from labcoat.errors import LabcoatError
from labcoat.store._models import EvalItem, Trial
from labcoat.store._write import (
    end_attempt,
    get_or_create_experiment,
    insert_events,
    start_attempt,
    upsert_eval_items,
)

IMPORTED_HASH = "imported"


def record_import(session: Session, *, experiment: str, arm: str, seed: int | None,
                  rows: Sequence[dict[str, Any]], source: dict[str, Any]) -> Trial:
    """Store per-item scores as the trial `arm` (or `arm-sSEED`) of `experiment`.

    rows: {task, item, score}; step 0, no variant. A second import of the same arm and
    seed replaces its items (the trial keeps one set of results) and is a new attempt.
    source: what was read (paths, format, metric), kept as the import event's data.
    """
    exp, _ = get_or_create_experiment(session, name=experiment, design_yaml="",
                                      design_hash=IMPORTED_HASH, require_same_design=False)
    if exp.design_yaml:
        raise LabcoatError(f"experiment {experiment!r} was created by `labcoat run` from a "
                           "design; import results under another name (--experiment)")
    key = arm if seed is None else f"{arm}-s{seed}"
    trial = session.scalar(select(Trial).where(Trial.experiment_id == exp.id, Trial.key == key))
    if trial is None:
        trial = Trial(key=key, arm=arm, seed=seed, params={}, status="pending")
        exp.trials.append(trial)
        session.flush()
    attempt = start_attempt(session, trial, run_dir="", host="import")
    session.execute(delete(EvalItem).where(EvalItem.trial_id == trial.id))
    upsert_eval_items(session, [{"trial_id": trial.id, "attempt_id": attempt.id, "step": 0,
                                 "variant": "", **r} for r in rows])
    insert_events(session, [{"trial_id": trial.id, "attempt_id": attempt.id, "seq": 0,
                             "step": 0, "level": "info", "kind": "import",
                             "message": f"imported {len(rows)} item scores",
                             "data": source, "time": time.time()}])
    end_attempt(session, attempt, exit_code=None, trial_status="done",
                cause=f"imported from {', '.join(source.get('paths', []))}")
    return trial
