"""Executor overhead: the same small experiment through local, slurm (submitit's local
executor) and ray (a Ray head started here on 127.0.0.1), timed end to end.

Baseline: the local executor (one subprocess per trial). The trials do
milliseconds of work, so the time is the executor's: starting a
job or an actor, and polling it. The Ray figure excludes starting the head (a cluster is
started once, not per run) but includes `labcoat run` joining it.

    .venv/bin/python benchmarks/executors.py [TRIALS_PER_ARM] [--quick]

The trials are benchmarks/_trial.py (no torch, milliseconds of work). --quick times
local and slurm only (starting a Ray head takes longer than the whole quick run).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness as bench

ROOT = bench.ROOT

LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # keep Ray on 127.0.0.1


def _run(design: Path, home: Path, *flags: str) -> float:
    env = {**os.environ, **LOOPBACK, "LABCOAT_HOME": str(home)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "labcoat.cli", "run", str(design), "--plain", *flags],
                   env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def _ray_head(temp: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **LOOPBACK,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                       os.environ.get("PYTHONPATH")]))}
    log = temp / "ray.log"
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", "--port", str(port),
         "--num-cpus", "2", "--include-dashboard=false", "--object-store-memory", "80000000",
         "--disable-usage-stats", "--temp-dir", str(temp / "ray"), "--block"],
        env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    while "Ray runtime started" not in log.read_text():
        if head.poll() is not None:
            raise SystemExit(log.read_text())
        time.sleep(0.2)
    return head, f"127.0.0.1:{port}"


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("trials_per_arm", type=int, nargs="?", default=2)
    args = bench.shrink(parser.parse_args(), trials_per_arm=1)
    seeds = args.trials_per_arm
    temp = Path(tempfile.mkdtemp(prefix="lc-bench-"))
    head = None
    try:
        results = {}
        for name, flags in (("local", ()), ("slurm", ("--executor", "slurm", "--slurm",
                                                      "cluster=local"))):
            design = bench.trial_design(temp / name, name=name, steps=3, seeds=seeds,
                                        parallelism=2)
            results[name] = _run(design, temp / f"home-{name}", *flags)
        if not args.quick:
            head, address = _ray_head(temp)
            design = bench.trial_design(temp / "ray", name="ray", steps=3, seeds=seeds,
                                        parallelism=2)
            results["ray"] = _run(design, temp / "home-ray", "--executor", "ray",
                                  "--address", address)
    finally:
        if head is not None:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)
    trials = 2 * seeds
    print(f"{trials} trials of 3 steps, 2 at a time; load average {os.getloadavg()[0]:.1f}")
    for name, seconds in results.items():
        ratio = seconds / results["local"]
        print(f"{name:6s} {seconds:6.2f} s  ({seconds / trials:.2f} s/trial)  "
              f"ratio to local {ratio:.2f}x")
    bench.save(args, {"trials": trials, "seconds": results})


if __name__ == "__main__":
    main()
