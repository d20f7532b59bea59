"""Writes: experiments, trials, attempts and idempotent bulk upserts of journal rows.

Only the runner calls these (one writer per database).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Table, delete, insert, select, update
from sqlalchemy.orm import Session

from labcoat.errors import LabcoatError
from labcoat.store._models import (
    Alert,
    Attempt,
    Checkpoint,
    EvalItem,
    Event,
    Experiment,
    MetricPoint,
    MetricSeries,
    Trial,
    utcnow,
)
from labcoat.store._series import SeriesColumns


def get_or_create_experiment(
    session: Session,
    *,
    name: str,
    design_yaml: str,
    design_hash: str,
    design_path: str | None = None,
    require_same_design: bool = True,
) -> tuple[Experiment, bool]:
    """The experiment called `name`, created if new. Returns (experiment, created).

    An existing experiment with a different design is an error: results from two
    designs must not mix under one name.
    """
    # Insert first, then read: two processes creating the same name at once (ad-hoc scripts
    # finishing together on a shared store) get one row, neither a unique-constraint error
    # (a read-then-insert would let both see "absent" and one fail on the constraint).
    insert = _insert_for(session)
    created = session.execute(
        insert(Experiment.__table__)
        .values(name=name, design_yaml=design_yaml, design_hash=design_hash,
                design_path=design_path, created_at=utcnow())
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(Experiment.__table__.c.id)
    ).first() is not None
    experiment = session.scalar(select(Experiment).where(Experiment.name == name))
    if created:
        return experiment, True
    if require_same_design and experiment.design_hash != design_hash:
        raise LabcoatError(
            f"experiment {name!r} already exists with a different design "
            f"(recorded {experiment.design_hash[:12]}, this file {design_hash[:12]}); "
            "give the changed design a new `name:` so both results stay interpretable"
        )
    return experiment, False


def add_missing_trials(session: Session, experiment: Experiment, specs: Iterable[Any]) -> None:
    """Create a pending trial for each TrialSpec whose key is not recorded yet."""
    existing = {t.key for t in experiment.trials}
    for spec in specs:
        if spec.key not in existing:
            experiment.trials.append(
                Trial(
                    key=spec.key,
                    arm=spec.arm,
                    seed=spec.seed,
                    params=dict(spec.params),
                    command=list(spec.command),
                    factors=dict(getattr(spec, "factors", {})) or None,
                    scale=getattr(spec, "scale", None),
                    status="pending",
                )
            )
    session.flush()


def start_attempt(
    session: Session, trial: Trial, *, run_dir: str, host: str, pid: int | None = None
) -> Attempt:
    number = max((a.number for a in trial.attempts), default=0) + 1
    attempt = Attempt(
        trial=trial,
        number=number,
        run_dir=run_dir,
        host=host,
        pid=pid,
        journal_offset=0,
        journal_line=0,
    )
    session.add(attempt)
    trial.status = "running"
    session.flush()
    return attempt


def end_attempt(
    session: Session, attempt: Attempt, *, exit_code: int | None, cause: str, trial_status: str
) -> None:
    attempt.exit_code = exit_code
    attempt.cause = cause
    attempt.ended_at = utcnow()
    attempt.trial.status = trial_status
    session.flush()


def upsert_metric_points(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """rows: {trial_id, attempt_id, name, step, value, time}; a later value for the same
    (trial, name, step) replaces the earlier one. A metric held as a whole series
    (`insert_metric_series`) becomes rows first, so the new points join it."""
    _series_to_rows(session, {(r["trial_id"], r["name"]) for r in rows})
    _upsert(
        session,
        MetricPoint.__table__,
        rows,
        keys=("name", "trial_id", "step"),
        update=("value", "time", "attempt_id"),
    )


def insert_metric_series(session: Session, trial_id: int, attempt_id: int | None,
                         metrics: Mapping[str, Mapping[int, tuple[float, float | None]]]
                         ) -> None:
    """Store each metric of one trial as one `metric_series` row: step -> (value, time)
    mappings or `SeriesColumns`. The trial must hold none of these metrics yet (see
    `delete_metrics`): a (trial, name) lives in one table only."""
    rows = []
    for name, series in metrics.items():
        columns = SeriesColumns.of(series)
        if not len(columns):
            continue
        steps, values, times = columns.to_bytes()
        rows.append({"trial_id": trial_id, "attempt_id": attempt_id, "name": name,
                     "points": len(columns), "first_step": int(columns.steps[0]),
                     "last_step": int(columns.steps[-1]), "step_array": steps,
                     "value_array": values, "time_array": times})
    if session.get_bind().dialect.name == "postgresql":
        rows = _last_per_key(_postgres_safe(MetricSeries.__table__, rows), ("trial_id", "name"))
    if rows:
        session.connection().execute(insert(MetricSeries.__table__), rows)


def delete_metrics(session: Session, trial_id: int, names: Sequence[str]) -> None:
    """Every point of these metrics of one trial, rows and series."""
    for start in range(0, len(names), 500):  # (name, trial_id): the unique index's prefix
        chunk = list(names[start:start + 500])
        for table in (MetricPoint.__table__, MetricSeries.__table__):
            session.execute(delete(table).where(table.c.name.in_(chunk),
                                                table.c.trial_id == trial_id))


def _series_to_rows(session: Session, pairs: set[tuple[int, str]]) -> None:
    """The (trial, name) series among `pairs` rewritten as metric_point rows."""
    trial_ids = sorted({trial_id for trial_id, _ in pairs})
    if not trial_ids:
        return
    names = sorted({name for _, name in pairs})
    held = session.execute(select(MetricSeries.__table__).where(
        MetricSeries.trial_id.in_(trial_ids), MetricSeries.name.in_(names))).all()
    for row in held:
        if (row.trial_id, row.name) not in pairs:
            continue
        columns = SeriesColumns.from_bytes(row.step_array, row.value_array, row.time_array)
        _upsert(session, MetricPoint.__table__,
                [{"trial_id": row.trial_id, "attempt_id": row.attempt_id, "name": row.name,
                  "step": step, "value": value, "time": time}
                 for step, (value, time) in columns.items()],
                keys=("name", "trial_id", "step"), update=("value", "time", "attempt_id"))
        session.execute(delete(MetricSeries).where(MetricSeries.id == row.id))


def upsert_eval_items(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """rows: {trial_id, attempt_id, step, task, item, variant, score}."""
    keys = ("trial_id", "task", "step", "item", "variant")
    _upsert(session, EvalItem.__table__, rows, keys=keys, update=("score", "attempt_id"))


def insert_events(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """rows with (attempt_id, stream, seq) already recorded are skipped (idempotent)."""
    rows = [{"stream": "journal", **r} for r in rows]
    _upsert(session, Event.__table__, rows, keys=("attempt_id", "stream", "seq"), update=())


def insert_alerts(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    _upsert(session, Alert.__table__, rows, keys=("attempt_id", "seq"), update=())


def upsert_checkpoints(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    _upsert(
        session,
        Checkpoint.__table__,
        rows,
        keys=("trial_id", "step"),
        update=(
            "attempt_id",
            "path",
            "bytes",
            "hash",
            "verified",
            "stall_s",
            "write_s",
            "deleted",
            "time",
        ),
    )


def mark_checkpoints_deleted(session: Session, trial_id: int, steps: Sequence[int]) -> None:
    """Retention removed these checkpoints from disk; their rows stay, marked deleted."""
    if steps:
        session.execute(
            update(Checkpoint)
            .where(Checkpoint.trial_id == trial_id, Checkpoint.step.in_(steps))
            .values(deleted=True)
        )


def _last_per_key(rows: Sequence[dict[str, Any]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    # PostgreSQL refuses an upsert batch that touches one row twice; keep the last.
    return list({tuple(r[k] for k in key): r for r in rows}.values())


def _upsert(
    session: Session,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    keys: tuple[str, ...],
    update: tuple[str, ...],
) -> None:
    """INSERT ... ON CONFLICT (keys) DO UPDATE SET update (DO NOTHING if update is empty),
    one statement for all rows. A batch that names one key twice ends as if the rows had
    been written one after another: the last row's values win where they update, the
    first row stays where they do not."""
    if not rows:
        return
    dialect = session.get_bind().dialect
    if dialect.name == "sqlite" and _sqlite_upsert(session, table, rows, keys, update):
        return
    insert = _insert_for(session)
    if dialect.name == "postgresql":
        rows = _last_per_key(_postgres_safe(table, rows), keys)
    stmt = insert(table)
    if update:
        stmt = stmt.on_conflict_do_update(
            index_elements=list(keys), set_={c: stmt.excluded[c] for c in update}
        )
    else:
        stmt = stmt.on_conflict_do_nothing(index_elements=list(keys))
    session.execute(stmt, list(rows))


def _sqlite_upsert(session: Session, table: Table, rows: Sequence[dict[str, Any]],
                   keys: tuple[str, ...], update: tuple[str, ...]) -> bool:
    """The upsert as one DBAPI executemany of plain tuples: SQLite applies the rows in
    order (so duplicates end as `_upsert` says), and skipping SQLAlchemy's per-row
    parameter compilation makes ingesting 100,000 metric points ~3x faster. Columns'
    bind processors (NaN -> NULL) still apply. False, with nothing written, for rows
    whose keys differ (the generic path handles them)."""
    columns = tuple(rows[0])
    first = rows[0].keys()
    if any(r.keys() != first for r in rows):
        return False
    dialect = session.get_bind().dialect
    quote = dialect.identifier_preparer.quote
    processors = [(i, p) for i, c in enumerate(columns)
                  if (p := table.c[c].type.dialect_impl(dialect).bind_processor(dialect))]
    conflict = (f"DO UPDATE SET {', '.join(f'{quote(c)} = excluded.{quote(c)}' for c in update)}"
                if update else "DO NOTHING")
    sql = (f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in columns)}) "
           f"VALUES ({', '.join('?' * len(columns))}) "
           f"ON CONFLICT ({', '.join(quote(k) for k in keys)}) {conflict}")
    pick = operator.itemgetter(*columns)  # in the first row's order, whatever each row's
    params = [pick(row) for row in rows] if len(columns) > 1 else [(pick(r),) for r in rows]
    for i, process in processors:  # one column at a time: ~2x faster than row by row
        params = [(*values[:i], process(values[i]), *values[i + 1:]) for values in params]
    if session.autoflush:
        session.flush()  # as session.execute would: pending rows first (foreign keys)
    session.connection().exec_driver_sql(sql, params)
    return True


def _insert_for(session: Session):
    """The dialect's INSERT, which has ON CONFLICT (the generic one does not)."""
    dialect = session.get_bind().dialect.name
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:  # pragma: no cover - guarded by open_store's supported backends
        raise LabcoatError(f"the {dialect} database is not supported; use SQLite or PostgreSQL")
    return insert


def _postgres_safe(table: Table, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows PostgreSQL accepts where SQLite accepts anything: a NUL byte (a trial printing
    binary) becomes U+FFFD, and text longer than its column (a 300-character metric name)
    is cut to fit, instead of failing the whole batch and stopping the runner."""
    limits = {c.name: getattr(c.type, "length", None) for c in table.columns}
    cleaned = []
    for row in rows:
        fixed = None
        for key, value in row.items():
            if not isinstance(value, str):
                continue
            limit = limits.get(key)
            if "\x00" in value or (limit and len(value) > limit):
                fixed = fixed or dict(row)
                value = value.replace("\x00", "\ufffd")
                fixed[key] = value[:limit] if limit else value
        cleaned.append(fixed or row)
    return cleaned


def record_provenance(session: Session, attempt: Attempt, recorded: dict[str, Any]) -> None:
    """Keep what `attempt` was launched with (see `labcoat.runner._provenance`)."""
    import time

    from labcoat.store._models import Provenance

    session.add(Provenance(trial_id=attempt.trial_id, attempt_id=attempt.id,
                           recorded=recorded, time=time.time()))
    session.flush()
