"""Coverage of labcoat's default intervals on simulated data with a known truth.

How often does a nominal 95% interval contain the true value? For each method and
number of runs (or items) the script simulates many experiments and counts. The
Monte-Carlo error of a coverage estimate p from S simulations is sqrt(p(1-p)/S)
(about 0.4 points at S = 3000 and 95%).

Methods (labcoat's defaults):
- mean_interval: Student-t interval of the mean across seeds.
- welch: Welch's interval for a difference of means across seeds.
- paired_difference: CLT interval of the mean item-level difference (Miller 2024)
  on items drawn from a population of items; n counts items.
- interval_estimates: stratified bootstrap (Agarwal et al. 2021) of the IQM and the
  mean over 10 fixed tasks: percentile, BCa, and the expanded percentile (Hesterberg
  2015, with the pooled degrees of freedom of the strata) that labcoat's report uses;
  n counts runs per task. The truth is
  the population value of the aggregate for those tasks (for IQM, the 25%-trimmed
  mean of the equal-weight mixture of the task distributions).

Data: "normal" scores, and "bernoulli" scores, each a mean of Bernoulli outcomes
(a run's accuracy on a fixed number of items; per item correct/incorrect for the paired
method).

    .venv/bin/python benchmarks/coverage.py              # default: ~2-3 min on 2 cores
    .venv/bin/python benchmarks/coverage.py --sims 5000  # tighter Monte-Carlo error
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, stats

from labcoat.stats import mean_interval, paired_difference, welch
from labcoat.stats._bootstrap import interval_estimates
from labcoat.stats._checks import StatsWarning

TASKS = 10
# Normal tasks: means and SDs spread so the tasks differ in level and noise.
NORMAL_MU = np.linspace(0.2, 1.2, TASKS)
NORMAL_SD = np.linspace(0.05, 0.3, TASKS)
# Bernoulli tasks: a run's score is its accuracy on ITEMS items with success rate p_t.
ITEMS = 20
BERNOULLI_P = np.linspace(0.1, 0.9, TASKS)


@dataclass(frozen=True)
class Cell:
    method: str
    data: str
    n: int
    sims: int
    reps: int
    seed: int


# --- truths ----------------------------------------------------------------


def _trimmed_mean_normal_mixture(mu: np.ndarray, sd: np.ndarray) -> float:
    """25%-trimmed mean of the equal-weight mixture of N(mu_t, sd_t^2)."""
    cdf = lambda q: np.mean(stats.norm.cdf((q - mu) / sd))  # noqa: E731
    lo = optimize.brentq(lambda q: cdf(q) - 0.25, -10, 10)
    hi = optimize.brentq(lambda q: cdf(q) - 0.75, -10, 10)
    a, b = (lo - mu) / sd, (hi - mu) / sd
    partial = mu * (stats.norm.cdf(b) - stats.norm.cdf(a)) - sd * (
        stats.norm.pdf(b) - stats.norm.pdf(a))
    return float(np.mean(partial) / 0.5)


def _trimmed_mean_discrete(values: np.ndarray, weights: np.ndarray) -> float:
    """25%-trimmed mean of a discrete distribution: integral of its quantile function
    over [0.25, 0.75], divided by 0.5."""
    order = np.argsort(values)
    values, weights = values[order], weights[order]
    upper = np.cumsum(weights)
    lower = upper - weights
    overlap = np.clip(np.minimum(upper, 0.75) - np.maximum(lower, 0.25), 0, None)
    return float(np.sum(values * overlap) / 0.5)


def _bernoulli_mixture() -> tuple[np.ndarray, np.ndarray]:
    k = np.arange(ITEMS + 1)
    values = np.tile(k / ITEMS, TASKS)
    weights = np.concatenate([stats.binom.pmf(k, ITEMS, p) for p in BERNOULLI_P]) / TASKS
    return values, weights


def truths() -> dict[tuple[str, str], float]:
    return {
        ("iqm", "normal"): _trimmed_mean_normal_mixture(NORMAL_MU, NORMAL_SD),
        ("mean", "normal"): float(NORMAL_MU.mean()),
        ("iqm", "bernoulli"): _trimmed_mean_discrete(*_bernoulli_mixture()),
        ("mean", "bernoulli"): float(BERNOULLI_P.mean()),
    }


# Paired items: difficulty d ~ Beta(2, 2); model a is right with probability d, model b
# with min(d + 0.1, 1), independently given the item. Truth: E[min(d + 0.1, 1) - d].
PAIRED_SHIFT = 0.1
PAIRED_TRUTH = float(integrate.quad(
    lambda d: (min(d + PAIRED_SHIFT, 1.0) - d) * stats.beta.pdf(d, 2, 2), 0, 1)[0])


# --- simulations -----------------------------------------------------------


def _seed_scores(rng: np.random.Generator, data: str, n: int, which: int) -> np.ndarray:
    """One group of n runs: normal N(0.5 + 0.05 which, (0.05 (1 + which))^2) or
    accuracy on 50 items with p = 0.3 + 0.1 which."""
    if data == "normal":
        return rng.normal(0.5 + 0.05 * which, 0.05 * (1 + which), n)
    return rng.binomial(50, 0.3 + 0.1 * which, n) / 50


def _seed_truth(data: str, which: int) -> float:
    return 0.5 + 0.05 * which if data == "normal" else 0.3 + 0.1 * which


def _task_scores(rng: np.random.Generator, data: str, runs: int) -> np.ndarray:
    if data == "normal":
        return rng.normal(NORMAL_MU, NORMAL_SD, size=(runs, TASKS))
    return rng.binomial(ITEMS, BERNOULLI_P, size=(runs, TASKS)) / ITEMS


def run_cell(cell: Cell) -> list[tuple[str, Cell, int, float]]:
    """Rows (label, cell, number of intervals covering the truth, median width)."""
    warnings.simplefilter("ignore", StatsWarning)
    rng = np.random.default_rng(cell.seed)
    covered, widths = 0, []
    truth_table = truths() if cell.method.startswith("bootstrap") else {}
    for _ in range(cell.sims):
        if cell.method == "mean_interval":
            iv = mean_interval(_seed_scores(rng, cell.data, cell.n, 0))
            low, high, truth = iv.low, iv.high, _seed_truth(cell.data, 0)
        elif cell.method == "welch":
            a = _seed_scores(rng, cell.data, cell.n, 0)
            b = _seed_scores(rng, cell.data, cell.n, 1)
            d = welch(a, b)
            low, high = d.low, d.high
            truth = _seed_truth(cell.data, 1) - _seed_truth(cell.data, 0)
        elif cell.method == "paired_difference":
            if cell.data == "normal":
                item = rng.normal(0, 1, cell.n)
                a = item + rng.normal(0, 0.3, cell.n)
                b = item + PAIRED_SHIFT + rng.normal(0, 0.3, cell.n)
                truth = PAIRED_SHIFT
            else:
                d = rng.beta(2, 2, cell.n)
                a = (rng.random(cell.n) < d).astype(float)
                b = (rng.random(cell.n) < np.minimum(d + PAIRED_SHIFT, 1)).astype(float)
                truth = PAIRED_TRUTH
            diff = paired_difference(a, b)
            low, high = diff.low, diff.high
        else:  # bootstrap-<metric>-<method>
            _, metric, method = cell.method.split("-")
            x = _task_scores(rng, cell.data, cell.n)
            iv = interval_estimates({"x": x}, metric=metric, reps=cell.reps,
                                    seed=int(rng.integers(2**31)), method=method)["x"]
            low, high, truth = iv.low, iv.high, truth_table[(metric, cell.data)]
        covered += int(low <= truth <= high)
        widths.append(high - low)
    name = cell.method.replace("bootstrap-", "bootstrap ").replace("-", " ")
    return [(name, cell, covered, float(np.median(widths)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=3000, help="simulations per bootstrap cell")
    parser.add_argument("--sims-fast", type=int, default=10_000,
                        help="simulations per t / Welch / paired cell (cheap)")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    parser.add_argument("--runs", type=int, nargs="+", default=[3, 5, 10])
    parser.add_argument("--items", type=int, nargs="+", default=[30, 100, 1000])
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()

    cells = []
    methods = ["mean_interval", "welch", "paired_difference"] + [
        f"bootstrap-{metric}-{method}"
        for metric in ("mean", "iqm") for method in ("percentile", "bca", "expanded")]
    for method in methods:
        fast = not method.startswith("bootstrap")
        counts = args.items if method == "paired_difference" else args.runs
        for n in counts:
            for data in ("normal", "bernoulli"):
                cells.append(Cell(method, data, n, args.sims_fast if fast else args.sims,
                                  0 if fast else args.reps, 0))
    cells = [Cell(c.method, c.data, c.n, c.sims, c.reps, seed=1000 + i)
             for i, c in enumerate(cells)]

    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = [row for rows in pool.map(run_cell, cells) for row in rows]
    seconds = time.perf_counter() - start

    print(f"nominal 95% intervals; bootstrap: {TASKS} tasks, {args.reps} reps, "
          f"{args.sims} sims per cell; others {args.sims_fast} sims per cell; "
          f"{seconds:.0f} s on {args.workers} workers")
    print("coverage % +- Monte-Carlo error (median interval width); * = outside 93-97%")
    table: dict[tuple[str, int], dict[str, str]] = {}
    for name, cell, covered, width in results:
        p = covered / cell.sims
        se = np.sqrt(p * (1 - p) / cell.sims)
        flag = "" if 93.0 <= round(100 * p, 1) <= 97.0 else " *"
        table.setdefault((name, cell.n), {})[cell.data] = (
            f"{100 * p:.1f} +- {100 * se:.1f}{flag} ({width:.3f})")
    print("| method | n | normal | bernoulli |")
    print("| --- | --- | --- | --- |")
    labels = list(dict.fromkeys(name for name, _ in table))  # first-appearance order
    for name, n in sorted(table, key=lambda key: (labels.index(key[0]), key[1])):
        by_data = table[(name, n)]
        unit = "items" if name == "paired_difference" else "runs"
        print(f"| {name} | {n} {unit} | {by_data.get('normal', '')} | "
              f"{by_data.get('bernoulli', '')} |")

if __name__ == "__main__":
    main()
