"""Journal ingestion throughput against a raw sqlite3 baseline, measured in the same run.

The runner ingests every trial's journal while trials run, so ingestion must
keep up with many trials logging every step. Baseline: the same rows inserted
with the stdlib sqlite3 module's executemany into an indexed table (no JSON
parsing, no ORM, no upsert) - the floor any ingestion could reach.

Run: .venv/bin/python benchmarks/ingest.py [points] [--quick]
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path

import _harness as bench


def write_journal(path: Path, steps: int) -> int:
    with open(path, "w") as f:
        f.write(json.dumps({"kind": "start", "v": 1, "time": 0.0}) + "\n")
        for step in range(steps):
            f.write(json.dumps({"kind": "log", "step": step, "time": 1.0,
                                "metrics": {"loss": 1.0 / (step + 1), "lr": 1e-3}}) + "\n")
    return steps * 2


def labcoat_ingest(journal_dir: Path) -> float:
    os.environ.pop("LABCOAT_DB", None)
    from labcoat import store
    from labcoat.runner import ingest_attempt
    from labcoat.spec import TrialSpec

    db = store.open_store()
    with db.session() as session:
        exp, _ = store.get_or_create_experiment(session, name="b", design_yaml="",
                                                design_hash="h")
        store.add_missing_trials(session, exp, [TrialSpec(key="t", arm="a", seed=0, params={},
                                                          command=[])])
        attempt = store.start_attempt(session, exp.trials[0], run_dir=str(journal_dir), host="h")
        session.commit()
        start = time.perf_counter()
        ingest_attempt(session, attempt)
        session.commit()
        elapsed = time.perf_counter() - start
    db.close()
    return elapsed


def sqlite_baseline(path: Path, steps: int) -> float:
    rows = [(1, name, step, value, 1.0) for step in range(steps)
            for name, value in (("loss", 1.0 / (step + 1)), ("lr", 1e-3))]
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE p (trial_id INT, name TEXT, step INT, value REAL, time REAL, "
                 "UNIQUE (name, trial_id, step))")
    start = time.perf_counter()
    conn.executemany("INSERT INTO p VALUES (?, ?, ?, ?, ?)", rows)
    conn.commit()
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("points", type=int, nargs="?", default=100_000)
    args = parser.parse_args()
    steps = (2_000 if args.quick else args.points) // 2
    with tempfile.TemporaryDirectory() as tmp, bench.temp_home():
        tmp = Path(tmp)
        (tmp / "run").mkdir()
        points = write_journal(tmp / "run" / "journal.jsonl", steps)
        ours = labcoat_ingest(tmp / "run")
        base = sqlite_baseline(tmp / "base.db", steps)
    print(f"points: {points}")
    print(f"labcoat ingest (parse JSON + upsert): {ours:.3f} s = {points / ours:,.0f} points/s")
    print(f"sqlite3 executemany baseline:         {base:.3f} s = {points / base:,.0f} points/s")
    print(f"ratio labcoat/baseline: {ours / base:.2f}x")
    bench.save(args, {"points": points, "labcoat_s": ours, "sqlite_s": base,
                      "ratio": ours / base})


if __name__ == "__main__":
    main()
