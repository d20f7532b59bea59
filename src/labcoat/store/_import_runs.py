"""Writes for runs another tracker recorded (MLflow, W&B, TensorBoard): each external run
becomes one finished trial (arm, seed) of an experiment whose design the import wrote.

Re-importing the same run replaces its points with the same points (idempotent); a
different run mapped onto a trial that already holds one is refused unless the caller
asks to replace it, so nothing imported earlier is lost without a word.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from labcoat.errors import LabcoatError
from labcoat.store._models import Experiment, MetricPoint, Trial
from labcoat.store._queries import metric_names
from labcoat.store._write import (
    end_attempt,
    get_or_create_experiment,
    insert_events,
    start_attempt,
    upsert_metric_points,
)

RUNS_IMPORTED_HASH = "imported-runs"
_first, _second = itemgetter(0), itemgetter(1)


def import_experiment(session: Session, name: str) -> tuple[Experiment, bool]:
    """The experiment `name` for imported runs, created if new (its design is set by the
    caller). Returns (experiment, created); an experiment `labcoat run`, an ad-hoc script
    or an item-results import made is refused: their results must not mix. Call it on a
    store opened for the import: it enlarges the connection's page cache."""
    if session.get_bind().dialect.name == "sqlite":
        # A page cache that holds the index being extended (SQLite's default is 2 MiB): a
        # million points insert ~1.5x faster. The import's own connection, closed after.
        session.connection().exec_driver_sql("PRAGMA cache_size = -262144")  # 256 MiB
    exp, created = get_or_create_experiment(session, name=name, design_yaml="",
                                            design_hash=RUNS_IMPORTED_HASH,
                                            require_same_design=False)
    if not created and exp.design_hash != RUNS_IMPORTED_HASH:
        raise LabcoatError(f"experiment {name!r} already exists and holds other results "
                           f"(not runs imported from a tracker); import into another "
                           "--experiment")
    return exp, created


def record_run_import(session: Session, experiment: Experiment, *, key: str, arm: str,
                      seed: int, params: dict[str, Any], source: dict[str, Any],
                      metrics: Mapping[str, Mapping[int, tuple[float, float | None]]],
                      replace: bool = False) -> str:
    """Store one external run as the finished trial `key` of `experiment`.

    metrics: metric -> step -> (value, unix time or None), one value per (metric, step).
    source: {"tool", "run", "path", ...}, kept as the import event's data; `source["run"]`
    identifies the run. Returns "new", "same" (the run was imported before: its points are
    replaced by these) or "replaced" (another run held the trial and `replace` was given).
    """
    trial = session.scalar(select(Trial).where(Trial.experiment_id == experiment.id,
                                               Trial.key == key))
    outcome = "new"
    if trial is not None:
        before = (trial.params or {}).get("imported_run")
        outcome = "same" if before == source["run"] else "replaced"
        if outcome == "replaced" and not replace:
            raise LabcoatError(
                f"{experiment.name}/{key} already holds {source['tool']} run {before} "
                f"(arm {arm}, seed {seed}); run {source['run']} ({source['path']}) maps to the "
                "same arm and seed. Nothing was imported. Pass --replace to replace it, or "
                "import into another --experiment")
        old = metric_names(session, [trial.id])
        names = sorted(set(old) | set(metrics))
        for start in range(0, len(names), 500):  # (name, trial_id): the unique index's prefix
            chunk = names[start:start + 500]
            session.execute(delete(MetricPoint).where(MetricPoint.name.in_(chunk),
                                                      MetricPoint.trial_id == trial.id))
        trial.arm, trial.seed = arm, seed
    else:
        trial = Trial(key=key, arm=arm, seed=seed, params={}, status="pending")
        experiment.trials.append(trial)
        session.flush()
    imports = int((trial.params or {}).get("imports", 0)) + 1  # each import adds one event
    trial.params = {**params, "imported_run": source["run"], "imports": imports}
    attempt = trial.attempts[0] if trial.attempts else start_attempt(
        session, trial, run_dir=str(source["path"]), host="import")
    attempt.run_dir = str(source["path"])
    _insert_points(session, trial.id, attempt.id, metrics)
    attempt.last_step = max((max(s) for s in metrics.values() if s), default=None)
    count = sum(len(s) for s in metrics.values())
    insert_events(session, [{"trial_id": trial.id, "attempt_id": attempt.id,
                             "seq": imports,
                             "step": 0, "level": "info", "kind": "import",
                             "message": f"imported {source['tool']} run {source['run']}: "
                                        f"{count} points",
                             "data": source, "time": time.time()}])
    end_attempt(session, attempt, exit_code=None, trial_status="done",
                cause=f"imported from {source['tool']} run {source['run']} ({source['path']})")
    return outcome


def _insert_points(session: Session, trial_id: int, attempt_id: int,
                   metrics: Mapping[str, Mapping[int, tuple[float, float | None]]]) -> None:
    """The trial holds none of these (metric, step) now: a plain INSERT.

    On SQLite, on the session's own DBAPI connection (the same transaction): ROWS points
    per statement, the trial, attempt and metric bound once as ?1-?3 and each point's
    step, value and time after them. A million points insert ~2x faster than one row per
    statement (SQLite's per-statement work, not the B-tree, was half the time). 3 + 3 x
    ROWS parameters stay under SQLite's oldest limit of 999. NaN is stored as NULL, as
    NaNFloat does."""
    if session.get_bind().dialect.name != "sqlite":
        upsert_metric_points(session, [{"trial_id": trial_id, "attempt_id": attempt_id,
                                        "name": n, "step": s, "value": v, "time": t}
                                       for n, series in metrics.items()
                                       for s, (v, t) in series.items()])
        return
    session.flush()
    cursor = session.connection().connection.cursor()
    try:
        for name, series in metrics.items():
            head = (trial_id, attempt_id, name)
            flat = _interleaved(series)
            whole = len(flat) // (3 * ROWS) * 3 * ROWS
            cursor.executemany(_INSERT_MANY, (head + tuple(flat[i:i + 3 * ROWS])
                                              for i in range(0, whole, 3 * ROWS)))
            cursor.executemany(_INSERT_ONE, (head + tuple(flat[i:i + 3])
                                             for i in range(whole, len(flat), 3)))
    finally:
        cursor.close()


ROWS = 250
_COLUMNS = "INSERT INTO metric_point (trial_id, attempt_id, name, step, value, time) VALUES "
_INSERT_MANY = _COLUMNS + ", ".join(f"(?1, ?2, ?3, ?{4 + 3 * i}, ?{5 + 3 * i}, ?{6 + 3 * i})"
                                    for i in range(ROWS))
_INSERT_ONE = _COLUMNS + "(?1, ?2, ?3, ?4, ?5, ?6)"


def _interleaved(series: Mapping[int, tuple[float, float | None]]) -> list:
    """[step, value, time, step, value, time, ...], filled a column at a time in C."""
    values = list(map(_first, series.values()))
    if any(map(math.isnan, values)):
        values = [None if v != v else v for v in values]
    flat: list = [None] * (3 * len(values))
    flat[0::3] = series.keys()
    flat[1::3] = values
    flat[2::3] = map(_second, series.values())
    return flat
