"""What always-on phase timing (`labcoat.torch.time_phases`) costs a tinylm step, against
the same loop without it and under `torch.profiler`.

    .venv/bin/python benchmarks/phase_timing.py            # 60 rounds of 3 x 20 steps
    .venv/bin/python benchmarks/phase_timing.py --quick    # 4 x 3 x 6, a smaller model (smoke)

One process, one tinylm (the default model: width 64, depth 2, batch 64, AdamW), one
data stream and one journal (`labcoat.init`, ad-hoc, in a throwaway LABCOAT_HOME). Each
round trains `--block` steps in each of three arms, the order rotating every round, so
a busy spell of the shared machine falls on every arm alike:

- off: tinylm's step (fetch the batch, forward, masked loss, backward, AdamW step,
  ``loss.item()``, ``run.log(step, loss=...)``), nothing else;
- on: the same step with a phase timer on the model, the optimizer and the batches
  (`time_phases(model, optimizer, run=run)`, ``timer.loader(batches)``): its hooks,
  clock reads and one ``phases`` journal record per step (flushed, as every record);
- profiler: the same step inside ``torch.profiler.profile()`` (default activities: CPU
  here) with ``record_function`` around data, forward, backward and optimizer, the
  phase split a user would get from the profiler instead.

A step's time is wall time (``perf_counter``), and the process's CPU time beside it
(``process_time``: torch on one thread; what a busy machine's preemptions leave out),
from before the batch fetch to after
``run.log``: everything the timer does for step n (its record is written when step n+1
begins) falls inside some step. The timer is attached and the profiler entered at the
start of each block and closed after it, outside the timed steps; each block's first
step (the switch) is left out in every arm. The ratio is median(on) / median(off) over
all kept steps; its 95% interval is a percentile bootstrap over rounds (a round's three
blocks resampled together, 2000 draws, seed 0), since steps of one block share the
machine's state.

The timer's own cost per step is measured apart, where it does not drown in a 15 ms
step: the same three-arm rotation on a step that does almost nothing (a Linear(8, 8),
SGD, batches made ahead), `--micro-rounds` rounds of `--micro-block` steps; the median
step time with the timer minus without it, in microseconds. And what `profile_on_slow`
adds while it watches a run that does not slow down: the time of one look at the recent
phase times (a window of its default span, drawn around the medians measured), divided
by the steps between two looks.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import _harness as bench
import numpy as np
import torch

ARMS = ("off", "on", "profiler")


def load() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


class Loop:
    """One model, optimizer, batch stream and run, stepped in blocks by each arm."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 batches: Iterator[Any], loss: Callable[..., torch.Tensor], run: Any) -> None:
        self.model, self.optimizer, self.batches, self.loss, self.run = (
            model, optimizer, batches, loss, run)
        self.step = 0

    def block(self, arm: str, steps: int) -> list[tuple[float, float]]:
        """Train `steps` steps under `arm`; (wall, CPU) seconds of each step but the first."""
        from labcoat.torch import time_phases

        timer = profiler = None
        batches = self.batches
        label: Callable[[str], Any] = _nothing
        if arm == "on":
            timer = time_phases(self.model, self.optimizer, run=self.run, start_step=self.step)
            batches = timer.loader(self.batches)
        elif arm == "profiler":
            profiler = torch.profiler.profile()
            profiler.__enter__()
            label = torch.profiler.record_function
        times = []
        try:
            for _ in range(steps):
                started, cpu = time.perf_counter(), time.process_time()
                with label("data"):
                    inputs, labels = next(batches)
                with label("forward"):
                    loss = self.loss(self.model(inputs), labels)
                self.optimizer.zero_grad(set_to_none=True)
                with label("backward"):
                    loss.backward()
                with label("optimizer"):
                    self.optimizer.step()
                self.step += 1
                self.run.log(self.step, loss=loss.item())
                times.append((time.perf_counter() - started, time.process_time() - cpu))
        finally:
            if timer is not None:
                timer.close()
            if profiler is not None:
                profiler.__exit__(None, None, None)
        return times[1:]


@contextlib.contextmanager
def _nothing(name: str) -> Iterator[None]:
    yield


def rotate(loop: Loop, rounds: int, block: int) -> list[dict[str, list[tuple[float, float]]]]:
    """Per round, each arm's step times; the arms' order rotates every round."""
    out = []
    for r in range(rounds):
        times = {}
        for arm in ARMS[r % 3:] + ARMS[:r % 3]:
            times[arm] = loop.block(arm, block)
        out.append(times)
    return out


def median(rounds: list[dict[str, list[tuple[float, float]]]], arm: str, clock: int) -> float:
    """The median step time of `arm` over `rounds` (clock 0: wall, 1: CPU), in seconds."""
    return statistics.median(t[clock] for r in rounds for t in r[arm])


def ratio(rounds: list[dict[str, list[tuple[float, float]]]], arm: str, clock: int = 0, *,
          draws: int = 2000, seed: int = 0) -> dict[str, float]:
    """median(arm) / median(off) over all steps, and a 95% bootstrap interval over rounds."""
    def point(rs: list[dict[str, list[tuple[float, float]]]]) -> float:
        return median(rs, arm, clock) / median(rs, "off", clock)

    rng = np.random.default_rng(seed)
    boot = [point([rounds[i] for i in rng.integers(0, len(rounds), len(rounds))])
            for _ in range(draws)]
    low, high = np.quantile(boot, [0.025, 0.975])
    return {"ratio": point(rounds), "low": float(low), "high": float(high)}


def tinylm_loop(args: Any, run: Any) -> Loop:
    from labcoat.workloads.tinylm import Config, TrainStream, make_eval_set
    from labcoat.workloads.tinylm._train import build_model, build_optimizer, masked_loss

    cfg = Config(width=args.width, depth=args.depth, batch_size=args.batch, seed=0)
    stream = TrainStream(cfg.seed_for("data"), make_eval_set(cfg.eval_items).held_out())
    model = build_model(cfg).train()

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield stream.batch(cfg.batch_size)

    return Loop(model, build_optimizer(model, cfg), batches(), masked_loss, run)


def micro_loop(run: Any, start_step: int) -> Loop:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    data = [(torch.randn(4, 8), torch.randn(4, 8)) for _ in range(64)]

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield from data

    loop = Loop(model, torch.optim.SGD(model.parameters(), lr=1e-3), batches(),
                torch.nn.functional.mse_loss, run)
    loop.step = start_step  # the same run: its steps go on
    return loop


def watch_cost(loop_median: dict[str, float], checks: int) -> dict[str, float]:
    """What `profile_on_slow` adds while it only watches (no slowdown): microseconds per
    look at the recent steps (the screen over `ProfileOnSlow`'s default span of phase
    times, drawn around the tinylm medians measured), and per step at its default period."""
    from labcoat.torch import ProfileOnSlow
    from labcoat.torch.phases._profile import SlowWatch

    setting = ProfileOnSlow(directory=".")
    watch = SlowWatch(setting, None, cuda=False)
    rng = np.random.default_rng(0)
    phases = {"data": 0.05, "forward": 0.3, "backward": 0.5, "optimizer": 0.15}
    step = loop_median["off"]
    records = [(i, {**{k: step * v * rng.gamma(20, 0.05) for k, v in phases.items()},
                    "total": step, "other": 0.0}) for i in range(watch.span)]
    started = time.perf_counter()
    for _ in range(checks):
        watch._check(records, watch.span)
    per_check = (time.perf_counter() - started) / checks
    return {"us_per_check": per_check * 1e6,
            "us_per_step": per_check * 1e6 / setting.check_every,
            "check_every": setting.check_every, "span": watch.span}


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--rounds", type=int, default=60, help="rounds of the three arms")
    parser.add_argument("--block", type=int, default=20, help="steps per arm per round")
    parser.add_argument("--warmup", type=int, default=30, help="steps trained before timing")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--micro-rounds", type=int, default=40)
    parser.add_argument("--micro-block", type=int, default=200)
    args = bench.shrink(parser.parse_args(), rounds=4, block=6, warmup=5, width=32, depth=1,
                        batch=16, micro_rounds=4, micro_block=50)
    torch.set_num_threads(1)
    import labcoat

    loads = [load()]
    with bench.temp_home():
        run = labcoat.init(experiment="bench-phases")
        loop = tinylm_loop(args, run)
        loop.block("off", args.warmup)
        print(f"torch {torch.__version__}, 1 thread; tinylm width {args.width}, depth "
              f"{args.depth}, batch {args.batch}; {args.rounds} rounds x 3 arms x "
              f"{args.block} steps; load {loads[0]}", flush=True)
        rounds = rotate(loop, args.rounds, args.block)
        loads.append(load())
        micro = micro_loop(run, loop.step)
        micro.block("off", 50)
        micro_rounds = rotate(micro, args.micro_rounds, args.micro_block)
        watching = watch_cost({"off": median(rounds, "off", 0)}, 20 if args.quick else 200)
        loads.append(load())
        run.finish()
    medians = {a: median(rounds, a, 0) for a in ARMS}
    cpu = {a: median(rounds, a, 1) for a in ARMS}
    on, prof = ratio(rounds, "on"), ratio(rounds, "profiler")
    on_cpu, prof_cpu = ratio(rounds, "on", 1), ratio(rounds, "profiler", 1)
    micro_medians = {a: median(micro_rounds, a, 0) for a in ARMS}
    micro_cpu = {a: median(micro_rounds, a, 1) for a in ARMS}
    timer_us = (micro_medians["on"] - micro_medians["off"]) * 1e6
    timer_cpu_us = (micro_cpu["on"] - micro_cpu["off"]) * 1e6
    print(f"tinylm step, median ms (wall / CPU): off {medians['off'] * 1e3:.3f} / "
          f"{cpu['off'] * 1e3:.3f}, phase timing {medians['on'] * 1e3:.3f} / "
          f"{cpu['on'] * 1e3:.3f}, torch.profiler {medians['profiler'] * 1e3:.3f} / "
          f"{cpu['profiler'] * 1e3:.3f}")
    for name, wall, proc in (("phase timing", on, on_cpu), ("torch.profiler", prof, prof_cpu)):
        print(f"{name + ' / off:':22} wall {wall['ratio']:.4f} (95% CI {wall['low']:.4f} - "
              f"{wall['high']:.4f}), CPU {proc['ratio']:.4f} (95% CI {proc['low']:.4f} - "
              f"{proc['high']:.4f})")
    print(f"timer's own cost: {timer_us:.1f} us/step wall, {timer_cpu_us:.1f} us CPU (a "
          f"Linear(8, 8) step: off {micro_medians['off'] * 1e6:.1f} us, on "
          f"{micro_medians['on'] * 1e6:.1f} us, profiler {micro_medians['profiler'] * 1e6:.1f}"
          f" us); {timer_us * 1e-6 / medians['off']:.2%} of the tinylm step")
    print(f"profile_on_slow while it watches: {watching['us_per_check']:.0f} us a look at "
          f"the last {watching['span']} steps, every {watching['check_every']} steps: "
          f"{watching['us_per_step']:.1f} us/step")
    print(f"load (1-min average) at start, after tinylm, at end: {', '.join(loads)}")
    bench.save(args, {"median_s": medians, "cpu_median_s": cpu, "on_vs_off": on,
                      "profiler_vs_off": prof, "on_vs_off_cpu": on_cpu,
                      "profiler_vs_off_cpu": prof_cpu, "timer_us_per_step": timer_us,
                      "timer_cpu_us_per_step": timer_cpu_us, "micro_median_s": micro_medians,
                      "watching": watching, "load": loads, "rounds": args.rounds,
                      "block": args.block})


if __name__ == "__main__":
    main()
