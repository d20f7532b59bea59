"""captured output

Every line a trial prints becomes an event: events gain the stream they came
from (journal, stdout, stderr), unique per (attempt, stream, line), and attempts
remember how far their stdout and stderr were read.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("event") as batch:
        batch.add_column(
            sa.Column("stream", sa.String(length=20), nullable=False, server_default="journal")
        )
        batch.drop_constraint("uq_event_seq", type_="unique")
        batch.create_unique_constraint("uq_event_stream_seq", ["attempt_id", "stream", "seq"])
    with op.batch_alter_table("attempt") as batch:
        for name in ("stdout_offset", "stderr_offset"):
            batch.add_column(sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"))
        for name in ("stdout_line", "stderr_line"):
            batch.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("attempt") as batch:
        for name in ("stderr_line", "stdout_line", "stderr_offset", "stdout_offset"):
            batch.drop_column(name)
    with op.batch_alter_table("event") as batch:
        batch.drop_constraint("uq_event_stream_seq", type_="unique")
        batch.create_unique_constraint("uq_event_seq", ["attempt_id", "seq"])
        batch.drop_column("stream")
