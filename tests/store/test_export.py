"""`labcoat export`: every metric point as the documented JSON line, checked against the
store's rows read with sqlite3 and encoded by json.dumps (an independent reference), and
`--metric` selecting one metric's lines."""

import json
import math
import sqlite3

from helpers import cli, stored_experiment

DESIGN = "name: ex\nhypothesis: {claim: c, metric: loss}\ncommand: python t.py\nseeds: 2\n"
NAMES = ["loss", 'say "hi"', "über/acc", "eval/items"]


def _trials() -> list[dict]:
    values = [0.1, 1e-300, 12345678.9, float("nan"), float("inf"), -float("inf"), 2.0 / 3]
    return [{"key": f"main-s{seed}", "arm": "main", "seed": seed,
             "metrics": {name: [(step, values[(step + k + seed) % len(values)])
                                for step in range(7)] for k, name in enumerate(NAMES)}}
            for seed in range(2)]


def _reference(home) -> list[str]:
    with sqlite3.connect(home / "labcoat.db") as db:
        rows = db.execute(
            "SELECT t.key, t.arm, t.seed, p.name, p.step, p.value FROM metric_point p "
            "JOIN trial t ON t.id = p.trial_id ORDER BY p.trial_id, p.name, p.step").fetchall()
    return [json.dumps({"trial": key, "arm": arm, "seed": seed, "name": name, "step": step,
                        "value": None if value is None or not math.isfinite(value) else value})
            for key, arm, seed, name, step, value in rows]


def test_export_writes_the_stores_points_as_strict_json_lines(home):
    stored_experiment("ex", DESIGN, _trials())
    lines = cli("export", "ex", check=True).stdout.splitlines()
    assert lines == _reference(home)
    assert len(lines) == 2 * len(NAMES) * 7
    for line in lines:
        json.loads(line, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    one = cli("export", "ex", "--metric", 'say "hi"', check=True).stdout.splitlines()
    assert one == [line for line in lines if json.loads(line)["name"] == 'say "hi"']
    bad = cli("export", "ex", "--items", "--metric", "loss")
    assert bad.returncode == 2 and "--metric" in bad.stderr and "Traceback" not in bad.stderr
