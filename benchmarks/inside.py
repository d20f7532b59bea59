"""`labcoat inside` on two tinylm arms: time and memory of the whole comparison.

Two arms of the labcoat demo (warmup 0 against warmup `--warmup`, the demo's high
learning rate) are trained in-process for `--seeds` seeds each (not timed); then the
whole comparison is timed as `labcoat inside` runs it on the trials' models: patching
every component found (the integrated attribution screen, exact patching both ways,
two-way bootstrap intervals, Holm verdicts) on every eval item, and probes of every block
for the item's task. Reported: seconds in all and per eval item, the peak growth of the
resident set, patching alone against patching with the two-ended screen (`--ig-steps 1`,
the baseline, timed in the same run), the CPU seconds of all threads, the screen's cost
(one-pass attribution patching, and the integrated screen at `--ig-steps`) against exact
patching's, and the screen's agreement with exact patching (Spearman's rho over all
components, over those with a clear exact effect, against both exact directions
averaged; top-3 recall) on the real arms and on a planted difference (seed 0's control
with head 1 of block 0 zeroed), at `--ig-steps` and at 0 (one pass).
Torch runs on `--threads` threads (2: the 60 s target is for 2 cores).

    .venv/bin/python benchmarks/inside.py [--steps 600] [--seeds 2] [--items 100]
                                          [--threads 2] [--ig-steps 4] [--quick]
"""

from __future__ import annotations

import copy
import time

import _harness as bench
import numpy as np
import torch

from labcoat import inside
from labcoat.inside._compare import screen_agreement
from labcoat.workloads.tinylm import INSIDE, Config, train


def _agreement(result: inside.Comparison) -> dict[str, float]:
    return {"spearman": result.agreement, "spearman_clear": result.agreement_clear,
            "clear": result.clear, "spearman_both": result.agreement_both,
            "top_recall": result.top_recall}


def _one_pass(result: inside.Comparison, pairs: list, batches: list, reps: int
              ) -> dict[str, float]:
    """The agreement one-pass attribution patching would have had, against the exact
    effects `result` measured (every component verified)."""
    components = inside.find_components(pairs[0][0])
    screen = np.array([inside.attribution_patching(c, v, batches, INSIDE.metric, components)
                       for c, v in pairs]).transpose(1, 0, 2)
    exact = np.array([result.effects[c.name]["forward"] for c in components])
    reverse = np.array([result.effects[c.name]["reverse"] for c in components])
    diff = np.array([inside.metric_values(v, batches, INSIDE.metric)
                     - inside.metric_values(c, batches, INSIDE.metric) for c, v in pairs])
    return screen_agreement(screen, exact, reverse, diff, reps=reps)


def main() -> None:
    p = bench.parser(__doc__)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--items", type=int, default=100, help="eval items per task")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=4000)
    p.add_argument("--ig-steps", type=int, default=4)
    args = bench.shrink(p.parse_args(), steps=20, width=32, seeds=1, items=3, warmup=5,
                        reps=100)
    pairs = []
    for seed in range(args.seeds):
        arms = [train(Config(steps=args.steps, width=args.width, warmup=w, seed=seed,
                             eval_items=args.items, eval_every=0, eval_budget=0, threads=1)
                      ).model for w in (0, args.warmup)]
        pairs.append((arms[0], arms[1]))
    cfg = Config(width=args.width, eval_items=args.items)
    ids, batches = INSIDE.eval_items(cfg)
    labels = INSIDE.item_labels(cfg)["task"]
    types = INSIDE.item_types(cfg)
    torch.set_num_threads(args.threads)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"tinylm width {args.width}, {args.steps} steps; {args.seeds} seed pair(s); "
          f"{len(ids)} eval items; {args.threads} threads; load {load}")
    config = inside.PatchingConfig(reps=args.reps, ig_steps=args.ig_steps)

    def whole() -> tuple[inside.Comparison, inside.ProbeComparison]:
        patching = inside.compare(pairs, batches, INSIDE.metric, config)
        blocks = [c.name for c in inside.find_components(pairs[0][0]) if c.kind == "update"]
        probes = inside.probe_arms(pairs, batches, INSIDE.metric, labels, types, blocks,
                                   INSIDE.positions, inside.ProbeConfig(reps=args.reps))
        return patching, probes

    cpu = time.process_time()
    seconds, mib, (patching, probes) = bench.peak_growth(whole)
    cpu = time.process_time() - cpu  # on a shared machine: the work, whatever the load
    # the baseline, in the same run: the same comparison with the two-ended screen (1)
    ends = inside.PatchingConfig(reps=args.reps, ig_steps=1)
    baseline_s, _ = bench.timed(lambda: inside.compare(pairs, batches, INSIDE.metric, ends))
    patching_s, _ = bench.timed(lambda: inside.compare(pairs, batches, INSIDE.metric, config))
    components = inside.find_components(pairs[0][0])
    screen_s, _ = bench.timed(lambda: inside.attribution_patching(
        pairs[0][0], pairs[0][1], batches, INSIDE.metric, components))
    integrated_s, _ = bench.timed(lambda: inside.integrated_attribution(
        pairs[0][0], pairs[0][1], batches, INSIDE.metric, components, steps=args.ig_steps))
    exact_s, _ = bench.timed(lambda: inside.exact_patching(
        pairs[0][0], pairs[0][1], batches, INSIDE.metric, components))
    control = pairs[0][0]
    planted = copy.deepcopy(control)
    with torch.no_grad():
        width = args.width // 4
        planted.blocks[0].attn.proj.weight[:, width:2 * width] = 0
    plant = inside.compare([(control, planted)], batches, INSIDE.metric, config)
    top = patching.ranked()[0]
    results = {
        "items": len(ids), "seeds": args.seeds, "components": len(patching.components),
        "threads": args.threads, "load": load,
        "whole_s": seconds, "per_item_ms": 1e3 * seconds / len(ids), "peak_mib": mib,
        "whole_cpu_s": cpu, "load_after": open("/proc/loadavg").read().split()[:3],
        "patching_s": patching_s.min, "patching_two_ends_s": baseline_s.min,
        "patching_vs_two_ends": patching_s.min / baseline_s.min,
        "screen_one_pass_s": screen_s.min, "screen_integrated_s": integrated_s.min,
        "exact_all_components_s": exact_s.min, "ig_steps": args.ig_steps,
        "difference": patching.difference.estimate,
        "top_component": top.name, "top_share": top.forward.estimate if top.forward else None,
        "max_abs_exact_share_real": max(abs(c.forward.estimate) for c in patching.components
                                        if c.forward),
        "planted_top": plant.ranked()[0].name,
        **{f"{key}_{name}": value
           for name, result in (("real", patching), ("planted", plant))
           for key, value in _agreement(result).items()},
        **{f"{key}_{name}_one_pass": value
           for name, result, ps in (("real", patching, pairs),
                                    ("planted", plant, [(control, planted)]))
           for key, value in _one_pass(result, ps, batches, args.reps).items()},
        "probe_selectivity_control": {layer.layer: layer.control.selectivity.estimate
                                      for layer in probes.layers},
    }
    for name, value in results.items():
        print(f"{name}: {value}")
    bench.save(args, results)


if __name__ == "__main__":
    main()
