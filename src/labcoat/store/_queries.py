"""Reads used by the CLI, the report and the runner."""

from __future__ import annotations

import heapq
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, selectinload

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
)
from labcoat.store._series import SeriesColumns


def find_experiment(session: Session, ref: str) -> Experiment:
    """An experiment by name (or numeric id); the error lists what exists."""
    query = select(Experiment).options(selectinload(Experiment.trials).selectinload(Trial.attempts))
    experiment = session.scalar(query.where(Experiment.name == ref))
    if experiment is None and ref.isdigit():
        experiment = session.scalar(query.where(Experiment.id == int(ref)))
    if experiment is None:
        names = session.scalars(select(Experiment.name).order_by(Experiment.id)).all()
        known = ", ".join(names[-10:]) if names else "none yet; run `labcoat run design.yaml`"
        raise LabcoatError(f"no experiment named {ref!r} in the store {_where(session)} "
                           f"(known: {known}); LABCOAT_HOME or LABCOAT_DB chooses the store")
    return experiment


class TrialNotFound(LabcoatError, LookupError):
    """An experiment has no trial with the key asked for (the message lists its keys)."""


def find_trial(experiment: Experiment, key: str) -> Trial:
    """The trial of `experiment` with this key; the error lists the keys there are. The one
    lookup every verb (diagnose, logs, rerun, replay, the dashboard) uses."""
    for trial in experiment.trials:
        if trial.key == key:
            return trial
    keys = [t.key for t in experiment.trials]
    listed = ", ".join(keys[:12]) + (f", ... ({len(keys)} in all)" if len(keys) > 12 else "")
    raise TrialNotFound(f"experiment {experiment.name!r} has no trial {key!r} "
                        f"(trials: {listed or 'none yet'}); see `labcoat show "
                        f"{experiment.name}`")


def _where(session: Session) -> str:
    """The store a session reads, for messages: the SQLite file, or the URL without its
    password."""
    url = session.get_bind().url
    if url.get_backend_name() == "sqlite" and url.database:
        return str(url.database)
    return url.render_as_string(hide_password=True)


def list_experiments(session: Session) -> list[Experiment]:
    query = select(Experiment).options(selectinload(Experiment.trials)).order_by(Experiment.id)
    return list(session.scalars(query))


def experiment_status(experiment: Experiment) -> str:
    """running if any trial runs; failed if any failed; done if all done; else pending."""
    statuses = {t.status for t in experiment.trials}
    for status in ("running", "failed"):
        if status in statuses:
            return status
    if statuses == {"done"}:
        return "done"
    return "pending"


def metric_points(
    session: Session, trial_ids: Sequence[int], name: str | None = None
) -> list[MetricPoint]:
    """Points of metric `name` (all metrics if None) for these trials, by trial and step."""
    query = select(MetricPoint).where(MetricPoint.trial_id.in_(trial_ids))
    if name is not None:
        query = query.where(MetricPoint.name == name)
    points = list(
        session.scalars(query.order_by(MetricPoint.trial_id, MetricPoint.name, MetricPoint.step))
    )
    held = _whole_series(session, trial_ids, name)
    if held:  # not in the session: reading them changes nothing
        points += [MetricPoint(trial_id=t, attempt_id=a, name=n, step=step, value=v, time=time)
                   for t, a, n, columns in held for step, (v, time) in columns.items()]
        points.sort(key=lambda p: (p.trial_id, p.name, p.step))
    return points


def _whole_series(session: Session, trial_ids: Sequence[int], name: str | None
                  ) -> list[tuple[int, int | None, str, SeriesColumns]]:
    """(trial_id, attempt_id, name, columns) of the metrics these trials hold as whole
    series (`MetricSeries`: imports), by trial and name. A (trial, name) held so has no
    metric_point rows, so each query below adds these to its rows."""
    query = select(MetricSeries.trial_id, MetricSeries.attempt_id, MetricSeries.name,
                   MetricSeries.step_array, MetricSeries.value_array, MetricSeries.time_array
                   ).where(MetricSeries.trial_id.in_(list(trial_ids)))
    if name is not None:
        query = query.where(MetricSeries.name == name)
    return [(t, a, n, SeriesColumns.from_bytes(steps, values, times))
            for t, a, n, steps, values, times in
            session.execute(query.order_by(MetricSeries.trial_id, MetricSeries.name))]


def metric_rows(
    session: Session, trial_ids: Sequence[int], name: str | None = None
) -> Iterator[tuple[int, str, int, float]]:
    """(trial_id, name, step, value) of `metric_points`, in its order, streamed as plain
    tuples (no ORM objects: `labcoat export` of millions of points in bounded memory)."""
    query = select(MetricPoint.trial_id, MetricPoint.name, MetricPoint.step, MetricPoint.value
                   ).where(MetricPoint.trial_id.in_(trial_ids))
    if name is not None:
        query = query.where(MetricPoint.name == name)
    query = query.order_by(MetricPoint.trial_id, MetricPoint.name, MetricPoint.step)
    rows = (row for part in session.execute(query.execution_options(yield_per=10_000))
            .partitions() for row in part)
    held = session.execute(select(MetricSeries.id).where(
        MetricSeries.trial_id.in_(list(trial_ids)),
        *([MetricSeries.name == name] if name is not None else [])
    ).order_by(MetricSeries.trial_id, MetricSeries.name)).scalars().all()
    # (trial, name) pairs are in one table or the other: a merge of two sorted streams
    yield from heapq.merge(rows, _series_rows(session, held), key=_ROW_KEY) if held else rows


_ROW_KEY = operator.itemgetter(0, 1, 2)  # trial_id, name, step


def _series_rows(session: Session, ids: Sequence[int]) -> Iterator[tuple[int, str, int, float]]:
    """The points of these series as (trial_id, name, step, value), one series in memory."""
    for series_id in ids:
        trial_id, name, steps, values = session.execute(
            select(MetricSeries.trial_id, MetricSeries.name, MetricSeries.step_array,
                   MetricSeries.value_array).where(MetricSeries.id == series_id)).one()
        columns = SeriesColumns.from_bytes(steps, values, None)
        for step, value in zip(columns.steps.tolist(), columns.values.tolist(), strict=True):
            yield trial_id, name, step, value


def last_values(session: Session, trial_ids: Sequence[int], name: str) -> dict[int, float]:
    """The value of `name` at each trial's largest logged step."""
    last = (
        select(MetricPoint.trial_id, func.max(MetricPoint.step).label("step"))
        .where(MetricPoint.name == name, MetricPoint.trial_id.in_(trial_ids))
        .group_by(MetricPoint.trial_id)
        .subquery()
    )
    query = (
        select(MetricPoint.trial_id, MetricPoint.value)
        .join(last, (MetricPoint.trial_id == last.c.trial_id) & (MetricPoint.step == last.c.step))
        .where(MetricPoint.name == name)
    )
    values = {trial_id: value for trial_id, value in session.execute(query)}
    values.update({t: float(columns.values[-1])
                   for t, _, _, columns in _whole_series(session, trial_ids, name)})
    return values


def eval_items(session: Session, trial_ids: Sequence[int]) -> list[EvalItem]:
    query = select(EvalItem).where(EvalItem.trial_id.in_(trial_ids))
    return list(
        session.scalars(
            query.order_by(EvalItem.trial_id, EvalItem.task, EvalItem.step, EvalItem.item)
        )
    )


def final_eval_items(session: Session, trial_ids: Sequence[int]) -> list[EvalItem]:
    """Each trial's eval items at its last eval step (the step the verdict is judged on)."""
    return list(session.scalars(_at_final_step(select(EvalItem), trial_ids)))


def _at_final_step(query: Any, trial_ids: Sequence[int]) -> Any:
    """`query` over eval_item narrowed to each trial's last eval step (default variant)."""
    last = (
        select(EvalItem.trial_id, func.max(EvalItem.step).label("step"))
        .where(EvalItem.trial_id.in_(trial_ids), EvalItem.variant == "")
        .group_by(EvalItem.trial_id)
        .subquery()
    )
    return (
        query.join(last, (EvalItem.trial_id == last.c.trial_id) & (EvalItem.step == last.c.step))
        .where(EvalItem.variant == "")
        .order_by(EvalItem.trial_id, EvalItem.task, EvalItem.item)
    )


def variant_eval_items(session: Session, trial_ids: Sequence[int]) -> list[EvalItem]:
    """Eval items logged under a variant (e.g. a prompt template), each (trial, variant) at
    its last step."""
    last = (
        select(EvalItem.trial_id, EvalItem.variant, func.max(EvalItem.step).label("step"))
        .where(EvalItem.trial_id.in_(trial_ids), EvalItem.variant != "")
        .group_by(EvalItem.trial_id, EvalItem.variant)
        .subquery()
    )
    query = (
        select(EvalItem)
        .join(last, (EvalItem.trial_id == last.c.trial_id)
              & (EvalItem.variant == last.c.variant) & (EvalItem.step == last.c.step))
        .order_by(EvalItem.trial_id, EvalItem.variant, EvalItem.task, EvalItem.item)
    )
    return list(session.scalars(query))


def events(
    session: Session,
    trial_ids: Sequence[int],
    *,
    min_level: str | None = None,
    kind: str | None = None,
) -> list[Event]:
    """Events of these trials in order; optionally at or above a level, or of one kind."""
    query = select(Event).where(Event.trial_id.in_(trial_ids)).order_by(Event.id)
    if kind is not None:
        query = query.where(Event.kind == kind)
    rows = list(session.scalars(query))
    if min_level:
        order = ["debug", "info", "warning", "error", "critical"]
        rows = [e for e in rows if order.index(e.level) >= order.index(min_level)]
    return rows


def last_attempt(trial: Trial) -> Attempt | None:
    return trial.attempts[-1] if trial.attempts else None


def alerts(session: Session, trial_ids: Sequence[int]) -> list[Alert]:
    """Guard alerts of these trials, in the order they were raised."""
    query = select(Alert).where(Alert.trial_id.in_(trial_ids))
    return list(session.scalars(query.order_by(Alert.trial_id, Alert.step, Alert.id)))


def log_lines(session: Session, trial_ids: Sequence[int], *, rank: int | None = None
              ) -> list[Event]:
    """What the trials printed (events of kind "log"), in attempt and line order."""
    query = select(Event).where(Event.trial_id.in_(trial_ids), Event.kind == "log")
    if rank is not None:
        query = query.where(Event.rank == rank)
    return list(session.scalars(query.order_by(Event.trial_id, Event.attempt_id, Event.time,
                                               Event.stream, Event.seq)))


def provenance(session: Session, trial: Trial) -> list[tuple[int, dict]]:
    """(attempt number, recorded provenance) of each attempt of `trial` that has one, in order."""
    from labcoat.store._models import Provenance

    rows = session.execute(
        select(Attempt.number, Provenance.recorded)
        .join(Provenance, Provenance.attempt_id == Attempt.id)
        .where(Attempt.trial_id == trial.id)
        .order_by(Attempt.number)
    ).all()
    return [(number, recorded) for number, recorded in rows]


def verified_checkpoints(session: Session, trial: Trial) -> list:
    """The trial's verified checkpoints that retention has not deleted, by step."""
    from labcoat.store._models import Checkpoint

    query = select(Checkpoint).where(Checkpoint.trial_id == trial.id,
                                     Checkpoint.verified.is_(True),
                                     Checkpoint.deleted.is_(False))
    return list(session.scalars(query.order_by(Checkpoint.step)))


def metric_names(session: Session, trial_ids: Sequence[int]) -> list[str]:
    """The metric names these trials logged, sorted.

    A loose index scan: the distinct names of the whole table are walked through the
    (name, trial_id, step) index one seek at a time, then each is checked for these
    trials with one more seek, so the cost grows with the number of names, not points
    (a plain SELECT DISTINCT reads every point: seconds for millions of them).
    """
    if not trial_ids:
        return []
    walk = text(
        "WITH RECURSIVE names(name) AS ("
        " SELECT MIN(name) FROM metric_point"
        " UNION ALL"
        " SELECT (SELECT MIN(name) FROM metric_point WHERE name > names.name)"
        " FROM names WHERE names.name IS NOT NULL"
        ") SELECT name FROM names WHERE name IS NOT NULL"
    )
    names = [row[0] for row in session.execute(walk)]
    ids = list(trial_ids)
    logged = {name for name in names if session.scalar(
        select(MetricPoint.id).where(MetricPoint.name == name, MetricPoint.trial_id.in_(ids))
        .limit(1)) is not None}
    logged.update(session.scalars(select(MetricSeries.name).distinct()
                                  .where(MetricSeries.trial_id.in_(ids))))
    return sorted(logged)


def first_non_finite(session: Session, trial_ids: Sequence[int], name: str | None
                     ) -> dict[int, int]:
    """The first step at which each trial logged `name` (any metric if None) as NaN or
    +-inf (trials that never did are absent). NaN is stored as NULL; infinities as
    themselves."""
    huge = 1.7976931348623157e308
    query = (select(MetricPoint.trial_id, func.min(MetricPoint.step))
             .where(MetricPoint.trial_id.in_(list(trial_ids)),
                    MetricPoint.value.is_(None) | (MetricPoint.value > huge)
                    | (MetricPoint.value < -huge))
             .group_by(MetricPoint.trial_id))
    if name is not None:
        query = query.where(MetricPoint.name == name)
    first = {trial_id: step for trial_id, step in session.execute(query)}
    for trial_id, _, _, columns in _whole_series(session, trial_ids, name):
        bad = np.flatnonzero(~np.isfinite(columns.values))
        if len(bad):
            step = int(columns.steps[bad[0]])
            first[trial_id] = min(first.get(trial_id, step), step)
    return first


def metric_series(session: Session, trial_ids: Sequence[int], name: str
                  ) -> dict[int, tuple[list[int], list[float]]]:
    """Metric `name` of each trial as (steps, values) in step order (NaN kept as NaN).

    Plain columns, not ORM objects, through the (name, trial_id, step) index: a
    million points load several times faster than `metric_points`.
    """
    query = (select(MetricPoint.trial_id, MetricPoint.step, MetricPoint.value)
             .where(MetricPoint.name == name, MetricPoint.trial_id.in_(list(trial_ids)))
             .order_by(MetricPoint.trial_id, MetricPoint.step))
    out: dict[int, tuple[list[int], list[float]]] = {}
    for trial_id, step, value in session.execute(query):
        steps, values = out.setdefault(trial_id, ([], []))
        steps.append(step)
        values.append(value)
    held = _whole_series(session, trial_ids, name)
    for trial_id, _, _, columns in held:
        out[trial_id] = (columns.steps.tolist(), columns.values.tolist())
    return dict(sorted(out.items())) if held else out


def checkpoints(session: Session, trial_ids: Sequence[int]) -> list[Checkpoint]:
    """Checkpoints of these trials, by trial and step (deleted ones included, marked)."""
    query = select(Checkpoint).where(Checkpoint.trial_id.in_(list(trial_ids)))
    return list(session.scalars(query.order_by(Checkpoint.trial_id, Checkpoint.step)))



def metric_at_steps(session: Session, trial_ids: Sequence[int], name: str,
                    steps: Sequence[int]) -> list[tuple[int, int, float]]:
    """(trial_id, step, value) of metric `name` at these steps only, for these trials.

    One seek per (trial, step) in the (name, trial_id, step) index: 100 trials at 200
    steps read 20,000 points however long the runs are.
    """
    if not trial_ids or not steps:
        return []
    query = (select(MetricPoint.trial_id, MetricPoint.step, MetricPoint.value)
             .where(MetricPoint.name == name, MetricPoint.trial_id.in_(list(trial_ids)),
                    MetricPoint.step.in_([int(s) for s in steps]))
             .order_by(MetricPoint.trial_id, MetricPoint.step))
    found = [(t, s, v) for t, s, v in session.execute(query)]
    held = _whole_series(session, trial_ids, name)
    wanted = np.array([int(s) for s in steps], dtype=np.int64)
    for trial_id, _, _, columns in held:
        at = np.isin(columns.steps, wanted)
        found += [(trial_id, s, v) for s, v in zip(columns.steps[at].tolist(),
                                                   columns.values[at].tolist(), strict=True)]
    return sorted(found, key=lambda row: row[:2]) if held else found


def final_item_scores(session: Session, trial_ids: Sequence[int]
                      ) -> list[tuple[int, str, str, float]]:
    """(trial_id, task, item, score) of `final_eval_items` as plain rows: the report reads
    tens of thousands of them, and ORM objects cost most of its time."""
    query = _at_final_step(
        select(EvalItem.trial_id, EvalItem.task, EvalItem.item, EvalItem.score), trial_ids)
    return [(t, task, item, score) for t, task, item, score in session.execute(query)]
