"""Opening the store: engine, SQLite pragmas, and migrations to the latest schema."""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from sqlalchemy import (
    Column,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    create_engine,
    event,
    inspect,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from labcoat import environment
from labcoat.errors import LabcoatError

MIGRATIONS = Path(__file__).parent / "migrations"
SUPPORTED = ("sqlite", "postgresql")
MIGRATION_LOCK = 0x6C6162636F6174  # "labcoat": the advisory lock key that serializes migrations


class Store:
    """A migrated database: `session()` opens a unit of work."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def session(self) -> Session:
        return self._sessions()

    def close(self) -> None:
        self.engine.dispose()


def open_store(url: str | None = None, *, create: bool = True) -> Store:
    """Open (creating and migrating if needed) the store at `url` (default: LABCOAT_DB/HOME).

    create=False (the read verbs): a SQLite file that does not exist is read as an empty
    store, in memory, and nothing is created (no ./.labcoat left in a directory where
    someone only ran `labcoat report`); messages still name the file looked for."""
    url = url or environment.database_url()
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise LabcoatError(
            f"LABCOAT_DB={url!r} is not a database URL; use e.g. sqlite:////path/labcoat.db "
            "or postgresql+psycopg://user@host/db"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in SUPPORTED:
        raise LabcoatError(
            f"LABCOAT_DB uses {backend!r}; labcoat supports {' and '.join(SUPPORTED)} "
            "(e.g. sqlite:////path/labcoat.db or postgresql+psycopg://user@host/db)"
        )
    if backend == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not create and not Path(parsed.database).exists():
            return _empty_store(Path(parsed.database))
        _prepare_sqlite_path(Path(parsed.database))
        _check_sqlite_file(Path(parsed.database), _shown(parsed))
    try:
        engine = create_engine(parsed, **_engine_options(backend))
    except ImportError as e:
        raise LabcoatError(
            f"the database driver for {_shown(parsed)} is not installed ({e}); "
            "for PostgreSQL: pip install 'labcoat[postgres]'"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    try:
        migrate(engine)
    except OperationalError as e:
        engine.dispose()
        raise LabcoatError(
            f"cannot open the database at {_shown(parsed)}: {e.orig}. {_HINT}"
        ) from None
    except DatabaseError as e:
        engine.dispose()
        raise LabcoatError(unreadable(_shown(parsed), e)) from None
    return Store(engine)


def unreadable(where: str, error: Exception) -> str:
    """The one line for a store file that is corrupt or not a database at all."""
    reason = getattr(error, "orig", None) or error
    return (f"the database at {where} cannot be read ({reason}): it is damaged or not a "
            "labcoat store. labcoat has not changed it. Move it aside and restore a backup "
            "(or try `sqlite3 FILE .recover`), or point LABCOAT_HOME / LABCOAT_DB elsewhere "
            "to start a new store")


def _empty_store(path: Path) -> Store:
    """An empty store in memory, under the URL of the file that does not exist:
    `find_experiment` then says "no experiment named X in the store PATH", and nothing is
    written anywhere."""
    from sqlalchemy.pool import StaticPool

    from labcoat.store._models import Base

    engine = create_engine(f"sqlite:///{path}", poolclass=StaticPool,
                           creator=lambda: sqlite3.connect(":memory:", check_same_thread=False))
    Base.metadata.create_all(engine)
    return Store(engine)


_HINT = "Set LABCOAT_HOME to a writable directory or LABCOAT_DB to a reachable database URL."


def _shown(url) -> str:
    return url.render_as_string(hide_password=True)


def _prepare_sqlite_path(path: Path) -> None:
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LabcoatError(
            f"cannot create {directory} for the database ({e.strerror}). {_HINT}"
        ) from None
    target = path if path.exists() else directory
    if not os.access(target, os.W_OK):
        raise LabcoatError(f"the database {path} is not writable (permission denied). {_HINT}")


def _check_sqlite_file(path: Path, where: str) -> None:
    """Read an existing file without writing to it (opening it for the store would switch
    it to WAL): refuse a damaged file, or someone else's database."""
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            tables = [r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
    except sqlite3.DatabaseError as e:
        raise LabcoatError(unreadable(where, e)) from None
    if tables and "alembic_version" not in tables:
        raise LabcoatError(_foreign(where, tables))


def _foreign(where: str, tables: list[str]) -> str:
    shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
    return (f"the database at {where} already holds tables that are not a labcoat store "
            f"({shown}); labcoat has not changed it. Point LABCOAT_HOME or LABCOAT_DB at a "
            "new file or an empty database")


def _engine_options(backend: str) -> dict:
    if backend != "postgresql":
        return {}
    # PostgreSQL's json type refuses NaN and Infinity, which Python's json writes for a
    # diverged loss in an event's data or an alert's evidence; SQLite keeps them as text.
    # The tag in pg_stat_activity names the process, so a refused second runner can say
    # which runner holds its experiment (see store._locks).
    return {
        "json_serializer": _finite_json,
        "pool_pre_ping": True,
        "connect_args": {"application_name": f"labcoat {socket.gethostname()} pid {os.getpid()}"},
    }


def _finite_json(value: object) -> str:
    """JSON that PostgreSQL accepts: non-finite floats become the strings "NaN",
    "Infinity" and "-Infinity" (read back as those strings)."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False)


def _finite(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    # WAL lets readers (status, report, ui) work while the runner writes;
    # NORMAL sync is durable across process crashes in WAL mode.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def migrate(engine: Engine) -> None:
    """Upgrade the schema to the latest Alembic revision (a no-op when current)."""
    head = _script_head()
    if head is not None:  # a store already at the head opens without importing Alembic
        with engine.connect() as connection:
            if _current_revision(connection) == head:
                return
        if _create_current(engine, head):
            return
    upgrade(engine)


def upgrade(engine: Engine) -> None:
    """Run the Alembic migrations from the database's revision to the head."""
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(config).get_current_head()
    with _migration_lock(engine) as connection:
        current = _current_revision(connection)
        if current == head:
            return
        if current is None:
            _refuse_foreign(connection)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def _create_current(engine: Engine, head: str) -> bool:
    """An empty database gets the models' tables and the head revision at once (Alembic's
    recipe "building an up to date database from scratch"): ~0.01 s, where running every
    migration costs ~0.07 s, on each new store. tests/store/test_store.py holds the two
    schemas equal on both backends. False where the database is not empty."""
    from labcoat.store._models import Base

    with _migration_lock(engine) as connection:
        if connection.dialect.name == "sqlite":  # all or nothing: pysqlite would commit each
            connection.exec_driver_sql("BEGIN IMMEDIATE")  # CREATE on its own
        if inspect(connection).get_table_names():
            return False
        Base.metadata.create_all(connection)
        _VERSION.create(connection)
        connection.execute(_VERSION.insert().values(version_num=head))
    return True


@contextmanager
def _migration_lock(engine: Engine) -> Iterator:
    """A transaction that holds the migration lock: processes opening one new store together
    take turns, and each after the first finds the schema there."""
    with sqlite_migration_lock(engine.url.database if engine.dialect.name == "sqlite"
                               else None), engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Runners starting together on a fresh database would each create the tables;
            # the first migrates while the others wait, then find the schema current.
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        yield connection


# Alembic's own version table (alembic.runtime.migration.MigrationContext), written without
# importing Alembic
_VERSION = Table("alembic_version", MetaData(), Column("version_num", String(32), nullable=False),
                 PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))

_REVISION = re.compile(r"^(down_revision|revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.M)


def _script_head() -> str | None:
    """The head revision read from the migration files' `revision = "..."` and
    `down_revision = "..."` lines (importing Alembic to ask costs 0.1-0.2 s on every
    open); None where that is not one plain chain, and Alembic decides."""
    revisions, parents = set(), set()
    for script in (MIGRATIONS / "versions").glob("*.py"):
        found = dict((name, value) for name, value in _REVISION.findall(script.read_text()))
        revision, parent = found.get("revision", ""), found.get("down_revision", "")
        if not re.fullmatch(r"[\"'][\w-]+[\"']", revision) or not re.fullmatch(
                r"None|[\"'][\w-]+[\"']", parent):
            return None
        revisions.add(revision.strip("\"'"))
        parents.add(parent.strip("\"'"))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


@contextmanager
def sqlite_migration_lock(database: str | None) -> Iterator[None]:
    """Serialize schema migrations of one SQLite file across processes (blocking): processes
    opening a new store together would otherwise each create the tables.

    A file of its own, locked with flock: closing any descriptor of the runners' lock file
    (store._locks) would drop this process's POSIX locks on it."""
    if database in (None, "", ":memory:"):
        yield
        return
    fd = os.open(f"{database}.migration-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _refuse_foreign(connection) -> None:
    """A database with tables but no labcoat schema is someone else's: never add ours."""
    tables = inspect(connection).get_table_names()
    if tables:
        raise LabcoatError(_foreign(_shown(connection.engine.url), tables))


def _current_revision(connection) -> str | None:
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
