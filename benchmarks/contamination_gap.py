"""The contamination gap on tinylm: runs with 200 eval items leaked into training against
clean runs, over seeds.

Each seed trains two short tinylm runs on recall and count (500 steps of batch 32, width
64, lr 3e-3): one with the eval set's 200 items (100 per task) making up 3/4 of every
batch, one clean (`tinylm.leaked_run`). Each model is scored on the originals and on 4
fresh isomorphic twins per item (`tinylm.fresh_twins`, held out of both runs' training
stream), and `evals.contamination_gap` gives the paired gap original - fresh with its 95%
CI. tests/evals/test_fresh_contamination.py runs seed 0 of this.

    nice .venv/bin/python benchmarks/contamination_gap.py            # 3 seeds, ~1 min CPU
    .venv/bin/python benchmarks/contamination_gap.py --quick         # a smoke run, seconds
"""

from __future__ import annotations

import time

import _harness as bench

TASKS = ("recall", "count")


def run(seed: int, steps: int, per_task: int, twins: int) -> dict:
    import torch

    from labcoat.evals import EvalEngine, contamination_gap
    from labcoat.workloads import tinylm

    torch.set_num_threads(1)
    eval_set = tinylm.make_eval_set(per_task, TASKS)
    fresh = tinylm.fresh_twins(eval_set, twins, seed=seed)
    held = eval_set.held_out() | {(t.example.task, t.example.input) for t in fresh}
    leaked = [ex for xs in eval_set.items.values() for ex in xs]
    out = {}
    for name, share in (("leaked", 0.75), ("clean", 0.0)):
        cpu = time.process_time()
        model = tinylm.leaked_run(leaked if share else [], held, TASKS,
                                  tinylm.LeakConfig(steps=steps, leak_share=share, seed=seed))
        original = EvalEngine(model, tinylm.TOKENIZER, tinylm.eval_suite(eval_set)).score()
        scored = EvalEngine(model, tinylm.TOKENIZER, tinylm.fresh_suite(fresh)).score()
        gap = contamination_gap(original.scores, scored.scores.reshape(-1, twins),
                                tasks=original.tasks)
        d = gap.difference
        out[name] = {"gap": d.estimate, "low": d.low, "high": d.high, "p": d.p_value,
                     "original": gap.original, "fresh": gap.fresh, "decision": gap.decision,
                     "cpu_s": time.process_time() - cpu}
        print(f"seed {seed} {name:6s}: original {gap.original:.3f} fresh {gap.fresh:.3f} gap "
              f"{d.estimate:+.3f} (95% CI {d.low:+.3f} to {d.high:+.3f}) -> {gap.decision} "
              f"[{out[name]['cpu_s']:.1f} s CPU]", flush=True)
    return out


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--items", type=int, default=100, help="eval items per task")
    parser.add_argument("--twins", type=int, default=4)
    args = bench.shrink(parser.parse_args(), seeds=1, steps=40, items=20, twins=2)
    try:
        import torch  # noqa: F401
    except ImportError:
        bench.skip("needs torch (the torch extra)", args)
    started = time.perf_counter()
    results = {f"seed {s}": run(s, args.steps, args.items, args.twins)
               for s in range(args.seeds)}
    print(f"took {time.perf_counter() - started:.0f} s")
    bench.save(args, {"steps": args.steps, "items": 2 * args.items, "twins": args.twins,
                      "seeds": results})


if __name__ == "__main__":
    main()
