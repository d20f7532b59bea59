"""Shared fixtures: an isolated labcoat home per test.

A module whose tests only read one experiment builds it once in a module-scoped fixture,
inside `helpers.shared_home(...)`, and gives each test LABCOAT_HOME pointing at it with
`helpers.use_home(monkeypatch, path)` (see tests/diagnose/test_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import use_home


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
