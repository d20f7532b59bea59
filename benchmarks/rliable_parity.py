"""labcoat.stats.interval_estimates against rliable: speed and agreement of the intervals.

The same synthetic runs x tasks scores (saved as .npy) go to both. rliable needs its
own environment (it pins pandas < 3); point RLIABLE_PYTHON at that interpreter:

    python3 -m venv /tmp/rliable-venv
    /tmp/rliable-venv/bin/pip install rliable 'pandas<3' scipy numpy
    RLIABLE_PYTHON=/tmp/rliable-venv/bin/python .venv/bin/python benchmarks/rliable_parity.py

(RLIABLE_PYTHON defaults to /tmp/rliable-venv/bin/python when that exists; --quick is a
smoke run on small data, rliable included when present.)

rliable is timed as its README computes the four aggregates: one
`get_interval_estimates` call with a function returning [median, IQM, mean,
optimality gap] (--rliable-style readme), or one call per metric (per-metric).
Agreement is judged against Monte-Carlo error: labcoat is run with several seeds to
measure the spread (SD) of the interval endpoints at this number of replications,
and rliable is run twice with different global seeds (it draws its indices from
np.random's global state) to show its own run-to-run variation.

With --method bca, a third labcoat variant uses rliable's jackknife (delete one run
index from every task) instead of labcoat's (one run of one task), to separate that
deliberate difference from Monte-Carlo error. Compare BCa with --rliable-style
per-metric: see the option's help for why the README style gets BCa wrong.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness as bench
import numpy as np

from labcoat.stats._bootstrap import (
    METRICS,
    _acceleration,
    _evaluate,
    _index_chunks,
    _interval,
    _replicates,
    interval_estimates,
)

RLIABLE_SCRIPT = r"""
import json, sys, time
from pathlib import Path
import numpy as np
from absl import logging
from rliable import library as rly
from rliable import metrics

logging.set_verbosity(logging.WARNING)
folder, reps, method = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
seed, style = int(sys.argv[4]), sys.argv[5]
names = json.loads((folder / "names.json").read_text())
scores = {name: np.load(folder / f"{name}.npy") for name in names}
functions = {"median": metrics.aggregate_median, "iqm": metrics.aggregate_iqm,
             "mean": metrics.aggregate_mean, "optimality_gap": metrics.aggregate_optimality_gap}
np.random.seed(seed)  # rliable's StratifiedBootstrap draws from the global state
out = {name: {} for name in names}
start = time.perf_counter()
if style == "readme":  # one bootstrap, a function returning all four (rliable's README)
    order = list(functions)
    aggregate = lambda x: np.array([functions[m](x) for m in order])
    points, intervals = rly.get_interval_estimates(scores, aggregate, reps=reps, method=method)
    for name in names:
        for i, m in enumerate(order):
            out[name][m] = [float(points[name][i]), float(intervals[name][0, i]),
                            float(intervals[name][1, i])]
else:  # one bootstrap per metric, scalar functions
    for m, f in functions.items():
        points, intervals = rly.get_interval_estimates(
            scores, lambda x, f=f: np.array([f(x)]), reps=reps, method=method)
        for name in names:
            out[name][m] = [float(points[name][0]), float(intervals[name][0, 0]),
                            float(intervals[name][1, 0])]
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "intervals": out}))
"""


def synthetic_scores(algorithms: int, runs: int, tasks: int, seed: int) -> dict[str, np.ndarray]:
    """Atari-100k-like normalized scores: skewed across tasks, a few above 1, run noise."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0.0, 0.8, size=tasks)
    scores = {}
    for a in range(algorithms):
        task_means = np.exp(np.log(0.25 + 0.08 * a) + difficulty)
        scores[f"algo{a}"] = task_means * rng.lognormal(-0.08, 0.4, size=(runs, tasks))
    return scores


def labcoat_table(scores, reps: int, method: str, seed: int) -> dict:
    found = interval_estimates(scores, metric=METRICS, reps=reps, seed=seed, method=method)
    return {name: {m: [iv.point, iv.low, iv.high] for m, iv in by.items()}
            for name, by in found.items()}


def labcoat_row_jackknife_bca(scores, reps: int, seed: int) -> dict:
    """labcoat's resamples with rliable's BCa acceleration: arch's jackknife deletes one
    run index from every task at once (labcoat deletes one run of one task). Isolates
    the one deliberate difference between the two BCa intervals."""
    table = {}
    for name, x in scores.items():
        runs, tasks = x.shape
        metrics = [(m, m) for m in METRICS]
        chunks = _index_chunks(np.random.default_rng(seed), reps, runs, tasks, False)
        replicates = _replicates(x, metrics, chunks, reps, 1.0)
        dropped = np.stack([np.delete(x, r, axis=0) for r in range(runs)])
        table[name] = {}
        for m in METRICS:
            accel = float(_acceleration(_evaluate(dropped, m, m, 1.0)[:, None]))
            point = float(_evaluate(x[None], m, m, 1.0)[0])
            iv = _interval(point, replicates[m], "bca", 0.95, accel, runs, name, stacklevel=2)
            table[name][m] = [iv.point, iv.low, iv.high]
    return table


def run_rliable(python: str, folder: Path, reps: int, method: str, seed: int,
                style: str) -> dict:
    done = subprocess.run(
        [python, "-c", RLIABLE_SCRIPT, str(folder), str(reps), method, str(seed), style],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        sys.exit(f"rliable run failed ({python}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def endpoints(table: dict) -> np.ndarray:
    """(algorithms, metrics, 2) low/high in a fixed order."""
    return np.array([[table[name][m][1:] for m in METRICS] for name in sorted(table)])


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--algorithms", type=int, default=7)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=26)
    parser.add_argument("--reps", type=int, default=50_000)
    parser.add_argument("--method", choices=["percentile", "bca"], default="percentile")
    parser.add_argument("--labcoat-seeds", type=int, default=20,
                        help="labcoat runs with different seeds to measure Monte-Carlo spread")
    parser.add_argument("--rliable-repeats", type=int, default=2)
    parser.add_argument(
        "--rliable-style", choices=["readme", "per-metric"], default="readme",
        help="readme: one bootstrap with a function returning all four metrics (rliable's "
             "README); per-metric: one bootstrap per metric. For BCa use per-metric: with a "
             "vector-valued function arch 7.2 centres every metric's jackknife values on "
             "their pooled mean, so each acceleration is about +-1/(6 sqrt(runs))")
    args = bench.shrink(parser.parse_args(), algorithms=3, runs=5, tasks=5, reps=200,
                        labcoat_seeds=2, rliable_repeats=1)

    scores = synthetic_scores(args.algorithms, args.runs, args.tasks, seed=2021)
    print(f"data: {args.algorithms} algorithms x {args.runs} runs x {args.tasks} tasks, "
          f"reps={args.reps}, method={args.method}, metrics: {', '.join(METRICS)}")

    interval_estimates(scores, metric=METRICS, reps=100, seed=0)  # warm-up (imports, caches)
    start = time.perf_counter()
    labcoat = labcoat_table(scores, args.reps, args.method, seed=0)
    labcoat_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for m in METRICS:
        interval_estimates(scores, metric=m, reps=args.reps, seed=0, method=args.method)
    separate_seconds = time.perf_counter() - start
    print(f"labcoat, all four metrics in one call: {labcoat_seconds:6.2f} s")
    print(f"labcoat, one call per metric:          {separate_seconds:6.2f} s")

    # Monte-Carlo spread of each endpoint at this many reps, from labcoat's own seeds, in
    # units of the bootstrap SE and pooled per metric (an SD from a few seeds is itself
    # noisy; in SE units it is nearly constant across algorithms and endpoints).
    runs = np.stack([endpoints(labcoat_table(scores, args.reps, args.method, seed=s))
                     for s in range(1, args.labcoat_seeds + 1)])
    ses = np.array([[interval_estimates({n: scores[n]}, metric=m, reps=2000, seed=0)[n].se
                     for m in METRICS] for n in sorted(scores)])[..., None]
    ratio = runs.std(axis=0, ddof=1) / ses
    pooled = np.median(ratio, axis=(0, 2))  # per metric
    mc_sd = pooled[None, :, None] * ses
    print(f"Monte-Carlo SD of an endpoint ({args.labcoat_seeds} labcoat seeds), in bootstrap "
          "SEs: " + ", ".join(f"{m} {r:.3f}" for m, r in zip(METRICS, pooled, strict=True)))

    results = {"labcoat_s": labcoat_seconds, "labcoat_per_metric_s": separate_seconds,
               "mc_sd_in_se": dict(zip(METRICS, pooled, strict=True))}
    python = bench.peer_python("RLIABLE_PYTHON", "/tmp/rliable-venv/bin/python")
    if not python:
        print("no rliable interpreter (RLIABLE_PYTHON, /tmp/rliable-venv): skipping rliable. "
              "Create its environment with\n"
              "  python3 -m venv /tmp/rliable-venv && /tmp/rliable-venv/bin/pip install "
              "rliable 'pandas<3' scipy numpy\n"
              "and rerun with RLIABLE_PYTHON=/tmp/rliable-venv/bin/python")
        bench.save(args, results)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, x in scores.items():
            np.save(folder / f"{name}.npy", x)
        (folder / "names.json").write_text(json.dumps(list(scores)))
        rliable = [run_rliable(python, folder, args.reps, args.method, s, args.rliable_style)
                   for s in range(1, args.rliable_repeats + 1)]

    seconds = [r["seconds"] for r in rliable]
    print(f"rliable, all four metrics ({args.rliable_style}): "
          + ", ".join(f"{s:6.2f} s" for s in seconds))
    print(f"speed ratio rliable/labcoat: {np.mean(seconds) / labcoat_seconds:.1f}x "
          f"(one call per metric: {np.mean(seconds) / separate_seconds:.1f}x)")

    points_diff = max(abs(labcoat[n][m][0] - rliable[0]["intervals"][n][m][0])
                      for n in scores for m in METRICS)
    print(f"max |point difference|: {points_diff:.2e}")
    # A difference of two independent runs has SD sqrt(2) x the per-run Monte-Carlo SD.
    scale = np.sqrt(2) * mc_sd
    ours = endpoints(labcoat)
    theirs = [endpoints(r["intervals"]) for r in rliable]
    print(f"endpoint differences over {ours.size} endpoints, in Monte-Carlo SDs of a "
          f"difference (|N(0,1)|: max ~{_expected_max_abs_normal(ours.size):.1f}, "
          "mean 0.80, signed mean 0 +- 0.13):")
    pairs = [("labcoat vs rliable", ours, theirs[0])]
    if args.method == "bca":
        row = endpoints(labcoat_row_jackknife_bca(scores, args.reps, seed=0))
        pairs.append(("labcoat, row jackknife, vs rliable", row, theirs[0]))
    pairs += [(f"rliable vs rliable (seeds 1, {k + 2})", other, theirs[0])
              for k, other in enumerate(theirs[1:])]
    for label, a, b in pairs:
        z = (a - b) / scale
        print(f"  {label:<34} max |z| {np.abs(z).max():.2f}, mean |z| {np.abs(z).mean():.2f}, "
              f"signed mean {z.mean():+.2f}; max |diff| {np.max(np.abs(a - b) / ses):.3f} "
              "bootstrap SEs")
    z = np.abs(ours - theirs[0]) / scale
    worst = np.unravel_index(np.argmax(z), z.shape)
    name, metric = sorted(scores)[worst[0]], METRICS[worst[1]]
    print(f"largest gap: {name} {metric} {'low' if worst[2] == 0 else 'high'}: labcoat "
          f"{ours[worst]:.4f}, rliable {theirs[0][worst]:.4f}")
    bench.save(args, {**results, "rliable_s": seconds, "max_point_diff": points_diff})


def _expected_max_abs_normal(n: int) -> float:
    """Median of the max of n |N(0,1)|: solve (2 Phi(m) - 1)^n = 1/2."""
    from scipy.stats import norm

    return float(norm.ppf((1 + 0.5 ** (1 / n)) / 2))


if __name__ == "__main__":
    main()
