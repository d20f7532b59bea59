"""`labcoat import mlflow|tensorboard|wandb` against reading the same points through each
tool's own client, measured interleaved in one run.

Data: RUNS runs (2 arms x RUNS/2 seeds) of POINTS points of one metric, per source:
- MLflow SQLite store and mlruns/ file layout: runs, params and tags created by
  MlflowClient; the points go straight into MLflow's own `metrics` table / metric files
  in its line format (logging 1M points through the client would take minutes); the
  baseline reads them back with `MlflowClient.get_metric_history`, run by run.
- TensorBoard: every point written by torch's SummaryWriter; the baseline is
  `EventAccumulator(size_guidance={"scalars": 0})` (keep every point), `Reload`, `Scalars`.
- W&B: offline runs written by wandb itself (WANDB_MODE=offline; --wandb-runs of them,
  ~5 s each to write); the baseline is wandb's own reader of its run logs,
  `wandb leet inspect --json` (wandb-core, one process per run, LEET_THREADS at once).

"labcoat import" is the whole import (read, map, write into a fresh SQLite store, one
transaction); "labcoat reader" is the read alone, the part comparable to the clients.

Run: .venv/bin/python benchmarks/import_vs_clients.py [--runs 100] [--points 10000]
     [--wandb-runs 20] [--rounds 2] [--only ...] [--data DIR] [--quick]
--data DIR writes the sources there and reuses them on the next run (writing 100 W&B
runs takes minutes); without it they go to a temporary directory.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import _harness as bench
import numpy as np

METRIC = "loss"
LEET_THREADS = 8


def _values(run: int, points: int) -> np.ndarray:
    rng = np.random.default_rng(run)
    return (2.0 - np.linspace(0, 1, points) + rng.normal(0, 0.05, points)).astype(np.float64)


def write_mlflow(root: Path, runs: int, points: int, layout: str) -> tuple[Path, str, list[str]]:
    from mlflow import MlflowClient
    from mlflow.entities import Param

    if layout == "sqlite":
        path, uri = root / "mlflow.db", f"sqlite:///{root / 'mlflow.db'}"
    else:
        path, uri = root / "mlruns", f"file://{root / 'mlruns'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("bench")
    ids = []
    for i in range(runs):
        run = client.create_run(exp, run_name=f"r{i}")
        client.log_batch(run.info.run_id, params=[Param("arm", "ab"[i % 2]),
                                                  Param("seed", str(i // 2))])
        client.set_terminated(run.info.run_id)
        ids.append(run.info.run_id)
    if layout == "sqlite":
        with sqlite3.connect(path) as db:
            for i, run_id in enumerate(ids):
                db.executemany(
                    "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                    "VALUES (?, ?, ?, ?, ?, 0)",
                    [(METRIC, float(v), 1_700_000_000_000 + s, run_id, s)
                     for s, v in enumerate(_values(i, points))])
    else:
        for i, run_id in enumerate(ids):
            folder = next(path.glob(f"*/{run_id}")) / "metrics"
            folder.mkdir(exist_ok=True)
            (folder / METRIC).write_text("".join(
                f"{1_700_000_000_000 + s} {float(v)!r} {s}\n"
                for s, v in enumerate(_values(i, points))))
    return path, uri, ids


def write_tensorboard(root: Path, runs: int, points: int) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    for i in range(runs):
        with SummaryWriter(str(root / "runs" / f"arm={'ab'[i % 2]},seed={i // 2}"),
                           max_queue=1000) as w:
            for s, v in enumerate(_values(i, points)):
                w.add_scalar(METRIC, float(v), s)
    return root / "runs"


WANDB_WRITER = """
import sys, numpy as np, wandb
root, runs, points = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(runs):
    run = wandb.init(project="bench", dir=root, config={"arm": "ab"[i % 2], "seed": i // 2})
    v = 2.0 - np.linspace(0, 1, points) + np.random.default_rng(i).normal(0, 0.05, points)
    for s in range(points):
        run.log({"loss": float(v[s])}, step=s)
    run.finish()
"""


def write_wandb(root: Path, runs: int, points: int) -> Path:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "WANDB_DIR": str(root)}
    subprocess.run([sys.executable, "-c", WANDB_WRITER, str(root), str(runs), str(points)],
                   env=env, check=True, timeout=3600)
    return root / "wandb"


def wandb_leet(root: Path) -> int:
    """Every history point of `loss`, through `wandb leet inspect --json`, runs in parallel."""
    from importlib.util import find_spec

    core = Path(next(iter(find_spec("wandb").submodule_search_locations))) / "bin" / "wandb-core"

    def points(file: Path) -> int:
        out = subprocess.run([str(core), "leet", "inspect", "--json", "--no-observability",
                              "--run-file", str(file), str(file.parent.parent)],
                             capture_output=True, text=True, check=True).stdout
        return sum(METRIC in json.loads(line)["history"]["item"]
                   for line in out.splitlines() if '"type":"history"' in line[:64])

    with ThreadPoolExecutor(LEET_THREADS) as pool:
        return sum(pool.map(points, sorted(root.rglob("run-*.wandb"))))


def _reuse(folder: Path, runs: int, points: int, write) -> object:
    """`write(folder)` once: a later run with the same sizes reuses what it wrote."""
    done = folder / "written.json"
    key = {"runs": runs, "points": points}
    if done.is_file() and json.loads(done.read_text())["key"] == key:
        return json.loads(done.read_text())["result"]
    if folder.exists():
        import shutil
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    start = time.perf_counter()
    result = write(folder)
    print(f"({folder.name}: written in {time.perf_counter() - start:.0f} s)")
    done.write_text(json.dumps({"key": key, "result": result}, default=str))
    return json.loads(done.read_text())["result"]


def labcoat_import(tool: str, path: Path, arm_by: str, seed_by: str) -> int:
    from labcoat.runner import ImportHypothesis, import_runs

    with bench.temp_home():
        done = import_runs(tool, [path], experiment="bench", arm_by=arm_by, seed_by=seed_by,
                           hypothesis=ImportHypothesis(metric=METRIC, direction="decrease",
                                                       control="a"))
    return done.points


def labcoat_reader(tool: str, path: Path) -> int:
    from labcoat.runner._import_runs import _reader  # the read alone, for the comparison

    return sum(r.count() for r in _reader(tool)(path))


def mlflow_client(uri: str, ids: list[str]) -> int:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    return sum(len(client.get_metric_history(run_id, METRIC)) for run_id in ids)


def event_accumulator(root: Path) -> int:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    total = 0
    for run in sorted(p for p in root.iterdir() if p.is_dir()):
        acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
        acc.Reload()
        total += len(acc.Scalars(METRIC))
    return total


def _compare(name: str, arms: dict, rounds: int, expected: int, results: dict) -> None:
    counts = {k: f() for k, f in arms.items()}  # warm-up round, and every reader agrees
    assert set(counts.values()) == {expected}, counts
    times = bench.interleaved(arms, rounds)
    results[name] = {k: t.summary() for k, t in times.items()}
    base = next((t for k, t in times.items() if k not in ("labcoat import", "labcoat reader")),
                None)
    for k, t in times.items():
        ratio = f"  ({base.median / t.median:.1f}x faster than the client)" \
            if base is not None and t is not base else ""
        print(f"{name:18s} {k:22s} {t}{ratio}")


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--wandb-runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=["mlflow-sqlite", "mlflow-files",
                                                      "tensorboard", "wandb"])
    parser.add_argument("--data", help="write the sources here and reuse them next time")
    args = bench.shrink(parser.parse_args(), runs=6, points=2_000, wandb_runs=2, rounds=1)
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    print(f"{args.runs} runs x {args.points:,} points; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    results: dict = {"runs": args.runs, "points": args.points,
                     "load": os.getloadavg()[0], "cpus": os.cpu_count()}
    expected = args.runs * args.points
    with nullcontext(args.data) if args.data else tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for layout in ("sqlite", "files"):
            if f"mlflow-{layout}" not in args.only:
                continue
            path, uri, ids = _reuse(tmp / layout, args.runs, args.points, lambda d, lay=layout: [
                str(x) if isinstance(x, Path) else x
                for x in write_mlflow(d, args.runs, args.points,
                                      "sqlite" if lay == "sqlite" else "file")])
            path = Path(path)
            _compare(f"mlflow {layout}", {
                "labcoat import": lambda p=path: labcoat_import("mlflow", p, "arm", "seed"),
                "labcoat reader": lambda p=path: labcoat_reader("mlflow", p),
                "MlflowClient": lambda u=uri, i=ids: mlflow_client(u, i)},
                args.rounds, expected, results)
        if "tensorboard" in args.only:
            logdir = Path(_reuse(tmp / "tb", args.runs, args.points,
                                 lambda d: str(write_tensorboard(d, args.runs, args.points))))
            _compare("tensorboard", {
                "labcoat import": lambda: labcoat_import("tensorboard", logdir, "arm", "seed"),
                "labcoat reader": lambda: labcoat_reader("tensorboard", logdir),
                "EventAccumulator": lambda: event_accumulator(logdir)},
                args.rounds, expected, results)
        if "wandb" in args.only:
            root = Path(_reuse(tmp / "wb", args.wandb_runs, args.points,
                               lambda d: str(write_wandb(d, args.wandb_runs, args.points))))
            _compare(f"wandb ({args.wandb_runs} runs)", {
                "labcoat import": lambda: labcoat_import("wandb", root, "arm", "seed"),
                "labcoat reader": lambda: labcoat_reader("wandb", root),
                "wandb leet": lambda: wandb_leet(root)},
                args.rounds, args.wandb_runs * args.points, results)
    bench.save(args, results)


if __name__ == "__main__":
    main()
