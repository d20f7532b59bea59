"""64-bit steps everywhere

Metric points, items and events already keep 64-bit steps, but an attempt's last and
restored step and a trial's total steps were 32-bit INTEGER, which PostgreSQL caps at
2**31 - 1: a script logging tokens seen as its step passes that at 2.1B tokens, and the
runner then failed to record the attempt. SQLite's integers are 64-bit either way, so
nothing changes there: a batch rebuild of `trial` on SQLite drops the old table, and with
the store's `PRAGMA foreign_keys=ON` that cascade-deleted every attempt, metric point and
eval item (tests/store/test_migrations.py upgrades a filled store and counts its rows).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_COLUMNS = {"attempt": ("last_step", "restored_step"), "trial": ("total_steps",)}


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for table, columns in _COLUMNS.items():
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.alter_column(column, existing_type=sa.Integer(), type_=sa.BigInteger(),
                                   existing_nullable=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    for table, columns in _COLUMNS.items():
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.alter_column(column, existing_type=sa.BigInteger(), type_=sa.Integer(),
                                   existing_nullable=True)
