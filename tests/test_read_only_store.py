"""Read verbs on a store the user may read but not write (issue 30 point 4: they refused
it as "not writable"): a colleague's store, a results directory shared read-only.

How the store is made read-only: root bypasses file permissions, so when the tests run as
root (as they do here) the CLI runs as user `nobody` (`setpriv --reuid`), for whom the
store, owned by root with mode 0644 in a 0755 directory, is read-only; as any other user,
the file and its directory are chmod'ed 0444/0555. A first check proves the reader really
cannot open the file for writing, so the tests fail on a store that is not read-only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import cli, fake_design, use_home

NOBODY = 65534


def _reader_command(args: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return args
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *args]


def as_reader(*args: str) -> subprocess.CompletedProcess[str]:
    """`labcoat ARGS` as a user who can read the store but not write it."""
    env = {**os.environ, "HOME": "/tmp"}
    return subprocess.run(_reader_command([sys.executable, "-m", "labcoat.cli", *args]),
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def shared_store():
    """A home (in a directory every user can enter) holding experiment "fake", run by its
    owner; then made read-only for the reader."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot test as a user without write access")
    top = Path(tempfile.mkdtemp(prefix="labcoat-ro-", dir="/tmp"))
    top.chmod(0o755)
    home = top / "home"
    with pytest.MonkeyPatch.context() as mp:
        use_home(mp, home)
        cli("run", str(fake_design(top / "design", seeds=1, steps=3, extra="--chatter")),
            cwd=top, check=True)
        script = top / "adhoc.py"
        script.write_text("import labcoat\nrun = labcoat.init(experiment='notebook')\n"
                          "run.log(step=1, loss=0.5)\nrun.finish()\n", encoding="utf-8")
        subprocess.run([sys.executable, str(script)], env=dict(os.environ), check=True,
                       capture_output=True, timeout=120)
    if os.geteuid() != 0:
        (home / "labcoat.db").chmod(0o444)
        home.chmod(0o555)
    probe = subprocess.run(_reader_command([sys.executable, "-c", "import labcoat.cli"]),
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"the reader cannot run labcoat here: {probe.stderr[-300:]}")
    yield home
    home.chmod(0o755)
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def store_dir(shared_store, monkeypatch):
    use_home(monkeypatch, shared_store)
    return shared_store


def _digest(home: Path) -> tuple[str, list[str]]:
    files = sorted(p.name for p in home.iterdir())
    return hashlib.sha256((home / "labcoat.db").read_bytes()).hexdigest(), files


def test_the_reader_really_cannot_write_the_store(store_dir):
    db = store_dir / "labcoat.db"
    probe = subprocess.run(_reader_command([sys.executable, "-c", f"open({str(db)!r}, 'r+b')"]),
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "PermissionError" in probe.stderr
    assert not stat.S_IMODE(db.stat().st_mode) & 0o022  # nobody else may write it


@pytest.mark.parametrize(("args", "expected"), [
    (("status",), "fake"),
    (("status", "fake"), "base-s0"),
    (("show", "fake"), "name: fake"),
    (("report", "fake"), "better"),
    (("logs", "fake"), "base-s0#1"),
    (("export", "fake", "--metric", "loss"), '"name": "loss"'),
    (("diagnose", "fake"), "nothing to diagnose"),
])
def test_read_verbs_read_a_read_only_store(store_dir, args, expected):
    before = _digest(store_dir)
    result = as_reader(*args)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout
    assert "not writable" not in result.stderr and "Traceback" not in result.stderr
    assert _digest(store_dir) == before  # nothing written, no -wal/-shm left behind


def test_unrecorded_adhoc_runs_get_one_note(store_dir):
    result = as_reader("status", "--json")
    assert result.returncode == 0, result.stderr
    assert [row["name"] for row in json.loads(result.stdout)] == ["fake"]
    notes = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(notes) == 1 and "1 ad-hoc run(s)" in notes[0] and "read-only" in notes[0]
