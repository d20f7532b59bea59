"""Shared fixtures: an isolated labcoat home per test.

A module whose tests only read one experiment builds it once in a module-scoped fixture,
inside `helpers.shared_home(...)`, and gives each test LABCOAT_HOME pointing at it with
`helpers.use_home(monkeypatch, path)` (see tests/diagnose/test_cli.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import use_home

# numpy/scipy's OpenBLAS starts a busy-waiting thread per core. The suite's arrays are
# small, so on an idle machine the second thread buys nothing (tests/scaling + tests/stats:
# 31.2 s with it, 30.2 s without), but on a shared one (trial subprocesses, a CI neighbour)
# the spinning threads fight the other processes for the cores: tests/scaling/
# test_coverage.py took 64 s in a loaded full run, 8 s alone. One thread unless the
# environment says otherwise; set before numpy is first imported (OpenBLAS reads it once),
# and inherited by the CLI subprocesses. torch (MKL, OMP_NUM_THREADS) is not affected.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh LABCOAT_HOME (SQLite store inside it) for this test."""
    return use_home(monkeypatch, tmp_path / "home")


# --- PostgreSQL (issue 9): see tests/postgres.py for how a server is found or started ---


@pytest.fixture
def pg_url(home: Path, monkeypatch: pytest.MonkeyPatch):
    """LABCOAT_DB pointing at a fresh, empty schema on the test PostgreSQL server."""
    from postgres import fresh_schema, server_url

    with fresh_schema(server_url()) as url:
        monkeypatch.setenv("LABCOAT_DB", url)
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def db_backend(request: pytest.FixtureRequest, home: Path) -> str:
    """Run the test once on SQLite (the home's file) and once on PostgreSQL (LABCOAT_DB)."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_url")
    return request.param
