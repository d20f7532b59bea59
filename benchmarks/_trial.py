"""A stand-in trial for benchmarks that time labcoat itself (no torch, milliseconds of
work): logs `loss` every step and 40 per-item scores for tasks alpha and beta at the end,
right with probability --quality (so arms differ)."""

import argparse
import random

import labcoat

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--quality", type=float, default=0.5)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

run = labcoat.init(total_steps=args.steps)
rng = random.Random(f"{args.seed}-{args.steps}")
for step in range(1, args.steps + 1):
    run.log(step, loss=1.0 / step + rng.random() * 0.01)
for task in ("alpha", "beta"):
    ids = [f"{task}/{i}" for i in range(40)]
    run.log_items(args.steps, task, ids, [float(rng.random() < args.quality) for _ in ids])
run.finish()
