"""Reads used by the CLI, the report and the runner."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from labcoat.errors import LabcoatError
from labcoat.store._models import Alert, Attempt, EvalItem, Event, Experiment, MetricPoint, Trial


def find_experiment(session: Session, ref: str) -> Experiment:
    """An experiment by name (or numeric id); the error lists what exists."""
    query = select(Experiment).options(selectinload(Experiment.trials).selectinload(Trial.attempts))
    experiment = session.scalar(query.where(Experiment.name == ref))
    if experiment is None and ref.isdigit():
        experiment = session.scalar(query.where(Experiment.id == int(ref)))
    if experiment is None:
        names = session.scalars(select(Experiment.name).order_by(Experiment.id)).all()
        known = ", ".join(names[-10:]) if names else "none yet; run `labcoat run design.yaml`"
        raise LabcoatError(f"no experiment named {ref!r} in this store (known: {known})")
    return experiment


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
    return list(
        session.scalars(query.order_by(MetricPoint.trial_id, MetricPoint.name, MetricPoint.step))
    )


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
    return {trial_id: value for trial_id, value in session.execute(query)}


def eval_items(session: Session, trial_ids: Sequence[int]) -> list[EvalItem]:
    query = select(EvalItem).where(EvalItem.trial_id.in_(trial_ids))
    return list(
        session.scalars(
            query.order_by(EvalItem.trial_id, EvalItem.task, EvalItem.step, EvalItem.item)
        )
    )


def final_eval_items(session: Session, trial_ids: Sequence[int]) -> list[EvalItem]:
    """Each trial's eval items at its last eval step (the step the verdict is judged on)."""
    last = (
        select(EvalItem.trial_id, func.max(EvalItem.step).label("step"))
        .where(EvalItem.trial_id.in_(trial_ids), EvalItem.variant == "")
        .group_by(EvalItem.trial_id)
        .subquery()
    )
    query = (
        select(EvalItem)
        .join(last, (EvalItem.trial_id == last.c.trial_id) & (EvalItem.step == last.c.step))
        .where(EvalItem.variant == "")
        .order_by(EvalItem.trial_id, EvalItem.task, EvalItem.item)
    )
    return list(session.scalars(query))


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


def checkpoints(session: Session, trial: Trial) -> list:
    """The trial's verified checkpoints that retention has not deleted, by step."""
    from labcoat.store._models import Checkpoint

    query = select(Checkpoint).where(Checkpoint.trial_id == trial.id,
                                     Checkpoint.verified.is_(True),
                                     Checkpoint.deleted.is_(False))
    return list(session.scalars(query.order_by(Checkpoint.step)))
