"""NaN metric values and scores

A diverged run logs NaN; SQLite stores NaN as NULL, so metric values and eval
scores become nullable (NULL is read back as NaN).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_COLUMNS = (("metric_point", "value"), ("eval_item", "score"))


def upgrade() -> None:
    for table, column in _COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(column, existing_type=sa.Float(), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM metric_point WHERE value IS NULL")
    op.execute("DELETE FROM eval_item WHERE score IS NULL")
    for table, column in _COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(column, existing_type=sa.Float(), nullable=False)
