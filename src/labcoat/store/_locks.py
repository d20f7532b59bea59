"""One runner per experiment per database, wherever the runners are.

Several `labcoat run` processes may share one store (a team's PostgreSQL, or one
SQLite file); each experiment is run by one of them at a time. A second runner of
the same experiment — the same design started twice, on this machine or another —
stops with a message naming the runner that holds it, instead of starting the same
trials twice. The lock lives in the database server (a PostgreSQL session advisory
lock) or beside the SQLite file (a POSIX byte-range lock), so it is released the
moment its runner exits, even by kill -9: there is no stale lock to clean up.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import Connection

from labcoat.errors import LabcoatError
from labcoat.store._db import Store

# PostgreSQL advisory locks take one bigint; the migration lock (store._db) uses another.
_NAMESPACE = b"labcoat-experiment:"


@contextmanager
def experiment_lock(db: Store, name: str) -> Iterator[None]:
    """Hold `name` for this process while the block runs; LabcoatError if another holds it."""
    if db.engine.dialect.name == "postgresql":
        with _postgres_lock(db, name):
            yield
    else:
        with _sqlite_lock(db, name):
            yield


def lock_key(name: str) -> int:
    """A signed 64-bit key for `name` (PostgreSQL's advisory lock key type)."""
    digest = hashlib.sha256(_NAMESPACE + name.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def _postgres_lock(db: Store, name: str) -> Iterator[None]:
    key = lock_key(name)
    # A dedicated connection outside the pool's reuse: the lock lives as long as it does.
    with db.engine.connect() as conn:
        held = conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({key})").scalar()
        conn.commit()
        if not held:
            raise LabcoatError(
                f"experiment {name!r} is already being run by another `labcoat run` on this "
                f"database ({_holder(conn, key)}); wait for it to finish or stop it, then run "
                "again (finished trials are kept)"
            )
        try:
            yield
        finally:
            conn.exec_driver_sql(f"SELECT pg_advisory_unlock({key})")
            conn.commit()


def _holder(conn: Connection, key: int) -> str:
    """Which session holds the advisory lock: its application_name says host and pid."""
    # pg_locks splits a bigint advisory key into classid (high 32 bits), objid (low 32 bits).
    high, low = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
    row = conn.exec_driver_sql(
        "SELECT a.application_name, a.client_addr FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid "
        f"WHERE l.locktype = 'advisory' AND l.granted AND l.classid = {high} "
        f"AND l.objid = {low} AND l.objsubid = 1"
    ).first()
    conn.rollback()
    if row is None or not row[0]:
        return "holder unknown"
    return f"{row[0]}" + (f" from {row[1]}" if row[1] else "")


@contextmanager
def _sqlite_lock(db: Store, name: str) -> Iterator[None]:
    database = db.engine.url.database
    if database in (None, "", ":memory:"):
        yield  # a private in-memory database has no other runners
        return
    path = Path(f"{database}.runners")
    # One small file for every experiment: each holds one byte at its own offset.
    offset = lock_key(name) & 0x7FFFFFFF
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise LabcoatError(
            f"cannot open {path}, the lock file that keeps two runners off one experiment "
            f"({e.strerror}); make the database's directory writable"
        ) from None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
        except OSError:
            raise LabcoatError(
                f"experiment {name!r} is already being run by another `labcoat run` on the "
                f"database {database}; wait for it to finish or stop it, then run again "
                "(finished trials are kept)"
            ) from None
        try:
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
    finally:
        os.close(fd)
