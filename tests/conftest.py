"""Shared fixtures: an isolated labcoat home per test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh LABCOAT_HOME (SQLite store inside it) for this test."""
    path = tmp_path / "home"
    monkeypatch.setenv("LABCOAT_HOME", str(path))
    monkeypatch.delenv("LABCOAT_DB", raising=False)
    for var in ("LABCOAT_JOURNAL", "LABCOAT_TRIAL", "LABCOAT_EXPERIMENT", "LABCOAT_ATTEMPT"):
        monkeypatch.delenv(var, raising=False)
    return path


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
