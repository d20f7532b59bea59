"""Error rates of the verdict paths an outside statistician found wrong (issue 30, point 5).

Each section puts the old rule and the new one side by side, on the same draws, and every
rate is printed with its Monte-Carlo SE sqrt(p (1 - p) / S) where it is simulated:

1. Paired 0/1 items (`stats.paired_difference`): EXACT rates, summed over every 2x2 table
   of n items (no simulation): P(p < 0.05) with no difference and a discordant fraction of
   10% or 30% for the old CLT test and the new exact McNemar one; how often the old p and
   its (Agresti-Min) interval disagreed about 0, and the new ones (never, by construction);
   the worst coverage of the new interval over true (p01, p10) on a grid.
2. Seeds with no variation (`stats.SequentialTest`): a script that ignores its seed (each
   arm constant, difference 0 or +-0.1 or +-1) and a 0/1 outcome per seed with ties: how
   often the rule is decisive; plus its type-I error with normal seeds over 50 looks.
3. Across tasks (`stats.generalization`): 3-5 tasks, 5 seeds per arm, per-task Welch, seed
   SDs 0.5, 1 or 2 by task; the true effect of every task 0 (a), or all equal to the
   smallest effect delta (b). (a) P("helps broadly") and the rate at which each pooled
   interval (DL normal: old; plain HKSJ; modified HKSJ: new) excludes 0 upward; (b)
   P("no detectable effect") for the old rule (pooled DL CI inside +-delta or z power
   >= 0.8) and the new one (TOST on the modified HKSJ pooled effect).
4. Power advice under `--until-decisive`: for a true effect delta, seed-difference SD 1,
   the budget the report now advises (`stats.sequential_power`, from the true SD and
   from the SD of a 9-seed run) and the budget the fixed-n advice gave, each with the
   power the rule really reaches there (a fresh simulation of the rule, another seed).
5. The sign of a tiny effect (`stats.verdict`, Welch, 10 seeds per arm): true effects
   +-delta/10 and 0, seed SD delta/20: the rates of "negligible", "supported",
   "refuted" (symmetric now), and the total error under no effect.

    nice -n 10 .venv/bin/python benchmarks/small_sample_verdicts.py          # ~4-9 min
    nice -n 10 .venv/bin/python benchmarks/small_sample_verdicts.py --quick  # < 1 min
    nice -n 10 .venv/bin/python benchmarks/small_sample_verdicts.py --only 3 5  # sections
"""

from __future__ import annotations

import math
import time
import warnings

import _harness as bench
import numpy as np
from scipy import stats as sps

from labcoat import stats
from labcoat.stats._items import mcnemar_interval
from labcoat.stats._meta import random_effects
from labcoat.stats._sequential import _decide, _intersect, _paths

ALPHA = 0.05


def se(p: float, sims: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.0) / sims)


def rate(p: float, sims: int) -> str:
    return f"{p:.3f} +- {se(p, sims):.3f}"


# --- 1. paired 0/1 items ------------------------------------------------------------------


def _tables(n: int):
    for n01 in range(n + 1):
        for n10 in range(n + 1 - n01):
            yield n01, n10


def _items(n01: int, n10: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.ones(n), np.ones(n)
    a[:n01] = 0.0
    b[n01:n01 + n10] = 0.0
    return a, b


def paired_items(sizes: list[int]) -> list[str]:
    rows = ["| items | discordant | old CLT p < 0.05 | old p vs its CI disagree | new exact "
            "McNemar p < 0.05 | new disagree | new CI worst coverage (grid) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    grid = [(p01, p10) for p01 in (0.0, 0.05, 0.15, 0.3) for p10 in (0.0, 0.05, 0.15, 0.3)
            if 0 < p01 + p10 <= 0.6]
    for n in sizes:
        cells = {}
        for n01, n10 in _tables(n):
            a, b = _items(n01, n10, n)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                clt = stats.paired_difference(a, b, formula="clt")
                am = stats.paired_difference(a, b, formula="agresti-min")
            new_p, low, high = mcnemar_interval(n01, n10, n)
            cells[n01, n10] = (clt.p_value < ALPHA, (clt.p_value < ALPHA) != (am.low > 0 or
                                                                            am.high < 0),
                               new_p < ALPHA, (new_p < ALPHA) != (low > 0 or high < 0),
                               low, high)
        counts = np.array([[x, y, n - x - y] for x, y in cells])
        table = np.array(list(cells.values()), dtype=float)  # (tables, 6)
        worst = 1.0
        for p01, p10 in grid:
            probs = sps.multinomial.pmf(counts, n, [p01, p10, 1 - p01 - p10])
            covered = (table[:, 4] <= p01 - p10) & (p01 - p10 <= table[:, 5])
            worst = min(worst, float(np.sum(probs * covered)))
        for disc in (0.1, 0.3):
            probs = sps.multinomial.pmf(counts, n, [disc / 2, disc / 2, 1 - disc])
            old, old_dis, new, new_dis = (float(np.sum(probs * table[:, j])) for j in range(4))
            rows.append(f"| {n} | {disc:.0%} | {old:.3f} | {old_dis:.3f} | {new:.3f} | "
                        f"{new_dis:.3f} | {100 * worst:.1f}% |")
    return rows


# --- 2. no variation ----------------------------------------------------------------------


def decisive(control: np.ndarray, variant: np.ndarray, budget: int) -> str:
    """Replay SequentialTest seed by seed from 5 seeds (the runner's first look)."""
    test = stats.SequentialTest(smallest_effect=0.05, max_seeds=budget)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)
        for n in range(5, budget + 1):
            result = test.update(control[:n], variant[:n])
            if result.stop:
                break
    return result.decision


def no_variation(rng: np.random.Generator, sims: int) -> list[str]:
    rows = ["| seeds | case | decisive (supported / refuted / no effect) | \"no variation\" |",
            "| --- | --- | --- | --- |"]
    for shift in (0.0, 0.1, -0.1, 1.0):
        found = decisive(np.full(20, 0.5), np.full(20, 0.5 + shift), 20)
        rows.append(f"| constant (script ignores its seed) | difference {shift:+g} | "
                    f"{int(found in ('supported', 'refuted', 'no effect'))} of 1 | "
                    f"{int(found == 'no variation')} of 1 |")
    counts = {"decisive": 0, "no variation": 0}
    for _ in range(sims):
        control = (rng.random(20) < 0.9).astype(float)
        variant = (rng.random(20) < 0.9).astype(float)
        found = decisive(control, variant, 20)
        counts["decisive"] += found in ("supported", "refuted", "no effect")
        counts["no variation"] += found == "no variation"
    rows.append(f"| 0/1 per seed, p = 0.9 both arms (ties) | no difference | "
                f"{rate(counts['decisive'] / sims, sims)} | "
                f"{rate(counts['no variation'] / sims, sims)} |")
    d = rng.normal(0.0, 1.0, (sims * 10, 50))
    _, low, high, _ = _paths(d, ALPHA, "t-mixture", 1.0, None)
    low, high, _ = _intersect(low, high)
    codes = _decide(low, high, 1, None)
    wrong = float(np.any((codes == 1) | (codes == 2), axis=1).mean())
    rows.append(f"| normal seeds, 50 looks | no difference | type-I "
                f"{rate(wrong, sims * 10)} | - |")
    return rows


# --- 3. across tasks ----------------------------------------------------------------------


def _welch_tasks(rng: np.random.Generator, k: int, effect: float) -> dict:
    out = {}
    for t in range(k):
        sd = (0.5, 1.0, 2.0)[t % 3]
        a, b = rng.normal(0.0, sd, 5), rng.normal(effect, sd, 5)
        out[f"t{t}"] = stats.welch(a, b)
    return out


def across_tasks(rng: np.random.Generator, sims: int) -> list[str]:
    rows = ["| tasks | truth | pooled CI > 0: DL z (old) | plain HKSJ | modified HKSJ (new) | "
            "\"helps broadly\" (new) | \"no detectable effect\": old rule | new (TOST) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    delta = 1.0
    z = sps.norm.ppf(1 - ALPHA / 2)
    for k in (3, 4, 5):
        for truth in (0.0, delta):
            dl = hk = mhk = broad = old_none = new_none = 0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", stats.StatsWarning)
                for _ in range(sims):
                    tasks = _welch_tasks(rng, k, truth)
                    y = [d.estimate for d in tasks.values()]
                    v = [d.se**2 for d in tasks.values()]
                    plain = random_effects(y, v)
                    dl += plain.low > 0
                    hk += random_effects(y, v, knapp_hartung=True).low > 0
                    g = stats.generalization(tasks, smallest_effect=delta)
                    mhk += g.pooled.low > 0
                    broad += g.verdict == "helps broadly"
                    new_none += g.verdict == "no detectable effect"
                    adj = stats.adjust(list(tasks.values()), "holm", ci=1 - ALPHA)
                    significant = any(a.excludes_zero() for a in adj) or plain.excludes_zero()
                    shift = delta / plain.se
                    power = sps.norm.cdf(shift - z) + sps.norm.cdf(-shift - z)
                    inside = -delta < plain.low and plain.high < delta
                    old_none += not significant and (inside or power >= 0.8)
            name = "0" if truth == 0 else "delta"
            rows.append(f"| {k} | {name} | {rate(dl / sims, sims)} | {rate(hk / sims, sims)} | "
                        f"{rate(mhk / sims, sims)} | {rate(broad / sims, sims)} | "
                        f"{rate(old_none / sims, sims)} | {rate(new_none / sims, sims)} |")
    return rows


# --- 4. sequential power advice -----------------------------------------------------------


def advice(rng: np.random.Generator, reps: int) -> list[str]:
    rows = ["| advice | budget (seeds per arm) | power the rule reaches there |",
            "| --- | --- | --- |"]
    check = 4 * reps

    def reached(budget: int) -> float:
        return stats.sequential_power(1.0, sd=1.0, max_seeds=budget, reps=check,
                                      seed=int(rng.integers(2**31))).power

    fixed = stats.seeds_needed(1.0, sd=1.0 / math.sqrt(2), power=0.8)
    rows.append(f"| fixed-n t test (the old note) | {fixed} | "
                f"{rate(reached(fixed), check)} |")
    true = stats.sequential_power(1.0, sd=1.0, reps=reps, seed=1).seeds_needed
    rows.append(f"| sequential_power, true SD | {true} | {rate(reached(true), check)} |")
    budgets = []
    for _ in range(25):
        sd = float(np.std(rng.normal(1.0, 1.0, 9), ddof=1))
        budgets.append(stats.sequential_power(1.0, sd=sd, reps=reps, seed=1).seeds_needed)
    budgets = [b for b in budgets if b is not None]
    median = int(np.median(budgets))
    rows.append(f"| sequential_power, SD of a 9-seed run (median of 25) | {median} "
                f"(range {min(budgets)}-{max(budgets)}) | {rate(reached(median), check)} |")
    return rows


# --- 5. the sign of a tiny effect ---------------------------------------------------------


def tiny_effects(rng: np.random.Generator, sims: int) -> list[str]:
    rows = ["| true effect | negligible | supported | refuted | no-effect | inconclusive | "
            "old rule: refuted |", "| --- | --- | --- | --- | --- | --- | --- |"]
    delta = 0.02
    for effect in (delta / 10, -delta / 10, 0.0):
        seen: dict[str, int] = {}
        old = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.StatsWarning)
            for _ in range(sims):
                a = rng.normal(0.5, delta / 20, 10)
                b = rng.normal(0.5 + effect, delta / 20, 10)
                diff = stats.welch(a, b)
                found = stats.verdict(diff, smallest_effect=delta).decision
                seen[found] = seen.get(found, 0) + 1
                # the old rule: significant against the prediction was refuted, however small
                old += found == "refuted" or (found == "negligible" and diff.estimate < 0)
        cells = [rate(seen.get(d, 0) / sims, sims) for d in
                 ("negligible", "supported", "refuted", "no-effect", "inconclusive")]
        rows.append(f"| {effect:+g} (delta {delta:g}) | " + " | ".join(cells)
                    + f" | {rate(old / sims, sims)} |")
    return rows


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--sims", type=int, default=2000, help="simulated experiments per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, nargs="+", choices=range(1, 6),
                        default=list(range(1, 6)), help="sections to run (1-5)")
    args = bench.shrink(parser.parse_args(), sims=40)
    start = time.perf_counter()
    sizes = [10, 20] if args.quick else [10, 15, 20, 25, 30, 50, 100]
    # Each section draws from its own stream, so --only reproduces a section's numbers.
    rngs = [np.random.default_rng([args.seed, i]) for i in range(6)]
    runs = {
        1: ("1. paired 0/1 items (exact, every table)", lambda: paired_items(sizes)),
        2: (f"2. no variation ({args.sims} sims)", lambda: no_variation(rngs[2], args.sims)),
        3: (f"3. across tasks ({args.sims} sims per row)",
            lambda: across_tasks(rngs[3], args.sims)),
        4: ("4. sequential power advice (delta = 1 SD of seed differences)",
            lambda: advice(rngs[4], 200 if args.quick else 2000)),
        5: (f"5. the sign of a tiny effect ({args.sims} sims)",
            lambda: tiny_effects(rngs[5], args.sims)),
    }
    sections = {runs[i][0]: runs[i][1]() for i in sorted(args.only)}
    for title, rows in sections.items():
        print(f"\n{title}\n" + "\n".join(rows))
    print(f"\n{time.perf_counter() - start:.0f} s, seed {args.seed}")
    bench.save(args, {"sims": args.sims, "seed": args.seed, "sections": sections,
                      "seconds": time.perf_counter() - start})


if __name__ == "__main__":
    main()
