"""Subset selection quality: cross-validated rank agreement of chosen vs random subsets.

Data: synthetic item results from a two-parameter logistic model (abilities
~ N(0, 0.5), difficulties ~ N(0, 1.5), discriminations ~ U(0.2, 2.5)), 3 tasks
x 60 items, 0/1 scores; 24 items chosen (8 per task). For each number of
models, results are averaged over repetitions with fresh data.

Methods, all with the same per-task quotas, judged by 5-fold cross-validation
over models (each model's subset score from items chosen without it), as
Kendall's tau with the full-suite macro score:
- labcoat: `choose_subset` (difficulty bins x item-rest correlation);
- greedy: add the item that most increases concordant pairs on the models
  (what `choose_subset` did first, kept here as the cautionary baseline);
- random: a random subset.

With --tinylm: real checkpoints instead. tinylm trained 400 steps with
warmup 0 and 100 over seeds 0-3 (8 runs), every item of a 200-item eval set
(20 per task) scored every 50 steps (64 checkpoints); `choose_subset` on
them, its cross-validated Kendall/Spearman next to random subsets and the CI
width ratios, for several subset sizes. Takes a few minutes on one core.

Run: nice -n 10 .venv/bin/python benchmarks/subset_selection.py [repetitions] [--tinylm]
     [--quick]   (--quick: 1 repetition, 8 and 12 models, and a tiny --tinylm part)
"""

from __future__ import annotations

import _harness as bench
import numpy as np
from scipy import stats as sps

from labcoat.evals import _subset


def results(models: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ability = rng.normal(0, 0.5, models)
    difficulty, discrimination = rng.normal(0, 1.5, 180), rng.uniform(0.2, 2.5, 180)
    p = 1 / (1 + np.exp(-discrimination * (ability[:, None] - difficulty[None, :])))
    return (rng.random(p.shape) < p).astype(float), np.array([f"t{i // 60}" for i in range(180)])


def greedy(x: np.ndarray, tasks: np.ndarray, quotas: dict[str, int]) -> list[int]:
    full = _subset._macro(x, tasks)
    weights = np.array([1.0 / (len(quotas) * quotas[t]) for t in tasks.tolist()])
    i, j = np.triu_indices(len(full), k=1)
    truth = np.sign(full[i] - full[j])
    partial, left, chosen = np.zeros(len(full)), dict(quotas), []
    available = np.ones(x.shape[1], dtype=bool)
    for _ in range(sum(quotas.values())):
        open_ = np.isin(tasks, [t for t, q in left.items() if q > 0])
        candidates = np.flatnonzero(available & open_)
        trial = np.round(partial[:, None] + x[:, candidates] * weights[candidates], 12)
        concordant = (np.sign(trial[i] - trial[j]) * truth[:, None]).sum(axis=0)
        best = int(candidates[np.argmax(concordant)])
        chosen.append(best)
        partial += x[:, best] * weights[best]
        available[best] = False
        left[str(tasks[best])] -= 1
    return chosen


def random_subset(x: np.ndarray, tasks: np.ndarray, quotas: dict[str, int],
                  rng: np.random.Generator) -> list[int]:
    return [int(c) for t, q in quotas.items()
            for c in rng.choice(np.flatnonzero(tasks == t), q, replace=False)]


def cross_validated_tau(pick, x: np.ndarray, tasks: np.ndarray, seed: int) -> float:
    quotas = _subset._quotas(tasks, 24)
    full = _subset._macro(x, tasks)
    folds = min(5, len(x))
    fold = np.empty(len(x), dtype=int)
    fold[np.random.default_rng(seed).permutation(len(x))] = np.arange(len(x)) % folds
    scores = np.empty(len(x))
    for f in range(folds):
        out = fold == f
        chosen = pick(x[~out], tasks, quotas)
        scores[out] = _subset._macro(x[np.ix_(out, chosen)], tasks[chosen])
    return float(sps.kendalltau(scores, full).statistic)


def main(repetitions: int = 8, model_counts: tuple[int, ...] = (8, 12, 30, 60)) -> dict:
    rng = np.random.default_rng(0)
    methods = {"labcoat": _subset._pick, "greedy": greedy,
               "random": lambda x, t, q: random_subset(x, t, q, rng)}
    print(f"24 of 180 items (3 tasks), 5-fold cross-validated Kendall tau with the full "
          f"ranking, mean over {repetitions} data sets")
    print(f"{'models':>6}  " + "  ".join(f"{name:>8}" for name in methods))
    means = {}
    for models in model_counts:
        taus = {name: [] for name in methods}
        for seed in range(repetitions):
            x, tasks = results(models, seed)
            for name, pick in methods.items():
                taus[name].append(cross_validated_tau(pick, x, tasks, seed))
        print(f"{models:>6}  " + "  ".join(f"{np.mean(v):8.3f}" for v in taus.values()))
        means[models] = {name: float(np.mean(v)) for name, v in taus.items()}
    return means


def tinylm_checkpoints(quick: bool = False) -> None:
    import torch

    from labcoat.evals import choose_subset, result_matrix
    from labcoat.workloads.tinylm import Config, train

    records: list[tuple[str, str, str, float]] = []

    class Recorder:  # the two run methods tinylm's evaluation calls, kept in memory
        def __init__(self, name: str) -> None:
            self.name = name

        def log_items(self, step: int, task: str, ids: list[str], scores: list[float]) -> None:
            records.extend((f"{self.name}@{step}", task, i, s)
                           for i, s in zip(ids, scores, strict=True))

        def log(self, *args: object, **kwargs: object) -> None:
            pass

        def log_work(self, *args: object, **kwargs: object) -> None:
            pass

        def event(self, *args: object, **kwargs: object) -> None:
            pass

    torch.set_num_threads(1)
    seeds, steps, every, warmups = (2, 30, 10, (0, 10)) if quick else (4, 400, 50, (0, 100))
    for seed in range(seeds):
        for warmup in warmups:
            train(Config(steps=steps, warmup=warmup, eval_every=every, eval_items=20,
                         eval_budget=0, threads=1, seed=seed),
                  Recorder(f"s{seed}-w{warmup}"), phases=False)  # type: ignore[arg-type]
    matrix = result_matrix(records)
    print(f"tinylm: {len(matrix.models)} checkpoints x {len(matrix.items)} items; "
          "5-fold cross-validated")
    print(f"{'items':>5}  {'kendall':>8} {'random':>7}  {'spearman':>8} {'random':>7}  "
          f"{'CI x':>5} {'diff CI x':>9}")
    for size in (20,) if quick else (20, 40, 80):
        c = choose_subset(matrix.scores, matrix.tasks, matrix.items, size, models=matrix.models)
        print(f"{size:>5}  {c.kendall:8.3f} {c.random_kendall:7.3f}  {c.spearman:8.3f} "
              f"{c.random_spearman:7.3f}  {c.ci_width_ratio:5.2f} "
              f"{c.difference_ci_width_ratio:9.2f}")


if __name__ == "__main__":
    parser = bench.parser(__doc__)
    parser.add_argument("repetitions", type=int, nargs="?", default=8)
    parser.add_argument("--tinylm", action="store_true", help="also on real tinylm checkpoints")
    args = bench.shrink(parser.parse_args(), repetitions=1, tinylm=True)
    means = main(args.repetitions, (8, 12) if args.quick else (8, 12, 30, 60))
    if args.tinylm:
        tinylm_checkpoints(args.quick)
    bench.save(args, {"kendall_tau": means})
