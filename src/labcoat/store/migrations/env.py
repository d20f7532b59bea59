"""Alembic environment: labcoat runs migrations in-process (see store._db.migrate)."""

from alembic import context

from labcoat.store._models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("labcoat migrations run through labcoat.store.open_store(), not the CLI")
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite needs batch mode to alter tables
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
