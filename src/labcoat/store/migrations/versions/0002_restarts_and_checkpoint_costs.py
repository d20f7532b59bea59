"""restarts and checkpoint costs

Attempts record where they resumed from, when they first and last logged and
how long they waited for a slot (for work lost and goodput); checkpoints record
their stall and write times and whether retention deleted them.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempt") as batch:
        batch.add_column(sa.Column("restored_step", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("first_step_time", sa.Float(), nullable=True))
        batch.add_column(sa.Column("last_record_time", sa.Float(), nullable=True))
        batch.add_column(sa.Column("queued_s", sa.Float(), nullable=True))
    with op.batch_alter_table("checkpoint") as batch:
        batch.add_column(sa.Column("stall_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("write_s", sa.Float(), nullable=True))
        batch.add_column(
            sa.Column("deleted", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("checkpoint") as batch:
        batch.drop_column("deleted")
        batch.drop_column("write_s")
        batch.drop_column("stall_s")
    with op.batch_alter_table("attempt") as batch:
        batch.drop_column("queued_s")
        batch.drop_column("last_record_time")
        batch.drop_column("first_step_time")
        batch.drop_column("restored_step")
