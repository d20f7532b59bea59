"""Goodput under injected failures: labcoat's tuned checkpoint interval against fixed ones.

Real tinylm training processes (one torch thread each) are killed with SIGKILL
at exponentially distributed times (a Poisson process with mean `--mtbf`
seconds, drawn once per seed, so every policy sees the same failure times,
counted from the start of its run) and restarted at once, as labcoat's
supervisor does, until one reaches the last step. Each attempt logs through
the labcoat SDK to its own journal; the time lost is read from it:

- checkpoint stall: ``stall_s`` of the ``checkpoint.saved`` events;
- restart: process start, imports and model build of every attempt after the
  first (an attempt killed before its first step counts whole);
- restore: the time ``Checkpointer.restore`` took (a subclass times it);
- re-done: steps computed again after a restart x the step time, plus
  the time from an attempt's last journal record to its kill;
- fixed: the first start and the final evaluation and exit (any run has them);
- other: the rest of the wall-clock time (step-time noise, journal writes).

Productive time is the number of steps x the run's mean step time (from its
journals, the steps that end with a save excluded), so that load from other
processes slows productive and lost work alike. A calibration run without
failures measures the step time and the save stall C that set the fixed
intervals, and the fixed costs. The effective training time ratio is
productive / wall-clock. Next to each measurement is the prediction of the
exponential-failure model (Daly 2006, "A higher order estimate of the optimum
checkpoint interval for restart dumps"): a segment of tau seconds of
work plus a save of C seconds, with restart cost R, takes on average
MTBF * exp(R / MTBF) * (exp((tau + C) / MTBF) - 1) seconds, to first order
tau + C + (tau / 2 + R) * tau / MTBF: lost fraction C / tau + (tau / 2 + R) / MTBF,
minimized by Young's tau = sqrt(2 * C * MTBF). With asynchronous saves a
checkpoint is durable only when its background write ends, so a failure loses
that much more on average: it is added to R.

Policies (``--policies``):
    tuned      labcoat's interval (``--checkpoint-every 0``, LABCOAT_MTBF_SECONDS = the true MTBF):
               Young/Daly, bounded by the 2% overhead budget and the write time
    unbounded  the same with ``overhead_budget=1`` (the budget never binds)
    yd         fixed at Young's interval from the calibrated C and the true MTBF
    frequent   fixed at `--frequent` x Young's interval (too often)
    rare       fixed at `--rare` x Young's interval (too rarely)

Each process runs the tinylm CLI (``labcoat.workloads.tinylm.__main__.main``)
with its ``Checkpointer`` replaced by a subclass that times ``restore()`` and
sets the saving mode: synchronous by default (``--saves sync``), so that a save
stalls training long enough for the interval to matter; ``--saves async`` is
the CLI's own mode.

    .venv/bin/python benchmarks/goodput.py [--seeds 0,1] [--mtbf 20] [--steps 1500] [--width 256]
        [--depth 4] [--batch-size 8] [--saves sync|async] [--parallel 2] [--dir DIR] [--quick]

--quick: the Young-Daly policy only, on a tiny model for 100 steps (a smoke run).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _harness as bench
import numpy as np

from labcoat.sdk import read_journal

CHILD_FLAG = "--tinylm-child"  # argv[1] of a child: tinylm with patched checkpoint settings
POLICIES = ("tuned", "unbounded", "yd", "frequent", "rare")
MAX_ATTEMPTS = 500  # a run that needs more raises (the MTBF is too short for it)
_live: set[subprocess.Popen[bytes]] = set()  # training processes running now, killed on exit


# --- running one training run under injected failures -------------------------------------------


@dataclass
class Attempt:
    """One process: when it was started and ended (wall clock, time.time()), and how."""

    popen: float
    end: float
    killed: bool
    returncode: int
    journal: Path


@dataclass
class Job:
    """One training run: a policy under one failure schedule (or the calibration run)."""

    name: str
    seed: int | None  # failure-schedule seed; None: no failures
    every: int = 0  # --checkpoint-every (0: labcoat's policy)
    budget: float | None = None  # overhead_budget override (None: labcoat's default)
    steps: int = 0
    attempts: list[Attempt] = field(default_factory=list)


def failure_times(seed: int, mtbf_s: float, horizon_s: float) -> list[float]:
    """Failure times in seconds from the start of a run: a Poisson process with mean gap mtbf_s,
    up to horizon_s; the same seed gives the same times for every policy."""
    rng = np.random.default_rng(seed)
    times: list[float] = []
    t = 0.0
    while t < horizon_s:
        t += float(rng.exponential(mtbf_s))
        times.append(t)
    return times


def child_command(job: Job, args: argparse.Namespace, ckpt_dir: Path) -> list[str]:
    tinylm = ["--threads", "1", "--width", str(args.width), "--depth", str(args.depth),
              "--heads", str(args.heads), "--batch-size", str(args.batch_size),
              "--steps", str(job.steps), "--eval-every", "0", "--eval-items", str(args.eval_items),
              "--checkpoint-dir", str(ckpt_dir), "--checkpoint-every", str(job.every)]
    budget = "default" if job.budget is None else repr(job.budget)
    return [sys.executable, str(Path(__file__).absolute()), CHILD_FLAG, args.saves, budget,
            *tinylm]


def run_job(job: Job, args: argparse.Namespace, workdir: Path, kills: list[float]) -> None:
    """Train until the last step, killing the process at each time in `kills` (seconds from the
    start of the run) and restarting it at once."""
    root = workdir / (job.name if job.seed is None else f"{job.name}-seed{job.seed}")
    ckpt_dir = root / "checkpoints"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               LABCOAT_MTBF_SECONDS=repr(float(args.mtbf)), LABCOAT_HOME=str(root / "home"))
    env.pop("LABCOAT_CHECKPOINT_DIR", None)
    pending = list(kills)
    start = time.time()
    for number in range(1, MAX_ATTEMPTS + 1):
        journal = root / f"attempt-{number}" / "journal.jsonl"
        journal.parent.mkdir(parents=True)
        env["LABCOAT_JOURNAL"] = str(journal)
        with open(journal.parent / "output.txt", "wb") as out:
            popen = time.time()
            proc = subprocess.Popen(child_command(job, args, ckpt_dir), env=env, stdout=out,
                                    stderr=subprocess.STDOUT)
            _live.add(proc)
            while pending and start + pending[0] <= popen:  # failures while nothing ran
                pending.pop(0)
            timeout = None if not pending else max(0.0, start + pending[0] - time.time())
            try:
                returncode = proc.wait(timeout=timeout)
                killed = False
            except subprocess.TimeoutExpired:
                proc.kill()  # SIGKILL
                returncode = proc.wait()
                killed = True
                pending.pop(0)
            end = time.time()
            _live.discard(proc)
        job.attempts.append(Attempt(popen, end, killed, returncode, journal))
        if not killed:
            if returncode != 0:
                raise RuntimeError(f"{job.name}: attempt {number} exited with {returncode}; "
                                   f"see {journal.parent / 'output.txt'}")
            return
    raise RuntimeError(f"{job.name}: not finished after {MAX_ATTEMPTS} attempts; "
                       "use a longer --mtbf or fewer --steps")


def run_all(jobs: list[Job], workers: int, work: Callable[[Job], None]) -> None:
    """Run `work(job)` for every job, `workers` at a time, in list order."""
    queue = list(jobs)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                if not queue or errors:
                    return
                job = queue.pop(0)
            try:
                work(job)
            except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
                with lock:
                    errors.append(err)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# --- reading the journals ---------------------------------------------------------------------


@dataclass
class Timeline:
    """What one attempt's journal says; times are time.time() seconds."""

    start: float | None = None  # the journal's start record (after imports)
    ready: float | None = None  # checkpoint.restored / fresh_start (model built, state loaded)
    restored_step: int = 0
    restore_s: float = 0.0  # the time restore() took (goodput.restore)
    logs: list[tuple[int, float]] = field(default_factory=list)  # (step, time) of each step
    saves: list[dict[str, Any]] = field(default_factory=list)  # checkpoint.saved data + time
    last_record: float | None = None


def timeline(journal: Path) -> Timeline:
    out = Timeline()
    for _, rec in read_journal(journal).records:
        kind, when = rec.get("kind"), rec.get("time")
        if kind == "start":
            out.start = when
        elif kind == "event" and rec["event"] in ("checkpoint.restored", "checkpoint.fresh_start"):
            out.ready = when
            out.restored_step = int(rec["step"] or 0)
        elif kind == "event" and rec["event"] == "goodput.restore":
            out.restore_s = rec["data"]["seconds"]
        elif kind == "event" and rec["event"] == "checkpoint.saved":
            out.saves.append(dict(rec["data"], step=rec["step"], time=when))
        elif kind == "log" and "loss" in rec["metrics"]:
            out.logs.append((int(rec["step"]), when))
        if kind in ("log", "event"):
            out.last_record = when
    return out


@dataclass
class Calibration:
    """Clean costs from a run without failures."""

    step_s: float  # median time of a training step
    cost_s: float  # median save stall C (first save excluded: it allocates)
    write_s: float  # median write time of a save
    startup_s: float  # process start to first step (imports, model build, fresh start)
    tail_s: float  # last step to exit (final evaluation, close)


def step_times(tl: Timeline) -> list[float]:
    """Seconds between consecutive steps' log records, minus the stall of a save between them."""
    stall = {s["step"]: s["stall_s"] for s in tl.saves}
    return [t - t0 - stall.get(s0, 0.0)
            for (s0, t0), (_, t) in zip(tl.logs, tl.logs[1:], strict=False)]


def calibrate(job: Job) -> Calibration:
    (attempt,) = job.attempts
    tl = timeline(attempt.journal)
    gaps = step_times(tl)
    stalls = [s["stall_s"] for s in tl.saves[1:]]
    if not gaps or not stalls or tl.ready is None or tl.start is None:
        raise RuntimeError(f"calibration journal {attempt.journal} lacks steps or saves")
    last_step, last_time = tl.logs[-1]
    last_stall = sum(s["stall_s"] for s in tl.saves if s["step"] == last_step)
    return Calibration(
        step_s=statistics.median(gaps), cost_s=statistics.median(stalls),
        write_s=statistics.median(s["write_s"] for s in tl.saves[1:]),
        startup_s=tl.ready - attempt.popen,
        tail_s=attempt.end - last_time - last_stall)


@dataclass
class Breakdown:
    """Where one run's wall-clock time went, in seconds (they sum to `wall`).

    Steps are costed at this run's mean step time `step_s` (saves excluded), so
    that load from other processes on the machine slows productive and lost
    work alike.
    """

    wall: float
    step_s: float
    productive: float = 0.0
    stall: float = 0.0
    restore: float = 0.0
    restart: float = 0.0
    redone: float = 0.0
    fixed: float = 0.0
    other: float = 0.0
    kills: int = 0
    saves: int = 0
    tau_s: float = math.nan  # mean compute time between saves
    cost_s: float = math.nan  # mean stall per save
    restarts: list[float] = field(default_factory=list)  # start-to-ready of attempts 2..

    @property
    def ratio(self) -> float:
        return self.productive / self.wall


def breakdown(job: Job, cal: Calibration) -> Breakdown:
    first, last = job.attempts[0], job.attempts[-1]
    timelines = [timeline(a.journal) for a in job.attempts]
    step_s = statistics.fmean(g for tl in timelines for g in step_times(tl))
    out = Breakdown(wall=last.end - first.popen, step_s=step_s, productive=job.steps * step_s)
    computed = 0
    stalls: list[float] = []
    intervals: list[int] = []
    for number, (attempt, tl) in enumerate(zip(job.attempts, timelines, strict=True)):
        out.kills += attempt.killed
        if tl.ready is None:  # killed while starting
            out.restart += attempt.end - attempt.popen
            continue
        setup = tl.ready - attempt.popen
        restore = tl.restore_s if number else 0.0
        if number:
            out.restore += restore
            out.restart += setup - restore
            out.restarts.append(setup)
        else:
            out.fixed += setup
        stall = sum(s["stall_s"] for s in tl.saves)
        stalls += [s["stall_s"] for s in tl.saves]
        steps = [s["step"] for s in tl.saves]
        intervals += [b - a for a, b in zip(steps, steps[1:], strict=False)]
        out.stall += stall
        n = tl.logs[-1][0] - tl.restored_step if tl.logs else 0
        computed += n
        if attempt.killed:
            out.redone += attempt.end - (tl.last_record or tl.ready)
        else:
            last_step, last_time = tl.logs[-1] if tl.logs else (job.steps, tl.ready)
            out.fixed += attempt.end - last_time - sum(s["stall_s"] for s in tl.saves
                                                       if s["step"] == last_step)
    out.redone += (computed - job.steps) * step_s
    out.saves = len(stalls)
    out.cost_s = statistics.fmean(stalls) if stalls else math.nan
    if job.every:
        out.tau_s = job.every * step_s
    elif intervals:
        out.tau_s = statistics.fmean(intervals) * step_s
    out.other = out.wall - (out.productive + out.stall + out.restore + out.restart + out.redone
                            + out.fixed)
    return out


# --- the model ----------------------------------------------------------------------------------


def predicted_wall(work_s: float, tau_s: float, cost_s: float, restart_s: float, mtbf_s: float,
                   fixed_s: float) -> float:
    """Expected wall-clock seconds to do `work_s` of training in segments of `tau_s`, each ended
    by a save stalling `cost_s`, under exponential failures (mean gap `mtbf_s`) that each cost a
    restart of `restart_s` plus the work since the last save (Daly 2006), plus the
    failure-free fixed costs `fixed_s`."""
    segment = mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1((tau_s + cost_s) / mtbf_s)
    return fixed_s + work_s / tau_s * segment


def best_interval(work_s: float, cost_s: float, restart_s: float, mtbf_s: float,
                  fixed_s: float) -> float:
    """The tau minimizing `predicted_wall` (golden-section search on log tau)."""
    def f(log_tau: float) -> float:
        return predicted_wall(work_s, math.exp(log_tau), cost_s, restart_s, mtbf_s, fixed_s)

    lo, hi = math.log(1e-3), math.log(10 * mtbf_s)
    g = (math.sqrt(5) - 1) / 2
    for _ in range(100):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if f(a) < f(b):
            hi = b
        else:
            lo = a
    return math.exp((lo + hi) / 2)


# --- the benchmark ------------------------------------------------------------------------------


def child_main(argv: list[str]) -> int:
    """Run the tinylm CLI with the benchmark's saving mode and overhead budget, and with
    ``restore()`` timed in the journal (a ``goodput.restore`` event)."""
    from labcoat.torch import Checkpointer
    from labcoat.workloads.tinylm import __main__ as tinylm

    saves, budget, *rest = argv
    options: dict[str, Any] = {"asynchronous": saves == "async"}
    if budget != "default":
        options["overhead_budget"] = float(budget)

    class TimedCheckpointer(Checkpointer):
        def __init__(self, *positional: Any, **keywords: Any) -> None:
            super().__init__(*positional, **keywords, **options)

        def restore(self) -> int:
            began = time.perf_counter()
            step = super().restore()
            if self.run is not None:
                self.run.event("goodput.restore", step=step, seconds=time.perf_counter() - began)
            return step

    tinylm.Checkpointer = TimedCheckpointer  # type: ignore[misc]
    return tinylm.main(rest)


def parse_args() -> argparse.Namespace:
    parser = bench.parser(__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--seeds", default="0", help="failure-schedule seeds, comma-separated")
    parser.add_argument("--mtbf", type=float, default=20.0, help="mean time between failures, s")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help=f"comma-separated subset of {', '.join(POLICIES)}")
    parser.add_argument("--frequent", type=float, default=0.125,
                        help="the frequent fixed interval, as a multiple of Young's")
    parser.add_argument("--rare", type=float, default=5.0,
                        help="the rare fixed interval, as a multiple of Young's")
    parser.add_argument("--saves", choices=("sync", "async"), default="sync",
                        help="checkpoint saving mode (async: the tinylm CLI as shipped)")
    parser.add_argument("--steps", type=int, default=1500, help="training steps per run")
    parser.add_argument("--calibration-steps", type=int, default=300)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--eval-items", type=int, default=20,
                        help="held-out items per task in the final evaluation")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time (1 core each)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="keep the runs' journals and checkpoints in DIR/goodput-<time> "
                             "(default: a temporary directory, removed)")
    args = bench.shrink(parser.parse_args(), policies="yd", steps=100, calibration_steps=160,
                        width=32, depth=1, heads=2, eval_items=2, mtbf=30.0)
    args.seed_list = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.policy_list = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = sorted(set(args.policy_list) - set(POLICIES))
    if unknown or not args.policy_list:
        parser.error(f"--policies: unknown {unknown or args.policies!r}; "
                     f"choose from {', '.join(POLICIES)}")
    if not args.seed_list:
        parser.error("--seeds: give at least one seed, e.g. --seeds 0,1")
    if args.mtbf <= 0 or args.steps < 1 or args.parallel < 1:
        parser.error("--mtbf, --steps and --parallel must be positive")
    return args


def main() -> None:
    args = parse_args()
    began = time.time()
    with contextlib.ExitStack() as stack:
        if args.dir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        else:
            workdir = args.dir / time.strftime("goodput-%Y%m%d-%H%M%S")
        stack.callback(lambda: [p.kill() for p in list(_live)])  # e.g. after Ctrl-C
        cal_job = Job("calibration", None, every=50, steps=args.calibration_steps)
        jobs = [Job(p, seed, budget=1.0 if p == "unbounded" else None, steps=args.steps)
                for seed in args.seed_list for p in args.policy_list]
        schedules = {s: failure_times(s, args.mtbf, 3600.0 + 100 * args.mtbf)
                     for s in args.seed_list}
        calibrated = threading.Event()
        shared: dict[str, Any] = {}

        def execute(job: Job) -> None:
            if job is cal_job:  # runs first, next to the first policy that needs no calibration
                try:
                    run_job(job, args, workdir, [])
                    shared["cal"] = calibrate(job)
                finally:
                    calibrated.set()
                return
            if job.name in ("yd", "frequent", "rare"):
                calibrated.wait()
                if "cal" not in shared:
                    return  # the calibration failed; its error is raised
                young = math.sqrt(2 * shared["cal"].cost_s * args.mtbf) / shared["cal"].step_s
                factor = {"yd": 1.0, "frequent": args.frequent, "rare": args.rare}[job.name]
                job.every = max(1, round(young * factor))
            run_job(job, args, workdir, schedules[job.seed or 0])

        run_all([cal_job, *jobs], args.parallel, execute)
        cal: Calibration = shared["cal"]
        results = {(j.name, j.seed): breakdown(j, cal) for j in jobs}
    restarts = [r for b in results.values() for r in b.restarts]
    restart = statistics.fmean(restarts) if restarts else cal.startup_s
    # an asynchronous save is durable only when written: a failure loses that much more
    lag = cal.write_s if args.saves == "async" else 0.0

    def predict(work: float, tau: float, cost: float, fixed: float,
                restart: float = restart) -> float:
        return work / predicted_wall(work, tau, cost, restart + lag, args.mtbf, fixed)

    work = args.steps * cal.step_s
    fixed = cal.startup_s + cal.tail_s
    young = math.sqrt(2 * cal.cost_s * args.mtbf)
    best = best_interval(work, cal.cost_s, restart + lag, args.mtbf, fixed)
    load = os.getloadavg()[1]
    print(f"tinylm width {args.width}, depth {args.depth}, batch {args.batch_size}, "
          f"{args.steps} steps, 1 torch thread, {args.parallel} runs at a time; "
          f"{args.saves} saves; MTBF {args.mtbf:g} s; seeds {args.seeds}; "
          f"{(time.time() - began) / 60:.1f} min; load average (5 min) at the end {load:.2f}")
    print(f"calibration (no failures): step {cal.step_s * 1e3:.1f} ms, save stall C "
          f"{cal.cost_s:.3f} s, write {cal.write_s:.3f} s, start {cal.startup_s:.2f} s, "
          f"final eval+exit {cal.tail_s:.2f} s; restart R (start+restore, mean of "
          f"{len(restarts)}) {restart:.2f} s")
    print(f"productive time {work:.1f} s; without failures and checkpoints the ratio would be "
          f"{work / (work + fixed):.3f}")
    print(f"model optimum: Young tau = sqrt(2 C MTBF) = {young:.2f} s "
          f"({round(young / cal.step_s)} steps), predicted ratio "
          f"{predict(work, young, cal.cost_s, fixed):.3f}; exact-model optimum tau {best:.2f} s, "
          f"predicted {predict(work, best, cal.cost_s, fixed):.3f}")
    print()
    print("| policy | seed | every | tau s | saves | kills | step ms | wall s | ratio | predicted "
          "| stall s | restore s | restart s | re-done s | fixed s | other s |")
    print("|" + " --- |" * 16)
    predicted = {}
    for job in jobs:
        b = results[(job.name, job.seed)]
        # the run's own costs: load from other processes varies between runs
        own_restart = statistics.fmean(b.restarts) if b.restarts else restart
        predicted[(job.name, job.seed)] = predict(b.productive, b.tau_s, b.cost_s, b.fixed,
                                                  own_restart)
        print(f"| {job.name} | {job.seed} | {job.every or 'policy'} | {b.tau_s:.2f} | {b.saves} "
              f"| {b.kills} | {b.step_s * 1e3:.1f} | {b.wall:.1f} | {b.ratio:.3f} "
              f"| {predicted[(job.name, job.seed)]:.3f} | {b.stall:.1f} | {b.restore:.1f} "
              f"| {b.restart:.1f} | {b.redone:.1f} | {b.fixed:.1f} | {b.other:.1f} |")
    if len(args.seed_list) > 1:
        print()
        for p in args.policy_list:
            ratios = [results[(p, s)].ratio for s in args.seed_list]
            print(f"{p:>9}: ratio mean {statistics.fmean(ratios):.3f} (range {min(ratios):.3f}-"
                  f"{max(ratios):.3f}), predicted mean "
                  f"{statistics.fmean(predicted[(p, s)] for s in args.seed_list):.3f}")
    bench.save(args, {f"{name}/{seed}": {"ratio": b.ratio, "predicted": predicted[(name, seed)],
                                         "wall_s": b.wall, "kills": b.kills}
                      for (name, seed), b in results.items()})

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
        sys.exit(child_main(sys.argv[2:]))
    main()
