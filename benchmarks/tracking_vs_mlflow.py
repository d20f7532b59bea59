"""Metric tracking against MLflow 3.x (local SQLite tracking store), measured in one run.

Write: a training script logs 100,000 scalar points (10 metrics x 10,000 steps), timed
until the points are queryable in a SQLite store, each arm a real subprocess:

- labcoat: the script logs through the SDK (`labcoat.init()`, one `run.log(step, m0=...,
  ..., m9=...)` per step, an ad-hoc run: the journal is the only thing it writes); then
  a reader process ingests it into the store (`labcoat.runner.ingest_adhoc_runs`, what
  every read command - `labcoat status`, `report`, `export`, `ui` - does first). The
  time is the sum of both processes' wall-clock times.
- MLflow, per point: `mlflow.log_metric(name, value, step=step)` 100,000 times.
- MLflow, per step: `mlflow.log_metrics({10 metrics}, step=step)` 10,000 times.
- MLflow, batched: `MlflowClient.log_batch` of 1,000 `Metric`s (MLflow's per-request
  maximum) every 100 steps.

Each store is created before its timing starts (MLflow's Alembic migrations, ~2 s, and
labcoat's schema are one-time costs), so every arm writes into an existing empty store.
After each arm, the points are counted and summed with sqlite3 straight from the store
file (all 100,000 there, values equal to the formula that made them).

Read: one metric of 100 trials (100 runs x 2 metrics x 2,000 steps in each store, built
once, not timed; 200,000 points read), each a fresh subprocess: labcoat's store query
(`store.metric_series`), `labcoat export r --metric m0` (its 200,000 points as JSON
lines, parsed by the benchmark), and MLflow's `MlflowClient.get_metric_history(run_id,
"m0")` for each of the 100 runs. The time inside the process (query only, after imports) and the
process's wall-clock time are both reported; values are checked equal across tools.

Arms run interleaved in every round; ratios are MLflow / labcoat per round
(min / median / max over rounds). MLflow per point commits one SQLite transaction per
call (4-30 ms each on this shared machine: 100,000 calls would take 6-50 minutes), so
that arm logs `--per-point-steps` steps (default 1,000 = 10,000 points) in the first
`--per-point-rounds` rounds, and its ratio is of throughputs (points/s), labcoat's
measured on the full 100,000 points.

Run:
  python3.11 -m venv /tmp/mlflow-venv && /tmp/mlflow-venv/bin/pip install 'mlflow>=3,<4'
  MLFLOW_PYTHON=/tmp/mlflow-venv/bin/python nice -n 10 .venv/bin/python \
      benchmarks/tracking_vs_mlflow.py [--rounds 3] [--per-point-rounds 1]
  (MLFLOW_PYTHON defaults to /tmp/mlflow-venv/bin/python; --quick is a smoke run on small
  sizes, skipped cleanly when MLflow's interpreter is absent)
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import _harness as bench

LABCOAT_PYTHON = sys.executable
MLFLOW_PYTHON = os.environ.get("MLFLOW_PYTHON", "/tmp/mlflow-venv/bin/python")
MLFLOW_INSTALL = ("python3.11 -m venv /tmp/mlflow-venv && /tmp/mlflow-venv/bin/pip install "
                "'mlflow>=3,<4'")
STEPS, METRICS = 10_000, 10
READ_TRIALS, READ_STEPS = 100, 2_000


def value(metric: int, step: int, seed: int = 0) -> float:
    """The value every arm logs for metric `metric` at `step` (exact in binary: no
    tool-specific rounding can hide)."""
    return (metric + 1 + seed) / (step + 1)


LABCOAT_TRIAL = """
import sys
import labcoat

steps, metrics, seeds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
names = [f"m{m}" for m in range(metrics)]
for seed in range(seeds):  # one trial per seed (the read test's store: 100 in one process)
    run = labcoat.init(experiment=sys.argv[4], seed=seed)
    for step in range(steps):
        run.log(step, **{name: (m + 1 + seed) / (step + 1) for m, name in enumerate(names)})
    run.finish()
"""

LABCOAT_INGEST = """
from labcoat import store
from labcoat.runner import ingest_adhoc_runs

db = store.open_store()
recorded = ingest_adhoc_runs(db)
db.close()
assert recorded, "nothing ingested"
"""

LABCOAT_READ = """
import json, sys, time
from labcoat import store

start = time.perf_counter()
db = store.open_store()
with db.session() as session:
    exp = store.find_experiment(session, sys.argv[1])
    series = store.metric_series(session, [t.id for t in exp.trials], "m0")
    keys = {t.id: t.seed for t in exp.trials}
    out = {keys[tid]: values for tid, (steps, values) in series.items()}
elapsed = time.perf_counter() - start
db.close()
print(json.dumps({"query_s": elapsed, "count": sum(len(v) for v in out.values()),
                  "check": sum(sum(v) * (seed + 1) for seed, v in out.items())}))
"""

MLFLOW_SETUP = """
import mlflow
mlflow.set_tracking_uri("sqlite:///mlflow.db")
mlflow.MlflowClient().search_experiments()
"""

MLFLOW_TRIAL = """
import sys, time
import mlflow
from mlflow import MlflowClient
from mlflow.entities import Metric

mode, steps, metrics, seeds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
names = [f"m{m}" for m in range(metrics)]
mlflow.set_tracking_uri("sqlite:///mlflow.db")
mlflow.set_experiment(sys.argv[5])
client = MlflowClient()
for seed in range(seeds):
    with mlflow.start_run(run_name=f"s{seed}") as run:
        batch = []
        for step in range(steps):
            values = {name: (m + 1 + seed) / (step + 1) for m, name in enumerate(names)}
            if mode == "point":
                for name, v in values.items():
                    mlflow.log_metric(name, v, step=step)
            elif mode == "step":
                mlflow.log_metrics(values, step=step)
            else:
                now = int(time.time() * 1000)
                batch.extend(Metric(name, v, now, step) for name, v in values.items())
                if len(batch) >= 1000:  # MLflow's maximum metrics per log_batch request
                    client.log_batch(run.info.run_id, metrics=batch)
                    batch = []
        if batch:
            client.log_batch(run.info.run_id, metrics=batch)
"""

MLFLOW_READ = """
import json, sys, time
import mlflow
from mlflow import MlflowClient

start = time.perf_counter()
client = MlflowClient(tracking_uri="sqlite:///mlflow.db")
exp = client.get_experiment_by_name(sys.argv[1])
runs = client.search_runs([exp.experiment_id], max_results=1000)
out = {}
for run in runs:
    history = sorted(client.get_metric_history(run.info.run_id, "m0"), key=lambda m: m.step)
    out[int(run.info.run_name[1:])] = [m.value for m in history]
elapsed = time.perf_counter() - start
print(json.dumps({"query_s": elapsed, "count": sum(len(v) for v in out.values()),
                  "check": sum(sum(v) * (seed + 1) for seed, v in out.items())}))
"""


def child_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(LABCOAT_HOME=str(home / "labcoat-home"), GIT_PYTHON_REFRESH="quiet",
               MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true")
    env.pop("LABCOAT_DB", None)
    return env


def run(python: str, script: Path, args: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([python, str(script), *args], cwd=cwd, env=child_env(cwd),
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{script.name} {args} failed:\n{done.stderr[-3000:]}")
    return elapsed, done.stdout


def scripts(root: Path) -> dict[str, Path]:
    paths = {}
    for name, text in (("labcoat_trial", LABCOAT_TRIAL), ("labcoat_ingest", LABCOAT_INGEST),
                       ("labcoat_read", LABCOAT_READ), ("mlflow_setup", MLFLOW_SETUP),
                       ("mlflow_trial", MLFLOW_TRIAL), ("mlflow_read", MLFLOW_READ)):
        paths[name] = root / f"{name}.py"
        paths[name].write_text(textwrap.dedent(text))
    return paths


def stored(db: Path, sql: str) -> tuple[int, float]:
    with sqlite3.connect(db) as conn:
        count, total = conn.execute(sql).fetchone()
    return count, total or 0.0


def check_write(db: Path, sql: str, tool: str, steps: int) -> None:
    count, total = stored(db, sql)
    expected = math.fsum(value(m, s) for m in range(METRICS) for s in range(steps))
    if count != steps * METRICS or not math.isclose(total, expected, rel_tol=1e-12):
        raise SystemExit(f"{tool}: {count} points summing to {total!r} stored; expected "
                         f"{steps * METRICS} summing to {expected!r}")


def write_labcoat(s: dict[str, Path], root: Path) -> float:
    root.mkdir()
    run(LABCOAT_PYTHON, s["labcoat_ingest"].with_name("labcoat_open.py"), [], root)
    trial, _ = run(LABCOAT_PYTHON, s["labcoat_trial"], [str(STEPS), str(METRICS), "1", "w"],
                   root)
    ingest, _ = run(LABCOAT_PYTHON, s["labcoat_ingest"], [], root)
    check_write(root / "labcoat-home" / "labcoat.db",
                "SELECT count(*), sum(value) FROM metric_point", "labcoat", STEPS)
    return trial + ingest


def write_mlflow(s: dict[str, Path], root: Path, mode: str, steps: int) -> float:
    root.mkdir()
    run(MLFLOW_PYTHON, s["mlflow_setup"], [], root)
    elapsed, _ = run(MLFLOW_PYTHON, s["mlflow_trial"], [mode, str(steps), str(METRICS), "1",
                                                        "w"], root)
    check_write(root / "mlflow.db", "SELECT count(*), sum(value) FROM metrics", f"mlflow {mode}",
                steps)
    return elapsed


def build_read_stores(s: dict[str, Path], root: Path) -> None:
    """100 trials x 2 metrics x READ_STEPS steps in each store (not timed)."""
    root.mkdir()
    run(MLFLOW_PYTHON, s["mlflow_setup"], [], root)
    run(LABCOAT_PYTHON, s["labcoat_ingest"].with_name("labcoat_open.py"), [], root)
    trials = str(READ_TRIALS)
    run(LABCOAT_PYTHON, s["labcoat_trial"], [str(READ_STEPS), "2", trials, "r"], root)
    run(MLFLOW_PYTHON, s["mlflow_trial"], ["batch", str(READ_STEPS), "2", trials, "r"], root)
    run(LABCOAT_PYTHON, s["labcoat_ingest"], [], root)
    # The second metric of each trial ("m0" beside "m0"): rename nothing, log it twice
    # under two names instead - done by giving the read stores a second metric below.


def summary(xs: list[float]) -> str:
    return f"{min(xs):7.2f} {statistics.median(xs):7.2f} {max(xs):7.2f}"


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-point-rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=STEPS, help="steps of the write test")
    parser.add_argument("--per-point-steps", type=int, default=1_000,
                        help="steps of MLflow's log_metric-per-point arm")
    parser.add_argument("--read-steps", type=int, default=READ_STEPS,
                        help="steps of each read-test trial")
    args = bench.shrink(parser.parse_args(), rounds=1, steps=200, per_point_steps=20,
                        read_steps=50)
    mlflow = bench.need_peer(args, "MLFLOW_PYTHON", MLFLOW_PYTHON, "MLflow", MLFLOW_INSTALL)
    globals().update(STEPS=args.steps, READ_STEPS=args.read_steps, MLFLOW_PYTHON=mlflow)
    if args.quick:
        globals().update(READ_TRIALS=5)
    mlflow_version = subprocess.run(
        [MLFLOW_PYTHON, "-c", "import mlflow; print(mlflow.__version__)"],
        capture_output=True, text=True, check=True).stdout.strip()
    import labcoat
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        s = scripts(root)
        s["labcoat_ingest"].with_name("labcoat_open.py").write_text(
            "from labcoat import store\nstore.open_store().close()\n")
        print(f"labcoat {labcoat.__version__} (python {sys.version.split()[0]}), mlflow "
              f"{mlflow_version} (sqlite store); {METRICS} metrics x {STEPS} steps = "
              f"{METRICS * STEPS:,} points; load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs", flush=True)
        times: dict[str, list[float]] = {}
        points = {"mlflow-point": METRICS * args.per_point_steps}
        for r in range(args.rounds):
            arms = ["labcoat", "mlflow-step", "mlflow-batch"]
            if r < args.per_point_rounds:
                arms.insert(2, "mlflow-point")
            if r % 2:
                arms.reverse()
            for arm in arms:
                where = root / f"w{r}-{arm}"
                n = points.get(arm, METRICS * STEPS)
                elapsed = (write_labcoat(s, where) if arm == "labcoat"
                           else write_mlflow(s, where, arm.split("-")[1], n // METRICS))
                times.setdefault(arm, []).append(elapsed)
                print(f"round {r + 1} {arm:13s} {n:7,} points {elapsed:8.2f} s  "
                      f"({n / elapsed:,.0f} points/s)  load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
        print("\nwrite until queryable, s (min median max over rounds); ratio = labcoat's "
              "points/s over MLflow's, per round")
        for arm, xs in times.items():
            n = points.get(arm, METRICS * STEPS)
            ratios = [(x / n) / (times["labcoat"][i] / (METRICS * STEPS))
                      for i, x in enumerate(xs)]
            print(f"  {arm:13s} {n:7,} points {summary(xs)}  ratio {summary(ratios)}  "
                  f"({len(xs)} rounds)")
        reads = read_benchmark(s, root / "read", args.rounds)
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    bench.save(args, {"mlflow": mlflow_version, "write_s": times, "read_s": reads})


def read_benchmark(s: dict[str, Path], root: Path, rounds: int) -> dict[str, list[float]]:
    build_read_stores(s, root)
    times: dict[str, list[float]] = {}
    inside: dict[str, list[float]] = {}
    expected = math.fsum((1 + seed) / (step + 1) * (seed + 1) for seed in range(READ_TRIALS)
                         for step in range(READ_STEPS))
    for r in range(rounds):
        arms = ["labcoat", "labcoat-export", "mlflow"]
        if r % 2:
            arms.reverse()
        for arm in arms:
            if arm == "labcoat-export":
                start = time.perf_counter()
                done = subprocess.run([str(Path(LABCOAT_PYTHON).with_name("labcoat")), "export",
                                       "r", "--metric", "m0"], cwd=root, env=child_env(root),
                                      capture_output=True, text=True, check=True)
                elapsed = time.perf_counter() - start
                rows = [json.loads(line) for line in done.stdout.splitlines()]
                loss = [row for row in rows if row["name"] == "m0"]
                got = {"count": len(loss), "check": math.fsum(
                    row["value"] * (row["seed"] + 1) for row in loss), "query_s": elapsed}
            else:
                python, script = ((LABCOAT_PYTHON, s["labcoat_read"]) if arm == "labcoat"
                                  else (MLFLOW_PYTHON, s["mlflow_read"]))
                elapsed, out = run(python, script, ["r"], root)
                got = json.loads(out)
            if got["count"] != READ_TRIALS * READ_STEPS or not math.isclose(
                    got["check"], expected, rel_tol=1e-12):
                raise SystemExit(f"read {arm}: {got} (expected {READ_TRIALS * READ_STEPS} "
                                 f"points, check {expected!r})")
            times.setdefault(arm, []).append(elapsed)
            inside.setdefault(arm, []).append(got["query_s"])
            print(f"read round {r + 1} {arm:15s} process {elapsed:6.2f} s, query "
                  f"{got['query_s']:6.3f} s  load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\nread one metric of {READ_TRIALS} trials ({READ_TRIALS * READ_STEPS:,} points), "
          "s (min median max); ratio MLflow/labcoat per round")
    for arm in times:
        ratios = [times["mlflow"][i] / x for i, x in enumerate(times[arm])]
        q_ratios = [inside["mlflow"][i] / x for i, x in enumerate(inside[arm])]
        print(f"  {arm:15s} process {summary(times[arm])} ratio {summary(ratios)} | query "
              f"{summary(inside[arm])} ratio {summary(q_ratios)}")
    return times


if __name__ == "__main__":
    main()
