"""The store on a real SQLite file and a real PostgreSQL server (each test that is not
about one backend runs on both): migrations, WAL, idempotent upserts, indexes, bad paths."""

import math
import os
import subprocess
import sys
import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from labcoat import store
from labcoat.errors import LabcoatError


@pytest.fixture
def db(db_backend):
    opened = store.open_store()
    assert opened.engine.dialect.name == db_backend
    yield opened
    opened.close()


@pytest.fixture
def sqlite_db(home):
    opened = store.open_store()
    yield opened
    opened.close()


def _trial(session):
    exp, created = store.get_or_create_experiment(session, name="e", design_yaml="x: 1",
                                                  design_hash="h1")
    assert created
    from labcoat.spec import TrialSpec

    store.add_missing_trials(session, exp, [TrialSpec(key="a-s0", arm="a", seed=0, params={},
                                                      command=["true"])])
    trial = exp.trials[0]
    attempt = store.start_attempt(session, trial, run_dir="/tmp/x", host="h")
    return trial, attempt


def test_default_store_is_a_wal_sqlite_file_in_labcoat_home(sqlite_db, home):
    assert (home / "labcoat.db").exists()
    with sqlite_db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


@pytest.fixture
def two_empty_databases(db_backend, tmp_path):
    """Two URLs of empty databases on the backend."""
    if db_backend == "sqlite":
        yield [f"sqlite:///{tmp_path / name}" for name in ("a.db", "b.db")]
        return
    from postgres import fresh_schema, server_url

    with fresh_schema(server_url()) as a, fresh_schema(server_url()) as b:
        yield [a, b]


def test_migrations_produce_exactly_the_models_schema(two_empty_databases):
    """A new store is created from the models and stamped at the head (store._db); one
    migrated from nothing must be the same database, table by table, as the server reports it."""
    from sqlalchemy import create_engine

    from labcoat.store._db import upgrade

    migrated, created = (create_engine(url) for url in two_empty_databases)
    upgrade(migrated)
    store.open_store(two_empty_databases[1]).close()
    with migrated.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), store.Base.metadata)
    assert diff == []
    assert _schema(migrated) == _schema(created)
    assert set(_schema(created)) == set(store.Base.metadata.tables) | {"alembic_version"}
    for engine in (migrated, created):
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").all() == [
                ("0007",)]
        engine.dispose()


def test_a_store_whose_creation_failed_half_way_opens_next_time(db_backend, monkeypatch):
    """Creating a new store is one transaction: a process dying between two CREATE TABLEs
    leaves no tables behind (which the next open would refuse as someone else's)."""
    real = store.Base.metadata.create_all

    def dies_half_way(bind, **kw):
        real(bind, tables=store.Base.metadata.sorted_tables[:3])
        raise RuntimeError("killed half-way")

    monkeypatch.setattr(store.Base.metadata, "create_all", dies_half_way)
    with pytest.raises(RuntimeError, match="killed half-way"):
        store.open_store()
    monkeypatch.setattr(store.Base.metadata, "create_all", real)
    opened = store.open_store()
    with opened.session() as session:
        assert store.get_or_create_experiment(session, name="e", design_yaml="x: 1",
                                              design_hash="h")[1]
    opened.close()


def _schema(engine) -> dict:
    """Each table's columns, keys, indexes and constraints, as the database reports them
    (columns by name: a migration appends a column where the models may list it earlier)."""
    from sqlalchemy import inspect

    found = inspect(engine)
    return {table: {
        "columns": sorted((c["name"], str(c["type"]), c["nullable"], c["default"])
                          for c in found.get_columns(table)),
        "primary key": found.get_pk_constraint(table)["constrained_columns"],
        "foreign keys": sorted((f["name"] or "", f["constrained_columns"], f["referred_table"],
                                f["referred_columns"], sorted(f["options"].items()))
                               for f in found.get_foreign_keys(table)),
        "indexes": sorted((i["name"], i["column_names"], i["unique"])
                          for i in found.get_indexes(table)),
        "unique": sorted((u["name"] or "", u["column_names"])
                         for u in found.get_unique_constraints(table)),
        "checks": sorted((c["name"] or "", c["sqltext"])
                         for c in found.get_check_constraints(table)),
    } for table in found.get_table_names()}


def test_the_head_read_from_the_migration_files_is_alembics():
    """open_store compares the store's revision with this head to skip importing Alembic."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from labcoat.store._db import MIGRATIONS, _script_head

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert _script_head() == ScriptDirectory.from_config(config).get_current_head()


def test_rows_naming_their_columns_in_another_order_are_stored_alike(db):
    """The SQLite upsert sends plain tuples: each row's values go to their own columns
    whatever the order of its keys, and JSON columns are still serialised."""
    with db.session() as session:
        trial, attempt = _trial(session)
        ids = {"trial_id": trial.id, "attempt_id": attempt.id}
        store.upsert_metric_points(session, [
            {**ids, "name": "a", "step": 1, "value": 1.0, "time": 5.0},
            {"time": 6.0, "value": 2.0, "step": 2, "name": "a", **ids}])
        store.insert_events(session, [
            {**ids, "seq": 1, "kind": "x", "level": "info", "message": "m", "data": {"k": [1]}},
            {"data": None, **ids, "seq": 2, "kind": "y", "level": "info", "message": "n"}])
        session.commit()
        points = store.metric_points(session, [trial.id], "a")
        assert [(p.step, p.value, p.time) for p in points] == [(1, 1.0, 5.0), (2, 2.0, 6.0)]
        assert [(e.kind, e.data) for e in store.events(session, [trial.id])] == [
            ("x", {"k": [1]}), ("y", None)]


def test_reopening_a_migrated_store_keeps_its_data(db_backend):
    first = store.open_store()
    with first.session() as session:
        store.get_or_create_experiment(session, name="keep", design_yaml="", design_hash="h")
        session.commit()
    first.close()
    second = store.open_store()
    with second.session() as session:
        assert store.find_experiment(session, "keep").name == "keep"
    second.close()


_OPEN_AT = """
import sys, time
from labcoat import store
while time.time() < float(sys.argv[2]):
    time.sleep(0.001)
store.open_store(sys.argv[1]).close()
"""


def test_processes_opening_a_new_sqlite_store_together_all_succeed(tmp_path):
    """They race to create the tables; one migrates while the others wait for it."""
    for attempt in range(3):
        url = f"sqlite:///{tmp_path / f'fresh-{attempt}.db'}"
        start = time.time() + 2.0  # after every interpreter has started
        procs = [subprocess.Popen([sys.executable, "-c", _OPEN_AT, url, str(start)],
                                  stderr=subprocess.PIPE, text=True) for _ in range(6)]
        errors = [p.communicate(timeout=120)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 6, "\n".join(errors)


def test_upserts_never_duplicate_and_later_values_win(db):
    with db.session() as session:
        trial, attempt = _trial(session)
        ids = {"trial_id": trial.id, "attempt_id": attempt.id}
        rows = [{**ids, "name": "loss", "step": s, "value": float(s), "time": 0.0}
                for s in range(5)]
        store.upsert_metric_points(session, rows)
        store.upsert_metric_points(session, rows)  # re-ingestion
        store.upsert_metric_points(session, [{**ids, "name": "loss", "step": 4, "value": -1.0,
                                              "time": 1.0},
                                             {**ids, "name": "loss", "step": 4, "value": -2.0,
                                              "time": 2.0}])
        items = [{**ids, "step": 5, "task": "t", "item": str(i), "variant": "", "score": 1.0}
                 for i in range(3)]
        store.upsert_eval_items(session, items + items)
        events = [{**ids, "seq": 1, "kind": "x", "level": "info", "message": "m"}]
        store.insert_events(session, events)
        store.insert_events(session, events)
        session.commit()
        points = store.metric_points(session, [trial.id], "loss")
        assert [(p.step, p.value) for p in points] == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0),
                                                       (4, -2.0)]
        assert len(store.eval_items(session, [trial.id])) == 3
        assert len(store.events(session, [trial.id])) == 1


def test_nan_and_infinite_values_are_kept(db):
    """A diverged run's NaN loss is data: SQLite has no NaN, the store maps it to NULL."""
    with db.session() as session:
        trial, attempt = _trial(session)
        ids = {"trial_id": trial.id, "attempt_id": attempt.id}
        values = [1.5, math.nan, math.inf, -math.inf]
        store.upsert_metric_points(session, [{**ids, "name": "loss", "step": s, "value": v,
                                              "time": 0.0} for s, v in enumerate(values)])
        store.upsert_eval_items(session, [{**ids, "step": 1, "task": "t", "item": "a",
                                           "variant": "", "score": math.nan}])
        session.commit()
        got = [p.value for p in store.metric_points(session, [trial.id], "loss")]
        assert got[0] == 1.5 and math.isnan(got[1]) and got[2:] == [math.inf, -math.inf]
        assert math.isnan(store.eval_items(session, [trial.id])[0].score)
    with db.engine.connect() as conn:
        nulls = conn.exec_driver_sql("SELECT COUNT(*) FROM metric_point WHERE value IS NULL")
        assert nulls.scalar() == 1


def test_metric_query_uses_the_name_trial_step_index(sqlite_db):
    with sqlite_db.engine.connect() as conn:
        plan = conn.execute(text(
            "EXPLAIN QUERY PLAN SELECT step, value FROM metric_point "
            "WHERE name = 'loss' AND trial_id IN (1, 2, 3) ORDER BY trial_id, step"
        )).all()
    detail = " ".join(str(row[-1]) for row in plan)
    # SQLite backs the (name, trial_id, step) unique constraint with an automatic index.
    assert "USING INDEX" in detail and "name=? AND trial_id=?" in detail, detail


def test_postgres_metric_query_can_use_the_name_trial_step_index(pg_url):
    db = store.open_store()
    with db.engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")  # empty tables: force the planner
        plan = conn.exec_driver_sql(
            "EXPLAIN SELECT step, value FROM metric_point "
            "WHERE name = 'loss' AND trial_id IN (1, 2, 3) ORDER BY trial_id, step"
        ).scalars().all()
    db.close()
    detail = " ".join(plan)
    assert "uq_metric_point" in detail and "name" in detail, detail


def test_changed_design_under_the_same_name_is_refused(db):
    with db.session() as session:
        store.get_or_create_experiment(session, name="e", design_yaml="", design_hash="h1")
        with pytest.raises(LabcoatError, match="different design.*new `name:`"):
            store.get_or_create_experiment(session, name="e", design_yaml="", design_hash="h2")


def test_unknown_experiment_lists_known_names(db):
    with db.session() as session:
        store.get_or_create_experiment(session, name="alpha", design_yaml="", design_hash="h")
        with pytest.raises(LabcoatError, match="no experiment named 'beta'.*alpha"):
            store.find_experiment(session, "beta")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_home_is_a_clear_error(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    monkeypatch.setenv("LABCOAT_HOME", str(locked))
    with pytest.raises(LabcoatError, match="not writable.*LABCOAT_HOME"):
        store.open_store()


def test_database_path_under_a_file_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LABCOAT_DB", f"sqlite:///{blocker}/sub/labcoat.db")
    with pytest.raises(LabcoatError, match="cannot create .*LABCOAT_HOME"):
        store.open_store()


@pytest.mark.parametrize(("url", "message"), [
    ("mysql://localhost/x", "supports sqlite and postgresql"),
    ("foo://localhost/x", "supports sqlite and postgresql"),
])
def test_unsupported_database_is_a_clear_error(monkeypatch, url, message):
    monkeypatch.setenv("LABCOAT_DB", url)
    with pytest.raises(LabcoatError, match=message):
        store.open_store()


def test_bad_database_url_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("LABCOAT_DB", "not a url")
    with pytest.raises(LabcoatError, match="not a database URL"):
        store.open_store()


def test_what_postgres_refuses_is_stored_not_fatal(db, db_backend):
    """A NUL byte in printed text, NaN inside an event's data and an over-long metric name:
    SQLite keeps them as they are; PostgreSQL refuses them, so the store adapts them
    (U+FFFD, the string "NaN", cut to the column) instead of failing the runner's batch."""
    with db.session() as session:
        trial, attempt = _trial(session)
        ids = {"trial_id": trial.id, "attempt_id": attempt.id}
        store.insert_events(session, [{**ids, "seq": 1, "kind": "log", "level": "info",
                                       "message": "bin\x00ary",
                                       "data": {"loss": math.nan, "g": [math.inf, 1.0]}}])
        long_name = "m" * 300
        store.upsert_metric_points(session, [{**ids, "name": long_name, "step": 1, "value": 2.0,
                                              "time": 0.0}])
        session.commit()
        event = store.events(session, [trial.id])[0]
        names = [p.name for p in store.metric_points(session, [trial.id])]
    if db_backend == "sqlite":
        assert event.message == "bin\x00ary" and names == [long_name]
        assert math.isnan(event.data["loss"]) and event.data["g"] == [math.inf, 1.0]
    else:
        assert event.message == "bin\ufffdary" and names == ["m" * 200]
        assert event.data == {"loss": "NaN", "g": ["Infinity", 1.0]}


def test_concurrent_creation_of_one_experiment_makes_one_row(db):
    """Ad-hoc scripts finishing together on a shared store each ask for the same new
    experiment: one creates it, the others find it, none fails on the unique name."""
    import threading

    barrier, outcomes = threading.Barrier(4), []

    def create() -> None:
        with db.session() as session:
            barrier.wait()
            _, created = store.get_or_create_experiment(session, name="adhoc-x",
                                                        design_yaml="", design_hash="adhoc",
                                                        require_same_design=False)
            session.commit()
            outcomes.append(created)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == [False, False, False, True]
    with db.session() as session:
        assert [e.name for e in store.list_experiments(session)] == ["adhoc-x"]


def test_an_open_reader_does_not_block_the_writer(db, db_backend):
    """A report or dashboard mid-read (an open read transaction) while the runner commits:
    the commit goes through (WAL on SQLite; MVCC on PostgreSQL) and later reads see it."""
    with db.session() as session:
        trial, attempt = _trial(session)
        session.commit()
        ids = {"trial_id": trial.id, "attempt_id": attempt.id}
    with db.engine.connect() as reader:
        reader.exec_driver_sql("BEGIN" if db_backend == "sqlite" else "SELECT 1")
        before = reader.exec_driver_sql("SELECT COUNT(*) FROM metric_point").scalar()
        with db.session() as writer:
            store.upsert_metric_points(writer, [{**ids, "name": "loss", "step": s,
                                                 "value": 1.0, "time": 0.0} for s in range(3)])
            writer.commit()
        if db_backend == "sqlite":  # the reader's snapshot is stable while it reads
            assert reader.exec_driver_sql("SELECT COUNT(*) FROM metric_point").scalar() == before
        reader.rollback()
    with db.session() as session:
        assert len(store.metric_points(session, [trial.id], "loss")) == 3
