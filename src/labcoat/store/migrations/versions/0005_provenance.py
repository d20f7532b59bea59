"""provenance per attempt

The runner records, at each attempt's launch, what it ran with (code commit and
diff, design hash, command, params, seeds, environment, data fingerprints), so
`labcoat rerun` and `labcoat replay` can recreate it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "provenance",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("trial_id", sa.Integer(), sa.ForeignKey("trial.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("attempt_id", sa.Integer(), sa.ForeignKey("attempt.id", ondelete="CASCADE"),
                  nullable=False, unique=True),
        sa.Column("recorded", sa.JSON(), nullable=False),
        sa.Column("time", sa.Float(), nullable=True),
    )
    op.create_index("ix_provenance_trial_id", "provenance", ["trial_id"])


def downgrade() -> None:
    op.drop_index("ix_provenance_trial_id", table_name="provenance")
    op.drop_table("provenance")
