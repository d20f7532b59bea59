"""Hindsight logging on tinylm: what recording for replay costs, and what a replay saves.

Recording cost: the same tinylm run (one torch thread) without checkpoints (the
baseline) and with ``Checkpointer(replay_budget=B)`` — every checkpoint kept, saved
as often as B of training time allows (FLOR reports user-set overheads around 7%).
Runs are interleaved, `--reps` times each; the overhead is the median wall-clock
ratio minus 1, beside the stall the Checkpointer measured itself.

Replay vs rerun: probing the last `--segment` steps by replaying them from the
newest kept checkpoint before them (in process, probes attached, replayed loss
checked against the recorded loss bit for bit), against rerunning from step 1 to
the segment's end (the baseline: what hindsight logging costs without checkpoints).
Process start (importing torch, ~2-3 s here) is the same for both and left out.

    .venv/bin/python benchmarks/replay.py [--steps 300] [--width 64] [--budgets 0.07,0.02]
                                          [--segment 30] [--reps 2] [--quick]
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as bench
import torch

from labcoat import environment as env
from labcoat.torch import Checkpointer, ReplayFinished
from labcoat.workloads.tinylm import Config, train

PROBES = ["activations", "grad_norms", "attention_entropy", "update_ratios"]


class Recorder:
    """Stands in for a labcoat run: keeps logged losses and checkpoint events."""

    def __init__(self) -> None:
        self.losses: dict[int, float] = {}
        self.stalls: list[float] = []

    def log(self, step: int, **metrics: Any) -> None:
        if "loss" in metrics:
            self.losses[step] = metrics["loss"]

    def log_items(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_work(self, *args: Any, **kwargs: Any) -> None:
        pass

    def event(self, event: str, message: str = "", **data: Any) -> None:
        if event == "checkpoint.saved":
            self.stalls.append(data["stall_s"])


def timed_run(cfg: Config, directory: Path | None, budget: float | None
              ) -> tuple[tuple[float, float], Recorder, int]:
    """(wall, CPU) seconds of one training run, its recorder and the checkpoints it kept.

    CPU time (all threads of this process, the background writer's included) is what the
    recording adds whatever else shares the machine; wall-clock time is what a user waits.
    """
    recorder = Recorder()
    cpu = time.process_time()
    started = time.perf_counter()
    if directory is None:
        train(cfg, recorder, phases=False)  # a stand-in run: no phase records
    else:
        with Checkpointer(directory, run=recorder, replay_budget=budget) as ckpt:
            train(cfg, recorder, checkpointer=ckpt, phases=False)
    seconds = time.perf_counter() - started, time.process_time() - cpu
    kept = len(list(directory.glob("step-*"))) if directory else 0
    return seconds, recorder, kept


def replay(cfg: Config, directory: Path, start: int, end: int, work: Path
           ) -> tuple[float, Recorder, int]:
    """Seconds to replay start..end from the newest kept checkpoint before `start`."""
    steps = sorted(int(p.name[5:]) for p in directory.glob("step-*"))
    restore = max((s for s in steps if s < start), default=0)
    work.mkdir(parents=True, exist_ok=True)
    spec = work / "replay.json"
    spec.write_text(json.dumps({
        "version": 1, "checkpoint": str(directory / f"step-{restore:08d}") if restore else None,
        "restore_step": restore, "start": start, "end": end, "probes": PROBES,
        "output": str(work / "probes.jsonl")}))
    os.environ[env.REPLAY] = str(spec)
    recorder = Recorder()
    started = time.perf_counter()
    try:
        with Checkpointer(work / "unused", run=recorder) as ckpt:
            train(cfg, recorder, checkpointer=ckpt, phases=False)
    except ReplayFinished:
        pass
    finally:
        del os.environ[env.REPLAY]
    return time.perf_counter() - started, recorder, restore


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--budgets", default="0.07,0.02")
    parser.add_argument("--segment", type=int, default=30)
    parser.add_argument("--reps", type=int, default=2)
    args = bench.shrink(parser.parse_args(), steps=40, width=16, budgets="0.07", segment=10,
                        reps=1)
    budgets = [float(b) for b in args.budgets.split(",")]
    cfg = Config(width=args.width, steps=args.steps, eval_every=0, eval_items=2, threads=1,
                 seed=0, dropout=0.1)
    torch.set_num_threads(1)
    train(dataclasses.replace(cfg, steps=5))  # warm up (allocator, eval set)
    base, recorded = [], {b: [] for b in budgets}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rep in range(args.reps):
            seconds, base_run, _ = timed_run(cfg, None, None)
            base.append(seconds)
            for budget in budgets:
                directory = root / f"b{budget}-r{rep}"
                recorded[budget].append((*timed_run(cfg, directory, budget), directory))
        t_base = statistics.median(b[0] for b in base)
        c_base = statistics.median(b[1] for b in base)
        print(f"tinylm width {args.width}, {args.steps} steps, 1 torch thread, "
              f"torch {torch.__version__}, {args.reps} interleaved reps, load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        spread = (max(b[1] for b in base) - min(b[1] for b in base)) / c_base
        print(f"baseline (no checkpoints): median {t_base:.2f} s wall, {c_base:.2f} s CPU "
              f"({1000 * t_base / args.steps:.1f} ms/step); CPU time spread over reps "
              f"{spread:.1%} (the noise floor of the overheads below)")
        for budget in budgets:
            runs = recorded[budget]
            t_rec = statistics.median(r[0][0] for r in runs)
            c_rec = statistics.median(r[0][1] for r in runs)
            _, rec, kept, _ = runs[0]
            stall = sum(rec.stalls)
            print(f"record for replay, budget {budget:.0%}: median {t_rec:.2f} s wall "
                  f"({t_rec / t_base - 1:+.1%}), {c_rec:.2f} s CPU ({c_rec / c_base - 1:+.1%}); "
                  f"{kept} checkpoints kept (every ~{args.steps / max(kept, 1):.1f} steps); "
                  f"stall {stall:.3f} s = {stall / t_rec:.1%} of the run")
            assert rec.losses == base_run.losses, "recording changed the run"
        budget = budgets[0]
        _, rec, _, directory = recorded[budget][0]
        end, start = args.steps, args.steps - args.segment + 1
        t_replay, replayed, restore = replay(cfg, directory, start, end, root / "replay")
        same = all(replayed.losses[s] == rec.losses[s] for s in range(restore + 1, end + 1))
        (t_rerun, _), _, _ = timed_run(dataclasses.replace(cfg, steps=end), None, None)
        print(f"replay steps {start}-{end} with {len(PROBES)} probes from checkpoint "
              f"{restore} (budget {budget:.0%}): {t_replay:.2f} s; loss bit-identical at all "
              f"{end - restore} replayed steps: {same}")
        print(f"rerun from scratch to step {end} (no probes): {t_rerun:.2f} s; "
              f"ratio replay/rerun {t_replay / t_rerun:.3f}")
    bench.save(args, {"baseline_s": t_base, "replay_s": t_replay, "rerun_s": t_rerun,
                      "bit_identical": same})


if __name__ == "__main__":
    main()
