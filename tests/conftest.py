"""Shared fixtures: an isolated labcoat home per test.

A module whose tests only read one experiment builds it once in a module-scoped fixture,
inside `helpers.shared_home(...)`, and gives each test LABCOAT_HOME pointing at it with
`helpers.use_home(monkeypatch, path)` (see tests/diagnose/test_cli.py)."""

from __future__ import annotations

import ast
import json
import os
from collections import Counter
from importlib.util import find_spec
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

# Without an extra (a bare `pip install -e '.[dev]'`), a test module that imports what the
# extra brings at its top (torch, or a labcoat package built on it; fastapi, plotly) is
# reported as skipped, not as a collection error; tests/guard and tests/checkpoint skip
# their folders in their conftest.py.
_TORCH = find_spec("torch")  # a namespace package (a folder named torch) has no origin
EXTRAS = {  # module imported at a test's top -> (is it installed, the extra that brings it)
    "torch": (_TORCH is not None and _TORCH.origin is not None, "torch"),
    "fastapi": (find_spec("fastapi") is not None, "ui"),
    "plotly": (find_spec("plotly") is not None, "ui"),
}
EXTRAS |= {f"labcoat.{p}": EXTRAS["torch"] for p in ("torch", "workloads", "integrations",
                                                          "inside")}


def _missing_extra(path: Path) -> str | None:
    """The extra a module needs and lacks, judged by the imports at its top."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            for module, (installed, extra) in EXTRAS.items():
                if not installed and (name == module or name.startswith(module + ".")):
                    return extra
    return None


class _NeedsExtra(pytest.File):
    extra = ""

    def collect(self):
        pytest.skip(_needs(self.extra))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """@pytest.mark.needs("torch"): a test that needs an extra at run time, e.g. trains
    tinylm in a subprocess; skipped (before its fixtures) where the extra is absent."""
    for marker in item.iter_markers("needs"):
        for extra in marker.args:
            if not all(installed for installed, e in EXTRAS.values() if e == extra):
                pytest.skip(_needs(extra))


def _needs(extra: str) -> str:
    hint = " (install torch==2.13.0 first, the CPU wheel)" if extra == "torch" else ""
    return f"needs the {extra} extra: pip install 'labcoat[{extra}]'{hint}"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector):
    extra = _missing_extra(module_path)
    if extra is None:
        return None
    node = _NeedsExtra.from_parent(parent, path=module_path)
    node.extra = extra
    return node


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


# --- order: the longest modules first -------------------------------------------------------


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` (-n 2 --dist loadscope --no-loadscope-reorder) hands whole modules to the two
    workers in this order: the long ones start early and the short ones fill the end, so the
    workers finish together. (xdist's own order, by number of tests, left the minute-long
    modules of a few tests for last, and one worker idle ~30 s.) tests/durations.json holds
    each module's seconds in a full run (tests/update_durations.py rewrites it); a module not
    in it counts 0.3 s a test."""
    known = json.loads((Path(__file__).parent / "durations.json").read_text())
    tests = Counter(item.nodeid.split("::")[0] for item in items)
    cost = {module: known.get(module, 0.3 * n) for module, n in tests.items()}
    items.sort(key=lambda item: -cost[item.nodeid.split("::")[0]])  # stable: order in a module
