"""Writes for runs another tracker recorded (MLflow, W&B, TensorBoard): each external run
becomes one finished trial (arm, seed) of an experiment whose design the import wrote.

Re-importing the same run replaces its points with the same points (idempotent); a
different run mapped onto a trial that already holds one is refused unless the caller
asks to replace it, so nothing imported earlier is lost without a word.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from labcoat.errors import LabcoatError
from labcoat.store._models import Attempt, Experiment, Trial, utcnow
from labcoat.store._queries import metric_names
from labcoat.store._series import SeriesColumns
from labcoat.store._write import (
    delete_metrics,
    get_or_create_experiment,
    insert_events,
    insert_metric_series,
)

RUNS_IMPORTED_HASH = "imported-runs"


def import_experiment(session: Session, name: str) -> tuple[Experiment, bool]:
    """The experiment `name` for imported runs, created if new (its design is set by the
    caller). Returns (experiment, created); an experiment `labcoat run`, an ad-hoc script
    or an item-results import made is refused: their results must not mix."""
    exp, created = get_or_create_experiment(session, name=name, design_yaml="",
                                            design_hash=RUNS_IMPORTED_HASH,
                                            require_same_design=False)
    if not created and exp.design_hash != RUNS_IMPORTED_HASH:
        raise LabcoatError(f"experiment {name!r} already exists and holds other results "
                           f"(not runs imported from a tracker); import into another "
                           "--experiment")
    return exp, created


@dataclass(frozen=True, kw_only=True)
class RunImport:
    """One external run to store as the finished trial `key` of an experiment.

    metrics: metric -> step -> (value, unix time or None), one value per (metric, step),
    as a mapping or `SeriesColumns`. source: {"tool", "run", "path", ...}, kept as the
    import event's data; `source["run"]` identifies the run."""

    key: str
    arm: str
    seed: int
    params: dict[str, Any]
    source: dict[str, Any]
    metrics: Mapping[str, Mapping[int, tuple[float, float | None]]]


def record_run_imports(session: Session, experiment: Experiment, runs: Sequence[RunImport],
                       *, replace: bool = False) -> list[str]:
    """Store each run as the finished trial `run.key` of `experiment`, its metrics as whole
    series. Returns each run's outcome: "new", "same" (the run was imported before: its
    points are replaced by these) or "replaced" (another run held the trial and `replace`
    was given). Every run is checked before anything is written; trials, attempts and
    events are flushed together (six flushes per run cost 0.36 s for 100 runs)."""
    held = {trial.key: trial for trial in experiment.trials}
    outcomes = [_outcome(experiment, held.get(run.key), run, replace) for run in runs]
    trials = []
    for run in runs:
        trial = held.get(run.key)
        if trial is None:
            trial = Trial(key=run.key, arm=run.arm, seed=run.seed, params={}, status="done")
            experiment.trials.append(trial)
        else:
            names = sorted(set(metric_names(session, [trial.id])) | set(run.metrics))
            delete_metrics(session, trial.id, names)
            trial.arm, trial.seed, trial.status = run.arm, run.seed, "done"
        trials.append(trial)
    session.flush()
    earlier = _with_attempts(session, trials)
    attempts = [trial.attempts[0] if trial.id in earlier else
                Attempt(trial=trial, number=1, host="import", journal_offset=0, journal_line=0)
                for trial in trials]
    session.add_all(attempts)
    session.flush()
    events, now = [], time.time()
    for run, trial, attempt in zip(runs, trials, attempts, strict=True):
        imports = int((trial.params or {}).get("imports", 0)) + 1  # each import adds an event
        trial.params = {**run.params, "imported_run": run.source["run"], "imports": imports}
        source = run.source
        metrics = {name: SeriesColumns.of(series) for name, series in run.metrics.items()}
        attempt.run_dir = str(source["path"])
        attempt.last_step = max((int(c.steps[-1]) for c in metrics.values() if len(c)),
                                default=None)
        attempt.exit_code, attempt.ended_at = None, utcnow()
        attempt.cause = f"imported from {source['tool']} run {source['run']} ({source['path']})"
        insert_metric_series(session, trial.id, attempt.id, metrics)
        count = sum(map(len, metrics.values()))
        events.append({"trial_id": trial.id, "attempt_id": attempt.id, "seq": imports,
                       "step": 0, "level": "info", "kind": "import",
                       "message": f"imported {source['tool']} run {source['run']}: "
                                  f"{count} points", "data": source, "time": now})
    insert_events(session, events)
    session.flush()
    return outcomes


def _outcome(experiment: Experiment, trial: Trial | None, run: RunImport, replace: bool) -> str:
    if trial is None:
        return "new"
    before = (trial.params or {}).get("imported_run")
    if before == run.source["run"]:
        return "same"
    if not replace:
        source = run.source
        raise LabcoatError(
            f"{experiment.name}/{run.key} already holds {source['tool']} run {before} "
            f"(arm {run.arm}, seed {run.seed}); run {source['run']} ({source['path']}) maps to "
            "the same arm and seed. Nothing was imported. Pass --replace to replace it, or "
            "import into another --experiment")
    return "replaced"


def _with_attempts(session: Session, trials: Sequence[Trial]) -> set[int]:
    """Ids of those trials that have an attempt already (an earlier import's), in one query
    rather than one lazy load per trial."""
    return set(session.scalars(select(Attempt.trial_id).distinct().where(
        Attempt.trial_id.in_([t.id for t in trials]))))
