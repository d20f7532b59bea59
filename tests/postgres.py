"""A real PostgreSQL server for the tests: its URL, and a fresh schema per test.

The server's URL comes from LABCOAT_TEST_PG_URL (`.ci/run` exports the one
`.ci/postgres` prints). When that is unset and nothing answers at the default URL,
the tests start the Debian cluster themselves by running `.ci/postgres` — only as
root and only when the PostgreSQL binaries are already installed (never apt-get from
a test). Otherwise the PostgreSQL variants fail, saying how to start a server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import pytest

ENV = "LABCOAT_TEST_PG_URL"
DEFAULT_URL = "postgresql+psycopg://labcoat:labcoat@127.0.0.1:5432/labcoat_test"
SETUP = Path(__file__).resolve().parents[1] / ".ci" / "postgres"


@cache
def _server() -> tuple[str | None, str]:
    """(url, "") when a server answers, else (None, why not)."""
    url = os.environ.get(ENV) or DEFAULT_URL
    error = _unreachable(url)
    if error and not os.environ.get(ENV) and _can_start():
        started = subprocess.run([str(SETUP)], capture_output=True, text=True, timeout=300)
        if started.returncode == 0:
            url = started.stdout.strip().splitlines()[-1]
            error = _unreachable(url)
        else:
            error = f"{error}; {SETUP} failed: {started.stderr.strip()[-500:]}"
    return (None, error) if error else (url, "")


def server_url() -> str:
    """The PostgreSQL URL for tests, or fail with how to get one."""
    url, error = _server()
    if url is None:
        pytest.fail(
            f"no PostgreSQL server for the store tests ({error}). Start one with "
            f"`sudo {SETUP}` (installs and starts the Debian cluster) and export "
            f"{ENV}=<the URL it prints>, or point {ENV} at a server where the role may "
            "create schemas",
            pytrace=False,
        )
    return url


def _can_start() -> bool:
    return os.geteuid() == 0 and shutil.which("pg_ctlcluster") is not None \
        and any(Path("/usr/lib/postgresql").glob("*/bin/postgres"))


def _unreachable(url: str) -> str:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install 'labcoat[postgres]'"
    from sqlalchemy import create_engine
    from sqlalchemy.exc import OperationalError

    engine = create_engine(url, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except OperationalError as e:
        return f"{_shown(url)}: {str(e.orig).strip().splitlines()[0]}"
    finally:
        engine.dispose()
    return ""


def _shown(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@contextmanager
def fresh_schema(base_url: str) -> Iterator[str]:
    """A URL whose connections see only a new, empty schema (dropped afterwards): each
    test gets its own store on the shared server without creating a database."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(base_url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
    url = make_url(base_url).update_query_dict({"options": f"-csearch_path={name}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql("SET LOCAL lock_timeout = '30s'")
            conn.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')
        admin.dispose()
