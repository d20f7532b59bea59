"""Eval engine throughput (items/s) against a naive per-item loop on the same model.

Model: tinylm (width 64, depth 2) trained for 300 steps, so its answers are a
mix of right and wrong. Suites: tinylm's held-out eval set (exact match; 10
tasks) and a multiple-choice version of it (the answer plus 4 wrong options
per item, scored by log-likelihood).

Baselines, on the same model and items, one thread each:
- naive: `labcoat.evals.naive_scores`, one item at a time, tokenized on the
  spot; exact match generates token by token (one forward per token) and
  compares text; multiple choice runs one forward per choice and sums
  log-probabilities in Python;
- batched greedy (exact match only): tinylm's previous evaluation, all items
  of a task in one batch but decoded token by token (one forward per token).

Every method must give identical scores (asserted). The engine is timed cold
(tokenization included) and warm (the cached tokens and batches that every
in-training evaluation after the first reuses).

Run: nice -n 10 .venv/bin/python benchmarks/eval_engine.py [items_per_task] [--quick]
"""

from __future__ import annotations

import random

import _harness as bench
import numpy as np
import torch

from labcoat.evals import EvalEngine, EvalItem, EvalSuite, Scorer, naive_scores
from labcoat.workloads.tinylm import TOKENIZER, Config, eval_suite, make_eval_set, train
from labcoat.workloads.tinylm._train import score_examples


def timed(fn, repeats: int = 1):
    """The best of `repeats` times, and the last result."""
    timing, value = bench.timed(fn, repeats)
    return timing.min, value


def multiple_choice(suite: EvalSuite, seed: int = 0) -> EvalSuite:
    rng = random.Random(seed)
    items = []
    for item in suite.items:
        n = len(item.target.split())
        wrong = {" ".join(rng.choices(("0", "1", "a", "b", "c", "yes", "no", "is", "are"), k=n))
                 for _ in range(8)} - {item.target}
        choices = [item.target, *sorted(wrong)[:4]]
        rng.shuffle(choices)
        items.append(EvalItem(task=item.task, id=item.id, input=item.input, target=item.target,
                              choices=tuple(choices)))
    return EvalSuite("mc", tuple(items), Scorer(kind="multiple_choice"))


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("items_per_task", type=int, nargs="?", default=50)
    args = bench.shrink(parser.parse_args(), items_per_task=3)
    items_per_task, steps = args.items_per_task, 30 if args.quick else 300
    torch.set_num_threads(1)
    model = train(Config(steps=steps, warmup=min(50, steps // 2), eval_every=0, eval_items=1,
                         threads=1, seed=1)).model.eval()
    eval_set = make_eval_set(items_per_task)
    suite = eval_suite(eval_set)
    n = len(suite)
    print(f"tinylm width 64 depth 2, {steps} steps; {n} items ({items_per_task} per task x 10), "
          f"1 thread")

    with torch.no_grad():
        cold, result = timed(lambda: EvalEngine(model, TOKENIZER, suite).score())
        engine = EvalEngine(model, TOKENIZER, suite)
        engine.score()
        warm, again = timed(lambda: engine.score(), repeats=5)
        naive_s, naive = timed(lambda: naive_scores(model, TOKENIZER, suite))
        batched_s, batched = timed(lambda: torch.cat(
            [score_examples(model, xs) for xs in eval_set.items.values()]).numpy())
    assert (result.scores == naive).all() and (again.scores == naive).all()
    assert (batched == naive).all()
    print(f"exact match (mean {naive.mean():.3f}), identical scores in all methods")
    print(f"  naive per-item loop:       {naive_s:7.3f} s = {n / naive_s:9,.0f} items/s")
    print(f"  batched greedy decoding:   {batched_s:7.3f} s = {n / batched_s:9,.0f} items/s")
    print(f"  engine, cold (tokenizing): {cold:7.3f} s = {n / cold:9,.0f} items/s")
    print(f"  engine, warm:              {warm:7.3f} s = {n / warm:9,.0f} items/s")
    print(f"  ratio engine warm / naive: {naive_s / warm:.0f}x; cold / naive: "
          f"{naive_s / cold:.0f}x; warm / batched greedy: {batched_s / warm:.1f}x")
    results = {"exact_match": {"items": n, "naive_s": naive_s, "batched_s": batched_s,
                               "cold_s": cold, "warm_s": warm}}

    mc = multiple_choice(suite)
    choices = sum(len(i.choices or ()) for i in mc.items)
    with torch.no_grad():
        cold, result = timed(lambda: EvalEngine(model, TOKENIZER, mc).score())
        engine = EvalEngine(model, TOKENIZER, mc)
        engine.score()
        warm, again = timed(lambda: engine.score(), repeats=5)
        naive_s, naive = timed(lambda: naive_scores(model, TOKENIZER, mc))
    assert (result.scores == naive).all() and (again.scores == naive).all()
    print(f"multiple choice, {choices} choices (acc {np.mean(naive):.3f}), identical scores")
    print(f"  naive per-item loop:       {naive_s:7.3f} s = {n / naive_s:9,.0f} items/s")
    print(f"  engine, cold (tokenizing): {cold:7.3f} s = {n / cold:9,.0f} items/s")
    print(f"  engine, warm:              {warm:7.3f} s = {n / warm:9,.0f} items/s")
    print(f"  ratio engine warm / naive: {naive_s / warm:.0f}x; cold / naive: "
          f"{naive_s / cold:.0f}x")
    results["multiple_choice"] = {"items": n, "naive_s": naive_s, "cold_s": cold,
                                  "warm_s": warm}
    bench.save(args, results)


if __name__ == "__main__":
    main()
