"""Upgrading a store keeps every row below the tables a migration alters. A batch rebuild
of `trial` on SQLite drops the old table, and with the store's `PRAGMA foreign_keys=ON`
that once cascade-deleted every attempt, metric point and eval item (migration 0006)."""

import os

from sqlalchemy import create_engine, text

from labcoat import store

ROWS = [
    "INSERT INTO experiment (id, name, design_yaml, design_hash, created_at) "
    "VALUES (1, 'old', '', 'h', '2026-01-01')",
    "INSERT INTO trial (id, experiment_id, key, arm, seed, params, status, total_steps, "
    "created_at) VALUES (1, 1, 'a-s0', 'a', 0, '{}', 'done', 10, '2026-01-01')",
    "INSERT INTO attempt (id, trial_id, number, started_at, journal_offset, journal_line, "
    "last_step) VALUES (1, 1, 1, '2026-01-01', 0, 0, 10)",
    "INSERT INTO metric_point (trial_id, attempt_id, name, step, value) "
    "VALUES (1, 1, 'loss', 10, 0.5)",
    "INSERT INTO eval_item (trial_id, attempt_id, step, task, item, variant, score) "
    "VALUES (1, 1, 10, 't', 'q1', '', 1.0)",
]
TABLES = ("experiment", "trial", "attempt", "metric_point", "eval_item")


def test_upgrading_from_the_first_schema_keeps_every_child_row(db_backend, home):
    from alembic import command
    from alembic.config import Config

    from labcoat.store._db import MIGRATIONS

    url = os.environ.get("LABCOAT_DB") or f"sqlite:///{home / 'labcoat.db'}"
    home.mkdir(parents=True)
    engine = create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        for row in ROWS:
            conn.execute(text(row))
    engine.dispose()
    db = store.open_store()  # every migration since 0001, with the store's own pragmas
    with db.engine.connect() as conn:
        counts = {t: conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar() for t in TABLES}
        steps = conn.exec_driver_sql("SELECT last_step FROM attempt").scalar()
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    with db.session() as session:
        assert store.find_experiment(session, "old").trials[0].key == "a-s0"
    db.close()
    assert counts == dict.fromkeys(TABLES, 1)
    assert steps == 10 and version == "0007"
