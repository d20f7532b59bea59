"""A damaged or foreign database file: one line naming the file and what to do, exit
status 2, and the file left exactly as it was (issue 22, point 3)."""

import hashlib
import os
import sqlite3

import pytest

from helpers import cli, stored_experiment

DESIGN = """name: e
hypothesis: {claim: c, metric: loss, direction: decrease}
command: "python train.py --seed {seed}"
arms:
  base: {control: true}
  hot: {}
seeds: 2
"""


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _damage(path, how):
    if how == "random bytes":
        path.write_bytes(os.urandom(20000))
    elif how == "truncated":
        os.truncate(path, path.stat().st_size // 3)
    elif how == "overwritten page":
        with open(path, "r+b") as f:
            f.seek(4096 * 3)
            f.write(os.urandom(4096))
    else:  # someone else's database
        path.unlink()
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE users (id INTEGER, name TEXT)")


@pytest.mark.parametrize("how", ["random bytes", "truncated", "overwritten page", "foreign"])
@pytest.mark.parametrize("verb", [("status",), ("report", "e"), ("run", "design.yaml")])
def test_a_damaged_store_is_one_line_and_is_not_touched(home, how, verb):
    stored_experiment("e", DESIGN, [{"key": f"{a}-s{s}", "arm": a, "seed": s,
                                     "metrics": {"loss": [(1, 1.0 + s)]}}
                                    for a in ("base", "hot") for s in range(2)])
    (home.parent / "design.yaml").write_text(DESIGN, encoding="utf-8")
    path = home / "labcoat.db"
    with sqlite3.connect(path) as db:  # fold the write-ahead log into the file
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for extra in home.glob("labcoat.db-*"):
        extra.unlink()
    _damage(path, how)
    before = _digest(path)
    result = cli(*verb, cwd=home.parent)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stdout + result.stderr, lines
    assert str(path) in lines[0] and "has not changed it" in lines[0]
    assert _digest(path) == before
