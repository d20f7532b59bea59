"""labcoat shrink on tinylm's three planted size bugs, from a run that takes about a minute
to fail to its smallest reproduction.

Each bug appears only above some size (`labcoat.workloads.tinylm._faults.SIZE_FAULTS`):
``deep_overflow`` (depth >= 2: NaN loss), ``long_mask_leak`` (rows longer than 16 tokens
with dropout: attention sees the future) and ``accumulation_no_zero_grad`` (accumulation > 1:
gradients pile up). One parent configuration has every size switched on (depth 4, rows of
32 tokens, dropout 0.1, accumulation 4, width 64, batch 64, ``--steps`` steps); per bug the
parent trial runs under `labcoat.runner` (as `labcoat run` would) and fails, then
``labcoat shrink EXP/TRIAL --json`` runs as a user would type it. Measured per bug: time to
failure of the original (rerun by shrink as candidate 0) over the minimal reproduction
(target >= 20x), parameter-count ratio, candidates tried (target <= 40), slips (target 0),
wall time of the whole shrink (target <= 5 min on 2 cores), and whether the answer is
1-minimal (every one-step-smaller neighbour ran and passed). `/proc/loadavg` is read
before and after each shrink: the machine may be shared.

    .venv/bin/python benchmarks/shrink.py [--steps 1500] [--bugs deep_overflow,...] [--quick]
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import _harness as bench

from labcoat import runner, store

BUGS = ("deep_overflow", "long_mask_leak", "accumulation_no_zero_grad")
# What each bug needs, for checking the answer (the rest may sit at its floor).
NEEDS = {
    "deep_overflow": {"depth": 2},
    "long_mask_leak": {"seq_len": 32, "dropout": 0.1},
    "accumulation_no_zero_grad": {"accumulation": 2},
}
PARENT = {"steps": 1500, "accumulation": 4, "batch_size": 64, "width": 64, "heads": 4,
          "depth": 4, "seq_len": 32, "dropout": 0.1}
# Halved in this order: steps first, so every later candidate is already short. Rows cut
# below 16 tokens lose the answers (a NaN loss from step 1: a slip), hence seq_len's floor.
FLOORS = {"steps": 8, "accumulation": 1, "batch_size": 2, "width": 8, "heads": 1, "depth": 1,
          "seq_len": 16}
# Params whose minimum depends on the data drawn, not only on the bug: the probe sees the
# leak only in a batch holding a row longer than 16 tokens (8 or 16 rows, as steps differ).
FREE = {"long_mask_leak": {"batch_size"}}
QUICK_PARENT = {"steps": 16, "accumulation": 1, "batch_size": 4, "width": 16, "heads": 2,
                "depth": 2, "seq_len": 8, "dropout": 0.0}
QUICK_FLOORS = {"steps": 8}  # two candidates: the original and steps 16 -> 8


def design(directory: Path, bug: str, parent: dict, floors: dict) -> Path:
    flags = " ".join(f"--{k.replace('_', '-')} {{{k}}}" for k in parent)
    features = "\n  features: {dropout: 0.0}" if "dropout" in floors or parent["dropout"] else ""
    path = directory / f"{bug}.yaml"
    params = ", ".join(f"{k}: {v}" for k, v in parent.items())
    path.write_text(f"""name: {bug.replace('_', '-')}
hypothesis: {{claim: the big run trains, metric: loss, direction: decrease}}
command: >-
  {{python}} -m labcoat.workloads.tinylm {flags} --threads 1 --eval-every 0 --eval-items 10
  --guard-stop-on error --guard-check-every 4 --guard-causal-every 4
  --fault {bug} --fault-at 0.5
params: {{{params}}}
arms: {{big: {{control: true}}, small: {{params: {{steps: 8}}}}}}
seeds: [0]
restart: {{retries: 0}}
shrink:
  params: {{{', '.join(f'{k}: {v}' for k, v in floors.items())}}}{features}
  budget: 2
  max_candidates: 40
""", encoding="utf-8")
    return path


def parent_failure(experiment: str) -> dict:
    """The parent trial's recorded failure (as shrink reads it)."""
    from labcoat.shrink import failure_of

    db = store.open_store()
    try:
        with db.session() as session:
            trial = store.find_trial(store.find_experiment(session, experiment), "big-s0")
            failure = failure_of(session, trial)
            return {"status": trial.status, "time_to_failure": failure.time_to_failure,
                    "wall": failure.wall,
                    "signature": None if failure.signature is None
                    else failure.signature.describe()}
    finally:
        db.close()


def shrink_one(directory: Path, bug: str, parent: dict, floors: dict) -> dict:
    from rich.console import Console

    path = design(directory, bug, parent, floors)
    experiment = bug.replace("_", "-")
    started = time.perf_counter()
    runner.run_design(path, only=["big-s0"], console=Console(file=io.StringIO()), plain=True,
                      parallelism=1)
    original = parent_failure(experiment) | {"run_s": time.perf_counter() - started}
    print(f"{bug}: parent {original['status']} after {original['time_to_failure']:.1f} s "
          f"({original['signature']})", flush=True)
    load_before = Path("/proc/loadavg").read_text().strip()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "labcoat.cli", "shrink", f"{experiment}/big-s0", "--json",
         "--out", str(directory / f"{bug}-min.yaml")],
        capture_output=True, text=True, cwd=directory, env={**os.environ, "COLUMNS": "120"})
    wall = time.perf_counter() - started
    load_after = Path("/proc/loadavg").read_text().strip()
    if done.returncode not in (0, 1):
        raise RuntimeError(f"labcoat shrink failed ({done.returncode}):\n{done.stderr}")
    result = json.loads(done.stdout)
    minimal = result["minimal"]
    # the one true minimum: what the bug needs, every other param at its floor, dropout off
    expected = {k: NEEDS[bug].get(k, floors.get(k, 0.0)) for k in minimal
                if k not in FREE.get(bug, ())}
    ttf, params = result["time_to_failure"], result["parameters"] or {}
    row = {
        "bug": bug, "parent": original, "signature": result["signature"],
        "reproduced": result["reproduced"], "minimal": minimal,
        "expected_minimum": expected,
        "at_expected_minimum": all(minimal[k] == v for k, v in expected.items()),
        "time_to_failure": ttf, "wall": result["wall"], "parameters": params,
        "candidates": len(result["candidates"]), "slips": result["slips"],
        "one_minimal": result["one_minimal"], "minimality": result["minimality"],
        "stopped": result["stopped"], "shrink_wall_s": wall,
        "load_before": load_before, "load_after": load_after,
        "command": result["command"],
        "tried": [(c["change"], c["outcome"], c["time_to_failure"], c["wall"])
                  for c in result["candidates"]],
        "progress_lines": len(done.stderr.splitlines()),
    }
    print(f"{bug}: {row['candidates']} candidates, {row['slips']} slips, "
          f"ttf {_f(ttf['original'])} -> {_f(ttf['minimal'])} s ({_f(ttf['ratio'])}x), "
          f"params {_f(params.get('ratio'))}x, shrink {wall:.0f} s, "
          f"1-minimal {row['one_minimal']}, expected minimum {row['at_expected_minimum']}; "
          f"load {load_before.split()[:3]} -> {load_after.split()[:3]}", flush=True)
    for change, outcome, t, w in row["tried"]:
        print(f"    {change}: {outcome} ttf {_f(t)} wall {_f(w)}")
    return row


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--steps", type=int, default=PARENT["steps"],
                        help="the parent's steps (it fails half-way)")
    parser.add_argument("--bugs", default=",".join(BUGS), help="comma-separated planted bugs")
    args = parser.parse_args()
    bugs = args.bugs.split(",") if not args.quick else ["deep_overflow"]
    parent = QUICK_PARENT if args.quick else {**PARENT, "steps": args.steps}
    floors = QUICK_FLOORS if args.quick else FLOORS
    rows = []
    with bench.temp_home() as home:
        for bug in bugs:
            rows.append(shrink_one(home, bug, parent, floors))
    bench.save(args, {"parent": parent, "floors": floors, "bugs": rows,
                      "cpus": os.cpu_count()})


if __name__ == "__main__":
    main()
