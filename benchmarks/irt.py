"""2PL IRT: labcoat's fit against girth's on simulated responses, and how close a short
adaptive test gets to the full bank's ability estimate.

Agreement: 1,000 examinees x 50 items from a 2PL with a ~ lognormal(0, 0.3), b ~ N(0, 1),
theta ~ N(0, 1); `stats.fit_2pl` (plain MML, prior=None, and the default weak item
priors) against girth 0.8.0's `twopl_mml` (the dev extra): Pearson r of discriminations
and difficulties, the largest difference, and each fit's time (interleaved rounds).

Adaptive tests: banks fitted on those 1,000 examinees (two discrimination levels, a ~
lognormal(0, 0.3), mean ~1, and lognormal(0.4, 0.3), mean ~1.5); new examinees theta ~
N(0, 1) answer every item; `stats.adaptive_test` asks n of the 50 (max Fisher information
at the current EAP) and we report |theta_adaptive - theta_full bank| (mean, 90th
percentile, max), RMSE of both against the true theta, and 30 random items as a baseline.

    nice .venv/bin/python benchmarks/irt.py              # 300 examinees per bank, ~2 min
    .venv/bin/python benchmarks/irt.py --quick           # a smoke run, seconds
"""

from __future__ import annotations

import time

import _harness as bench
import numpy as np

from labcoat import stats


def simulate(rng: np.random.Generator, theta: np.ndarray, a: np.ndarray, b: np.ndarray
             ) -> np.ndarray:
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    return (rng.random(p.shape) < p).astype(float)


def bank(seed: int, examinees: int, items: int, log_a: float) -> dict:
    rng = np.random.default_rng(seed)
    a, b = rng.lognormal(log_a, 0.3, items), rng.normal(0, 1, items)
    return {"a": a, "b": b, "y": simulate(rng, rng.normal(0, 1, examinees), a, b)}


def agreement(data: dict, rounds: int) -> dict:
    try:
        import girth
    except ImportError:
        return {"girth": "absent (pip install girth==0.8.0)"}
    y = data["y"]
    fits: dict = {}
    times = bench.interleaved({
        "labcoat": lambda: fits.__setitem__("labcoat", stats.fit_2pl(y, prior=None)),
        "labcoat_prior": lambda: fits.__setitem__("prior", stats.fit_2pl(y)),
        "girth": lambda: fits.__setitem__("girth", girth.twopl_mml(y.T.astype(int))),
    }, rounds=rounds)
    ref = fits["girth"]
    out = {name: t.summary() for name, t in times.items()}
    for key, fit in (("mml", fits["labcoat"]), ("prior", fits["prior"])):
        out[key] = {
            "r_discrimination": float(np.corrcoef(fit.discrimination,
                                                  ref["Discrimination"])[0, 1]),
            "r_difficulty": float(np.corrcoef(fit.difficulty, ref["Difficulty"])[0, 1]),
            "max_diff_discrimination": float(np.abs(fit.discrimination
                                                    - ref["Discrimination"]).max()),
            "max_diff_difficulty": float(np.abs(fit.difficulty - ref["Difficulty"]).max()),
            "iterations": fit.iterations}
    return out


def adaptive(data: dict, examinees: int, lengths: list[int], seed: int) -> dict:
    fit = stats.fit_2pl(data["y"])
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, examinees)
    y = simulate(rng, theta, data["a"], data["b"])
    n_items = y.shape[1]
    full = np.array([stats.ability(fit, row).theta for row in y])
    out: dict = {"examinees": examinees, "bank": n_items,
                 "mean_discrimination": float(data["a"].mean()),
                 "rmse_full_vs_truth": float(np.sqrt(np.mean((full - theta) ** 2)))}
    for n in lengths:
        est = np.array([stats.adaptive_test(fit, lambda j, r=row: r[j], n).ability.theta
                        for row in y])
        gap = np.abs(est - full)
        out[f"adaptive_{n}"] = {
            "mean_abs_vs_full": float(gap.mean()), "p90_abs_vs_full": float(np.quantile(gap, 0.9)),
            "max_abs_vs_full": float(gap.max()),
            "rmse_vs_truth": float(np.sqrt(np.mean((est - theta) ** 2)))}
    k = min(30, n_items - 5)  # a random subset as long as the adaptive test of 30
    picks = [rng.choice(n_items, k, replace=False) for _ in range(examinees)]
    random_est = np.array([stats.ability(fit, row[p], p).theta for row, p in zip(y, picks,
                                                                                   strict=True)])
    out["random_items"] = k
    out["random_mean_abs_vs_full"] = float(np.abs(random_est - full).mean())
    return out


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--examinees", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = bench.shrink(parser.parse_args(), examinees=20, rounds=1)
    started = time.perf_counter()
    size = (200, 20) if args.quick else (1000, 50)
    results: dict = {"responses": f"{size[0]} x {size[1]}"}
    agree = agreement(bank(args.seed, *size, 0.0), args.rounds)
    results["agreement_with_girth"] = agree
    if "mml" in agree:
        for key in ("mml", "prior"):
            r = agree[key]
            print(f"{size[0]} x {size[1]} {key:5s}: r(a) {r['r_discrimination']:.5f}, r(b) "
                  f"{r['r_difficulty']:.5f}, max |diff| a {r['max_diff_discrimination']:.3f}, "
                  f"b {r['max_diff_difficulty']:.3f}")
        print(f"fit time: labcoat {agree['labcoat']['median']:.2f} s (with priors "
              f"{agree['labcoat_prior']['median']:.2f} s), girth {agree['girth']['median']:.2f} s")
    else:
        print(f"girth: {agree['girth']}")
    lengths = [10, 20, 30, 40] if not args.quick else [10]
    for label, log_a in (("a~1", 0.0), ("a~1.5", 0.4)):
        r = adaptive(bank(args.seed, *size, log_a), args.examinees, lengths, args.seed + 1)
        results[f"adaptive {label}"] = r
        for n in lengths:
            x = r[f"adaptive_{n}"]
            print(f"bank {label} ({r['bank']} items), {n} adaptive items, {r['examinees']} "
                  f"examinees: |theta - full bank| mean {x['mean_abs_vs_full']:.3f}, p90 "
                  f"{x['p90_abs_vs_full']:.3f}, max {x['max_abs_vs_full']:.3f}; RMSE vs truth "
                  f"{x['rmse_vs_truth']:.3f} (full bank {r['rmse_full_vs_truth']:.3f})")
        print(f"  {r['random_items']} random items: mean |theta - full bank| "
              f"{r['random_mean_abs_vs_full']:.3f}")
    print(f"took {time.perf_counter() - started:.0f} s")
    bench.save(args, results)


if __name__ == "__main__":
    main()
