"""A cheap trial for tests/shrink (no torch): bugs that appear only above some size.

    python bug_trial.py --size N --steps S [--features a,c] [--needs a,c] [--bug-from 4]
        [--slip-below 2] [--flaky MARKER] [--depth D --slow-depth D]

Half-way through its steps it raises ValueError when size >= --bug-from and every feature
in --needs is on; KeyError (another failure: a slip) when size < --slip-below; with
--flaky, RuntimeError only the first time (MARKER does not exist yet), then it passes.
--depth changes nothing (a param the bug does not need); with --slow-depth D, depth D sleeps
a minute before its first step (for a Ctrl-C while it runs).
"""

import argparse
import os
import sys
import time

import labcoat

parser = argparse.ArgumentParser()
parser.add_argument("--size", type=int, required=True)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--features", default="")  # the features on, comma-separated
parser.add_argument("--needs", default="")
parser.add_argument("--bug-from", type=int, default=4)
parser.add_argument("--slip-below", type=int, default=0)
parser.add_argument("--flaky", default="")
parser.add_argument("--depth", type=int, default=1)
parser.add_argument("--slow-depth", type=int, default=None)
args = parser.parse_args()
on = {f for f in args.features.split(",") if f and not f.endswith("=false")}
on = {f.split("=")[0] for f in on}
needs = {f for f in args.needs.split(",") if f}

run = labcoat.init(total_steps=args.steps)
if args.depth == args.slow_depth:
    time.sleep(60)
for step in range(1, args.steps + 1):
    run.log(step, loss=1.0 / step, params=float(args.size * 10))
    if step == max(1, args.steps // 2):
        if args.flaky:
            if not os.path.exists(args.flaky):
                open(args.flaky, "w").close()
                raise RuntimeError("flaky: only the first time")
        elif args.size < args.slip_below:
            raise KeyError("a different bug of small sizes")
        elif args.size >= args.bug_from and needs <= on:
            raise ValueError(f"the size bug (size {args.size})")
run.finish()
sys.exit(0)
