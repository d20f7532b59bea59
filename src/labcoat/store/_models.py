"""The database schema (SQLAlchemy 2 declarative models).

experiment -> trial -> attempt -> metric points, eval items, events,
checkpoints, alerts. Metric points and eval items are unique per
(trial, name/task, step, ...): re-ingesting a journal, or a restarted attempt
re-logging a step, replaces the value instead of adding a duplicate.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# 64-bit on PostgreSQL; SQLite's INTEGER is 64-bit already, and altering a column there
# means rebuilding its table (migration 0006 leaves SQLite as it is, see its docstring)
STEP = BigInteger().with_variant(Integer, "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite returns naive datetimes (stored as UTC); make every value comparable."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class NaNFloat(TypeDecorator[float]):
    """A float that may be NaN: a diverged loss is data, but SQLite cannot store NaN
    (it becomes NULL), so NaN is written as NULL and read back as NaN everywhere."""

    impl = Float
    cache_ok = True

    def process_bind_param(self, value: float | None, dialect: Any) -> float | None:
        return None if value is None or math.isnan(value) else value

    def process_result_value(self, value: float | None, dialect: Any) -> float:
        return math.nan if value is None else value


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, datetime: DateTime(timezone=True)}


TRIAL_STATUSES = ("pending", "running", "done", "failed")


class Experiment(Base):
    __tablename__ = "experiment"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    design_yaml: Mapped[str] = mapped_column(Text)
    design_hash: Mapped[str] = mapped_column(String(64))
    design_path: Mapped[str | None] = mapped_column(Text)
    analysis_plan: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    trials: Mapped[list[Trial]] = relationship(
        back_populates="experiment", order_by="Trial.id", cascade="all, delete-orphan"
    )


class Trial(Base):
    __tablename__ = "trial"
    __table_args__ = (UniqueConstraint("experiment_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiment.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(200))
    arm: Mapped[str] = mapped_column(String(200))
    seed: Mapped[int | None] = mapped_column(BigInteger)
    scale: Mapped[str | None] = mapped_column(String(200))
    factors: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    command: Mapped[list[str] | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20), default="pending")
    total_steps: Mapped[int | None] = mapped_column(STEP)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    experiment: Mapped[Experiment] = relationship(back_populates="trials")
    attempts: Mapped[list[Attempt]] = relationship(
        back_populates="trial", order_by="Attempt.number", cascade="all, delete-orphan"
    )


class Attempt(Base):
    """One execution of a trial's command; `cause` says how it ended."""

    __tablename__ = "attempt"
    __table_args__ = (UniqueConstraint("trial_id", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    ended_at: Mapped[datetime | None]
    exit_code: Mapped[int | None] = mapped_column(Integer)
    cause: Mapped[str | None] = mapped_column(Text)  # e.g. "exit 0", "exit 1", "interrupted"
    host: Mapped[str | None] = mapped_column(String(255))
    pid: Mapped[int | None] = mapped_column(Integer)
    run_dir: Mapped[str | None] = mapped_column(Text)  # journal.jsonl, stdout.log, stderr.log
    journal_offset: Mapped[int] = mapped_column(BigInteger, default=0)
    journal_line: Mapped[int] = mapped_column(Integer, default=0)
    last_step: Mapped[int | None] = mapped_column(STEP)
    # From the journal, for restarts and goodput (unix seconds, trial clock):
    restored_step: Mapped[int | None] = mapped_column(STEP)  # resumed from; 0 = fresh start
    first_step_time: Mapped[float | None] = mapped_column(Float)  # first logged step
    last_record_time: Mapped[float | None] = mapped_column(Float)  # last journal line
    queued_s: Mapped[float | None] = mapped_column(Float)  # waited for a free slot before start
    # bytes captured as events; the server defaults are migration 0003's (a new store is
    # created from these models, and must equal one migrated from nothing)
    stdout_offset: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    stdout_line: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    stderr_offset: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    stderr_line: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    trial: Mapped[Trial] = relationship(back_populates="attempts")

    def seconds(self) -> float | None:
        """Wall-clock duration of a finished attempt."""
        if self.ended_at is None:
            return None
        return (as_utc(self.ended_at) - as_utc(self.started_at)).total_seconds()


class MetricPoint(Base):
    __tablename__ = "metric_point"
    # (name, trial_id, step) serves "all points of metric X for these trials" by prefix.
    __table_args__ = (UniqueConstraint("name", "trial_id", "step", name="uq_metric_point"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id", ondelete="CASCADE"))
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempt.id", ondelete="SET NULL"))
    name: Mapped[str] = mapped_column(String(200))
    step: Mapped[int] = mapped_column(BigInteger)
    value: Mapped[float] = mapped_column(NaNFloat, nullable=True)  # NaN is stored as NULL
    time: Mapped[float | None] = mapped_column(Float)  # unix seconds, from the trial


class MetricSeries(Base):
    """A whole metric series of one trial, its columns as little-endian arrays
    (`store._series.SeriesColumns`): how imports store a million points in milliseconds.
    A (trial, name) is held either here or as `metric_point` rows, never both; the
    queries in `_queries` read both alike."""

    __tablename__ = "metric_series"
    __table_args__ = (UniqueConstraint("trial_id", "name", name="uq_metric_series"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id", ondelete="CASCADE"))
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempt.id", ondelete="SET NULL"))
    name: Mapped[str] = mapped_column(String(200))
    points: Mapped[int] = mapped_column(BigInteger)
    first_step: Mapped[int] = mapped_column(BigInteger)
    last_step: Mapped[int] = mapped_column(BigInteger)
    step_array: Mapped[bytes] = mapped_column(LargeBinary)  # int64
    value_array: Mapped[bytes] = mapped_column(LargeBinary)  # float64, NaN kept
    time_array: Mapped[bytes | None] = mapped_column(LargeBinary)  # unix seconds, NaN unknown


class EvalItem(Base):
    __tablename__ = "eval_item"
    __table_args__ = (
        UniqueConstraint("trial_id", "task", "step", "item", "variant", name="uq_eval_item"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id", ondelete="CASCADE"))
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempt.id", ondelete="SET NULL"))
    step: Mapped[int] = mapped_column(BigInteger)
    task: Mapped[str] = mapped_column(String(200))
    item: Mapped[str] = mapped_column(String(200))
    variant: Mapped[str] = mapped_column(String(200), default="")
    score: Mapped[float] = mapped_column(NaNFloat, nullable=True)  # NaN is stored as NULL


class Event(Base):
    """Something that happened: a journal record, a line a trial printed, or a runner event.

    stream: "journal", "stdout" or "stderr"; seq: the line number in that stream
    (None for the runner's own events), so re-reading a file adds nothing twice.
    """

    __tablename__ = "event"
    __table_args__ = (
        UniqueConstraint("attempt_id", "stream", "seq", name="uq_event_stream_seq"),
        Index("ix_event_trial", "trial_id", "kind"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("trial.id", ondelete="CASCADE"))
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempt.id", ondelete="CASCADE"))
    stream: Mapped[str] = mapped_column(String(20), default="journal", server_default="journal")
    seq: Mapped[int | None] = mapped_column(Integer)
    step: Mapped[int | None] = mapped_column(BigInteger)
    rank: Mapped[int | None] = mapped_column(Integer)
    host: Mapped[str | None] = mapped_column(String(255))
    level: Mapped[str] = mapped_column(String(20), default="info")
    kind: Mapped[str] = mapped_column(String(100))
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    time: Mapped[float | None] = mapped_column(Float)


class Checkpoint(Base):
    __tablename__ = "checkpoint"
    __table_args__ = (UniqueConstraint("trial_id", "step", name="uq_checkpoint"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id", ondelete="CASCADE"))
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempt.id", ondelete="SET NULL"))
    step: Mapped[int] = mapped_column(BigInteger)
    path: Mapped[str] = mapped_column(Text)
    bytes: Mapped[int | None] = mapped_column(BigInteger)
    hash: Mapped[str | None] = mapped_column(String(128))
    verified: Mapped[bool] = mapped_column(Boolean, default=False)
    stall_s: Mapped[float | None] = mapped_column(Float)  # training blocked by the save
    write_s: Mapped[float | None] = mapped_column(Float)  # background write
    deleted: Mapped[bool] = mapped_column(Boolean, default=False,  # removed by retention
                                          server_default=false())
    time: Mapped[float | None] = mapped_column(Float)


class Alert(Base):
    __tablename__ = "alert"
    __table_args__ = (
        UniqueConstraint("attempt_id", "seq", name="uq_alert_seq"),
        Index("ix_alert_trial", "trial_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id", ondelete="CASCADE"))
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempt.id", ondelete="SET NULL"))
    seq: Mapped[int | None] = mapped_column(Integer)  # journal line, for idempotent ingestion
    step: Mapped[int | None] = mapped_column(BigInteger)
    rule: Mapped[str] = mapped_column(String(100))
    severity: Mapped[str] = mapped_column(String(20))
    message: Mapped[str] = mapped_column(Text)
    evidence: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    time: Mapped[float | None] = mapped_column(Float)


class Provenance(Base):
    """What an attempt ran with, recorded by the runner at launch: code (git commit and
    uncommitted diff), design hash, command, params, seeds, environment, data fingerprints.
    The shape of `recorded` is documented in `labcoat.runner._provenance`."""

    __tablename__ = "provenance"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id", ondelete="CASCADE"), index=True)
    attempt_id: Mapped[int] = mapped_column(
        ForeignKey("attempt.id", ondelete="CASCADE"), unique=True
    )
    recorded: Mapped[dict[str, Any]] = mapped_column(JSON)
    time: Mapped[float | None] = mapped_column(Float)
