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
