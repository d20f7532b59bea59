"""Writes for results computed elsewhere (lm-eval-harness, Inspect AI): each import is one
finished attempt of a trial (one per arm and seed) of an experiment without a design."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from labcoat.errors import LabcoatError
from labcoat.store._models import EvalItem, Event, Trial
from labcoat.store._write import (
    end_attempt,
    get_or_create_experiment,
    insert_events,
    start_attempt,
    upsert_eval_items,
)

IMPORTED_HASH = "imported"


def record_import(session: Session, *, experiment: str, arm: str, seed: int | None,
                  rows: Sequence[dict[str, Any]], source: dict[str, Any],
                  replace: bool = False) -> Trial:
    """Store per-item scores as the trial `arm` (or `arm-sSEED`) of `experiment`.

    rows: {task, item, score}; step 0, no variant. Importing the same scores again is a new
    attempt that changes nothing; different scores for an arm and seed that already hold
    some are refused unless `replace` (the trial keeps one set of results: replacing them
    without a word would lose the first import).
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
    elif not replace:
        _refuse_different(session, experiment, trial, rows, source)
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


def _refuse_different(session: Session, experiment: str, trial: Trial,
                      rows: Sequence[dict[str, Any]], source: dict[str, Any]) -> None:
    held = {(i.task, i.item): i.score for i in session.scalars(
        select(EvalItem).where(EvalItem.trial_id == trial.id))}
    new = {(r["task"], r["item"]): float(r["score"]) for r in rows}
    if not held or _same_scores(held, new):
        return
    before = session.scalars(select(Event.data).where(
        Event.trial_id == trial.id, Event.kind == "import").order_by(Event.id.desc())).first()
    paths = ", ".join((before or {}).get("paths", [])) or "an earlier import"
    more = "" if trial.seed is not None else \
        f", --seed N to add this file as another seed of {trial.arm}"
    raise LabcoatError(
        f"{experiment}/{trial.key} already holds {len(held)} item scores (from {paths}); "
        f"{', '.join(map(str, source.get('paths', [])))} has {len(new)} different ones. "
        f"Nothing was imported. Pass --replace to replace them{more}, or import both files "
        "in one `labcoat import` to merge them")


def _same_scores(a: dict[tuple[str, str], float], b: dict[tuple[str, str], float]) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)
