"""Coverage of Bradley-Terry bootstrap intervals over simulated arenas, and how far a
prompt cluster copied 10x moves Bradley-Terry, Elo and the Nash rating.

Coverage: each arena has 8 models with strengths ~ N(0, 1), 3000 battles between
random pairs, outcomes from Davidson's model (nu = 0 for "no ties", nu = 0.5 for
"ties", about 18% ties); `stats.bradley_terry` with 400 bootstrap replicates
(prompts resampled) gives a 95% interval per model; we count how often it holds
the true centred rating (1000 + 400 / ln 10 x (theta - mean theta)), and how often
the rank interval holds the true rank. Monte-Carlo error: sqrt(p (1 - p) / (S x 8)).

Redundancy: arenas of 6 models with a common skill plus a per-cluster skill of SD
0.8 over 6 clusters, 3000 battles; cluster 0 is copied 10x (`Battles.with_copies`)
and we report the largest change of any model's rating (Bradley-Terry and Elo in
Elo points, Nash in score rate) and how many arenas changed the top model.

    nice -n 10 .venv/bin/python benchmarks/ratings_coverage.py          # 200 arenas, ~6 min
    .venv/bin/python benchmarks/ratings_coverage.py --quick             # a smoke run, seconds
"""

from __future__ import annotations

import time

import _harness as bench
import numpy as np

from labcoat import stats


def arena(rng: np.random.Generator, n: int, m: int, nu: float, clusters: int = 1,
          specialist: float = 0.0) -> tuple[stats.Battles, np.ndarray]:
    theta = rng.normal(0, 1, n)
    skill = theta[:, None] + specialist * rng.normal(0, 1, (n, clusters))
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n
    c = rng.integers(0, clusters, m)
    pa, pb = np.exp(skill[a, c]), np.exp(skill[b, c])
    tie = nu * np.sqrt(pa * pb)
    u = rng.random(m) * (pa + pb + tie)
    winner = np.where(u < pa, "model_a", np.where(u < pa + pb, "model_b", "tie"))
    names = [f"m{i}" for i in range(n)]
    data = stats.battles([names[i] for i in a], [names[i] for i in b], winner.tolist(),
                         clusters=[f"c{k}" for k in c] if clusters > 1 else None)
    return data, theta


def coverage(arenas: int, boot: int, nu: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    hit = rank_hit = total = 0
    width = []
    for s in range(arenas):
        data, theta = arena(rng, 8, 3000, nu)
        truth = 1000 + 400 / np.log(10) * (theta - theta.mean())  # Arena's Elo scale
        fit = stats.bradley_terry(data, bootstrap=boot, seed=s)
        true_rank = np.argsort(np.argsort(-theta)) + 1
        hit += int(np.sum((fit.low <= truth) & (truth <= fit.high)))
        rank_hit += int(np.sum((fit.rank_low <= true_rank) & (true_rank <= fit.rank_high)))
        total += len(theta)
        width.append(float(np.mean(fit.high - fit.low)))
    p = hit / total
    return {"coverage": p, "mc_error": float(np.sqrt(p * (1 - p) / total)),
            "rank_coverage": rank_hit / total, "mean_width_elo": float(np.mean(width)),
            "arenas": arenas, "bootstrap": boot}


def redundancy(arenas: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    bt_shift, elo_shift, nash_shift, top_changed = [], [], [], 0
    for _ in range(arenas):
        data, _ = arena(rng, 6, 3000, 0.0, clusters=6, specialist=0.8)
        copied = data.with_copies(0, 10)
        bt0 = stats.bradley_terry(data, bootstrap=0, prior=1e-8).rating
        bt1 = stats.bradley_terry(copied, bootstrap=0, prior=1e-8).rating
        e0 = stats.elo(data, orders=5, seed=0).mean
        e1 = stats.elo(copied, orders=5, seed=0).mean
        n0, n1 = stats.nash_rating(data).ratings, stats.nash_rating(copied).ratings
        bt_shift.append(np.abs(bt1 - bt0).max())
        elo_shift.append(np.abs(e1 - e0).max())
        nash_shift.append(np.abs(n1 - n0).max())
        top_changed += int(np.argmax(bt0) != np.argmax(bt1))
    return {"arenas": arenas, "bt_max_shift_elo_median": float(np.median(bt_shift)),
            "bt_max_shift_elo_max": float(np.max(bt_shift)),
            "elo_max_shift_median": float(np.median(elo_shift)),
            "nash_max_shift_max": float(np.max(nash_shift)),
            "bt_top_model_changed": top_changed}


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--arenas", type=int, default=200)
    parser.add_argument("--bootstrap", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = bench.shrink(parser.parse_args(), arenas=10, bootstrap=100)
    started = time.perf_counter()
    results = {}
    for label, nu in (("no ties", 0.0), ("ties (nu = 0.5)", 0.5)):
        r = coverage(args.arenas, args.bootstrap, nu, args.seed)
        results[label] = r
        print(f"{label:16s} BT 95% CI coverage {r['coverage']:.3f} +- {r['mc_error']:.3f}, "
              f"rank interval {r['rank_coverage']:.3f}, mean width {r['mean_width_elo']:.0f} "
              f"Elo ({r['arenas']} arenas x 8 models, {r['bootstrap']} replicates)")
    red = redundancy(max(args.arenas // 10, 5), args.seed + 1)
    results["redundancy"] = red
    print(f"cluster copied 10x ({red['arenas']} arenas): Bradley-Terry moves "
          f"{red['bt_max_shift_elo_median']:.0f} Elo (median of max over models; max "
          f"{red['bt_max_shift_elo_max']:.0f}), top model changed in "
          f"{red['bt_top_model_changed']}; Elo {red['elo_max_shift_median']:.0f}; "
          f"Nash at most {red['nash_max_shift_max']:.1e}")
    print(f"took {time.perf_counter() - started:.0f} s")
    bench.save(args, results)


if __name__ == "__main__":
    main()
