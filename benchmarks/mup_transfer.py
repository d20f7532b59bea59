"""Does the best learning rate transfer across width? tinylm under muP versus standard.

For each parametrization, width and learning rate, train tinylm for `--steps`
AdamW steps (linear warmup, cosine decay) and record the final training loss
(mean of the last 20% of steps; every batch is fresh data, so this is a held-out
loss). Widths share the data stream and seeds, so only width and lr differ.
Printed per parametrization: the loss grid, the best lr per width, and the
transfer regret: the loss at each width when using the lr that was best at the
narrowest width, minus the best loss at that width (0 = the lr transferred).
muP's base width is the narrowest width, where muP equals the standard
parametrization (apart from the zero-initialized query), so both start from the
same tuned lr. See labcoat.workloads.tinylm._mup for what muP changes (Yang et
al. 2022, Tensor Programs V, Table 8).

    .venv/bin/python benchmarks/mup_transfer.py                 # 36 runs, ~4 min on 2 cores
    .venv/bin/python benchmarks/mup_transfer.py --steps 200 --lrs 0.005,0.02,0.08
    .venv/bin/python benchmarks/mup_transfer.py --quick        # a smoke run: 4 tiny runs
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor

import _harness as bench
import numpy as np

from labcoat.workloads.tinylm import Config, train


def run_one(job: tuple[str, int, float, int, argparse.Namespace]) -> tuple[str, int, float, int,
                                                                          float, float]:
    param, width, lr, seed, args = job
    cfg = Config(width=width, depth=args.depth, heads=args.heads, steps=args.steps,
                 batch_size=args.batch_size, lr=lr, warmup=args.warmup, schedule="cosine",
                 eval_items=1, eval_every=0, threads=1, seed=seed, parametrization=param,
                 mup_base_width=args.widths[0])
    result = train(cfg)
    tail = result.losses[-max(1, args.steps // 5):]
    loss = float(np.mean(tail)) if all(math.isfinite(x) for x in tail) else float("inf")
    return param, width, lr, seed, loss, result.seconds


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--widths", default="32,64,128")
    parser.add_argument("--lrs", default="0.0025,0.005,0.01,0.02,0.04,0.08")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = bench.shrink(parser.parse_args(), widths="16,32", lrs="0.02", steps=10,
                        warmup=2, batch_size=8)
    args.widths = [int(w) for w in args.widths.split(",")]
    lrs = [float(x) for x in args.lrs.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = [(p, w, lr, s, args) for p in ("standard", "mup") for w in args.widths
            for lr in lrs for s in seeds]
    jobs.sort(key=lambda j: -j[1])  # widest first, for load balance
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(run_one, jobs))
    elapsed = time.perf_counter() - started
    print(f"tinylm depth {args.depth}, heads {args.heads}, {args.steps} steps (warmup "
          f"{args.warmup}, cosine), batch {args.batch_size}, seeds {seeds}; "
          f"{len(jobs)} runs in {elapsed:.0f} s with {args.workers} workers")
    loss = {(p, w, lr): float(np.mean([r[4] for r in results if r[:3] == (p, w, lr)]))
            for p, w, lr, *_ in results}
    summary: dict = {"seconds": elapsed}
    for param in ("standard", "mup"):
        print(f"\n{param}: final training loss (mean of last 20% of steps)")
        print("| width | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " | best lr |")
        print("| --- " * (len(lrs) + 2) + "|")
        best = {}
        for w in args.widths:
            row = [loss[(param, w, lr)] for lr in lrs]
            best[w] = lrs[int(np.argmin(row))]
            cells = " | ".join(f"**{v:.4f}**" if lr == best[w] else f"{v:.4f}"
                               for v, lr in zip(row, lrs, strict=True))
            print(f"| {w} | {cells} | {best[w]:g} |")
        tuned = best[args.widths[0]]
        regrets = []
        for w in args.widths[1:]:
            regret = loss[(param, w, tuned)] - min(loss[(param, w, lr)] for lr in lrs)
            regrets.append(f"width {w}: {regret:+.4f}")
        shift = math.log2(best[args.widths[-1]] / best[args.widths[0]])
        print(f"lr tuned at width {args.widths[0]} = {tuned:g}; transfer regret "
              + ", ".join(regrets) + f"; best lr moved {shift:+.1f} octaves "
              f"from width {args.widths[0]} to {args.widths[-1]}")
        summary[param] = {"best_lr": best, "regret": regrets, "octaves_moved": shift}
    bench.save(args, summary)


if __name__ == "__main__":
    main()
