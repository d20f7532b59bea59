"""Whole metric series as columns

`labcoat import` writes runs another tracker recorded: a million points as rows of
`metric_point` took over a second in SQLite's B-tree, as one row per (trial, metric) with
the steps, values and times as little-endian int64/float64 arrays it takes milliseconds.
The queries read both tables alike. Downgrading writes each series back as rows first, so
no imported point is lost.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07
"""

import numpy as np
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "metric_series",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("points", sa.BigInteger(), nullable=False),
        sa.Column("first_step", sa.BigInteger(), nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=False),
        sa.Column("step_array", sa.LargeBinary(), nullable=False),
        sa.Column("value_array", sa.LargeBinary(), nullable=False),
        sa.Column("time_array", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(["attempt_id"], ["attempt.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["trial_id"], ["trial.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("trial_id", "name", name="uq_metric_series"),
    )


def downgrade() -> None:
    bind = op.get_bind()
    series = bind.execute(sa.text(
        "SELECT trial_id, attempt_id, name, step_array, value_array, time_array "
        "FROM metric_series"))
    insert = sa.text("INSERT INTO metric_point (trial_id, attempt_id, name, step, value, time) "
                     "VALUES (:trial_id, :attempt_id, :name, :step, :value, :time)")
    for trial_id, attempt_id, name, steps, values, times in series.fetchall():
        times = [None] * (len(steps) // 8) if times is None else \
            np.frombuffer(times, dtype="<f8").tolist()
        bind.execute(insert, [
            {"trial_id": trial_id, "attempt_id": attempt_id, "name": name, "step": s,
             "value": None if v != v else v, "time": None if t != t else t}
            for s, v, t in zip(np.frombuffer(steps, dtype="<i8").tolist(),
                               np.frombuffer(values, dtype="<f8").tolist(), times, strict=True)])
    op.drop_table("metric_series")
