"""Coverage of labcoat's default intervals on simulated data with a known truth.

How often does a nominal 95% interval contain the true value? For each method and
number of runs (or items, or clusters) the script simulates many experiments and
counts. The Monte-Carlo error of a coverage estimate p from S simulations is
sqrt(p(1-p)/S) (about 0.2 points at S = 10000 and 95%, 0.4 at S = 3000). Old defaults
are run next to the new ones, labelled "(old)", so one table shows before and after.

Families (--only picks some):
- seeds: mean_interval (Student t), welch, and the robust trimmed_mean_interval and
  yuen (20% trimmed means) across 3, 5 and 10 runs. Data: "normal"; "bernoulli" (a
  run's accuracy on 50 items); "skewed" (lognormal run-to-run noise, sigma_log = 1,
  scaled to the normal case's mean and SD); "collapsed" (normal, but in 10% of the
  experiments one run is replaced by a collapsed one 10 SDs below the mean). Truths:
  the mean of the run distribution for the t methods, its 20% trimmed mean for the
  trimmed ones (equal for normal data); for "collapsed" the healthy runs' mean for
  both. Also counted: how often an outlier-seed StatsWarning fired ("warned"), and
  coverage in the experiments where it did not ("silent").
- bounded: mean_interval with and without bounds=(0, 1) on exact-match-like runs
  near 1 (Beta(40, 2), mean 0.952), and how often the unbounded interval leaves [0, 1].
- items: 0/1 item scores near the boundary: eval_mean (CLT (old) vs the default
  Wilson), paired_difference (CLT (old) vs the default Agresti-Min) and
  unpaired_difference (CLT (old) vs the default Agresti-Caffo); n counts items.
- clusters: eval_mean with clusters of items: CR0 with a z quantile (old default),
  CR1 with t(G-1), and the default CR2 with Bell-McCaffrey df (Wilson with the
  design-effect sample size for 0/1 scores). Data: "balanced" (10 items per cluster,
  normal cluster effect as large as the item noise), "unbalanced" (cluster sizes
  round(exp(N(log 8, 1)))), "binary" (unbalanced, 0/1 items with a cluster accuracy
  expit(logit(0.9) + N(0, 1)), mean 0.866); n counts clusters.
- bootstrap: stratified bootstrap (Agarwal et al. 2021) of the IQM and the mean over
  10 fixed tasks: percentile (rliable's), BCa, and the expanded percentile (Hesterberg
  2015; labcoat's default), plus probability_of_improvement (percentile vs the default
  expanded). The truth is the population value of the aggregate for those tasks (for
  IQM, the 25%-trimmed mean of the equal-weight mixture of the task distributions).

Methods of a family see the same simulated experiments (the seed depends on the data
kind and n only), so "(old)" and new rows differ only by the method. Runs in one
process (no pool).

    .venv/bin/python benchmarks/coverage.py                     # everything, ~15 min
    .venv/bin/python benchmarks/coverage.py --only seeds items  # some families
    .venv/bin/python benchmarks/coverage.py --tenth             # 1/10 of the simulations
    .venv/bin/python benchmarks/coverage.py --quick             # a smoke run, seconds
"""

from __future__ import annotations

import argparse
import time
import warnings
import zlib
from dataclasses import dataclass, field

import _harness as bench
import numpy as np
from scipy import integrate, optimize, special, stats

from labcoat.stats import (
    eval_mean,
    mean_interval,
    paired_difference,
    trimmed_mean_interval,
    unpaired_difference,
    welch,
    yuen,
)
from labcoat.stats._bootstrap import interval_estimates, probability_of_improvement
from labcoat.stats._checks import StatsWarning

TASKS = 10
# Normal tasks: means and SDs spread so the tasks differ in level and noise.
NORMAL_MU = np.linspace(0.2, 1.2, TASKS)
NORMAL_SD = np.linspace(0.05, 0.3, TASKS)
# Bernoulli tasks: a run's score is its accuracy on ITEMS items with success rate p_t.
ITEMS = 20
BERNOULLI_P = np.linspace(0.1, 0.9, TASKS)
# probability_of_improvement: x is shifted up by this much on every normal task.
POI_SHIFT = 0.1
FAMILIES = ("seeds", "bounded", "items", "clusters", "bootstrap")
# Warnings that qualify an interval's coverage (counted as "warned"); few-runs and
# no-trimming fire on every small experiment and say nothing about this one.
QUALIFYING = ("outlier-seed",)


@dataclass(frozen=True)
class Cell:
    family: str
    method: str
    data: str
    n: int
    sims: int
    reps: int
    seed: int


@dataclass
class Tally:
    covered: int = 0
    warned: int = 0
    covered_silent: int = 0
    outside: int = 0
    widths: list[float] = field(default_factory=list)


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


def _trimmed_mean_discrete(values: np.ndarray, weights: np.ndarray, trim: float = 0.25
                           ) -> float:
    """trim-trimmed mean of a discrete distribution: integral of its quantile function
    over [trim, 1 - trim], divided by 1 - 2 trim."""
    order = np.argsort(values)
    values, weights = values[order], weights[order]
    upper = np.cumsum(weights)
    lower = upper - weights
    overlap = np.clip(np.minimum(upper, 1 - trim) - np.maximum(lower, trim), 0, None)
    return float(np.sum(values * overlap) / (1 - 2 * trim))


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


def _beta_pairs_truth(alpha: float, beta: float, shift: float) -> float:
    """E[min(d + shift, 1) - d] for d ~ Beta(alpha, beta)."""
    return float(integrate.quad(
        lambda d: (min(d + shift, 1.0) - d) * stats.beta.pdf(d, alpha, beta), 0, 1)[0])


# Paired 0/1 items: item difficulty d ~ Beta(alpha, beta); model a is right with
# probability d, model b with min(d + shift, 1), independently given the item.
PAIRED = {"p~0.5": (2.0, 2.0, 0.1), "p~0.9": (9.0, 1.0, 0.03), "p~0.95": (19.0, 1.0, 0.02)}
PAIRED_TRUTH = {name: _beta_pairs_truth(*args) for name, args in PAIRED.items()}
# Unpaired 0/1 items: accuracies of a and b on independent item sets of n items each.
UNPAIRED = {"0.88 vs 0.92": (0.88, 0.92), "0.93 vs 0.97": (0.93, 0.97)}
# Clustered 0/1 items: cluster accuracy expit(logit(0.9) + N(0, 1)).
CLUSTER_LOGIT_SD = 1.0
CLUSTER_BINARY_TRUTH = float(integrate.quad(
    lambda z: special.expit(special.logit(0.9) + CLUSTER_LOGIT_SD * z) * stats.norm.pdf(z),
    -12, 12)[0])

# Lognormal run noise for "skewed" seeds: exp(Z) standardised to mean 0, SD 1.
LN_MEAN, LN_SD = float(np.exp(0.5)), float(np.sqrt((np.e - 1) * np.e))
# 20% trimmed mean of exp(Z): E[X; q_.2 < X < q_.8] / 0.6, with E[X; X < q] =
# e^(1/2) Phi(log q - 1).
_Q = stats.norm.ppf([0.2, 0.8])
LN_TRIMMED = float(LN_MEAN * (stats.norm.cdf(_Q[1] - 1) - stats.norm.cdf(_Q[0] - 1)) / 0.6)
COLLAPSE_RATE, COLLAPSE_SDS = 0.1, 10.0


# --- simulations -----------------------------------------------------------


def _seed_location(data: str, which: int) -> tuple[float, float]:
    """(mean, SD) of group `which`: 0.5 + 0.05 which, 0.05 (1 + which); accuracies on 50
    items with p = 0.3 + 0.1 which for "bernoulli"."""
    if data == "bernoulli":
        p = 0.3 + 0.1 * which
        return p, float(np.sqrt(p * (1 - p) / 50))
    return 0.5 + 0.05 * which, 0.05 * (1 + which)


def _seed_scores(rng: np.random.Generator, data: str, n: int, which: int) -> np.ndarray:
    """One group of n runs (see the module docstring for the data kinds)."""
    mu, sd = _seed_location(data, which)
    if data == "bernoulli":
        return rng.binomial(50, mu, n) / 50
    if data == "skewed":
        return mu + sd * (np.exp(rng.normal(0, 1, n)) - LN_MEAN) / LN_SD
    x = rng.normal(mu, sd, n)
    if data == "collapsed" and rng.random() < COLLAPSE_RATE:
        x[0] = mu - COLLAPSE_SDS * sd
    return x


def _seed_truth(data: str, which: int, trimmed: bool) -> float:
    mu, sd = _seed_location(data, which)
    if not trimmed:
        return mu
    if data == "skewed":
        return mu + sd * (LN_TRIMMED - LN_MEAN) / LN_SD
    if data == "bernoulli":
        k = np.arange(51)
        return _trimmed_mean_discrete(k / 50, stats.binom.pmf(k, 50, mu), trim=0.2)
    return mu


def _task_scores(rng: np.random.Generator, data: str, runs: int, shift: float = 0.0
                 ) -> np.ndarray:
    if data == "normal":
        return rng.normal(NORMAL_MU + shift, NORMAL_SD, size=(runs, TASKS))
    return rng.binomial(ITEMS, BERNOULLI_P, size=(runs, TASKS)) / ITEMS


def _cluster_sample(rng: np.random.Generator, data: str, g: int
                    ) -> tuple[np.ndarray, np.ndarray, float]:
    """(scores, cluster ids, truth) for g clusters."""
    if data == "balanced":
        sizes = np.full(g, 10)
    else:
        sizes = np.maximum(1, np.round(np.exp(rng.normal(np.log(8), 1.0, g)))).astype(int)
    ids = np.repeat(np.arange(g), sizes)
    if data == "binary":
        p = special.expit(special.logit(0.9) + rng.normal(0, CLUSTER_LOGIT_SD, g))
        return (rng.random(ids.size) < p[ids]).astype(float), ids, CLUSTER_BINARY_TRUTH
    return rng.normal(0, 1, g)[ids] + rng.normal(0, 1, ids.size), ids, 0.0


def _one(cell: Cell, rng: np.random.Generator, truth_table: dict) -> tuple[float, float, float]:
    """(low, high, truth) of one simulated experiment."""
    method, data, n = cell.method, cell.data, cell.n
    if cell.family == "seeds":
        trimmed = method in ("trimmed_mean_interval", "yuen")
        if method in ("mean_interval", "trimmed_mean_interval"):
            x = _seed_scores(rng, data, n, 0)
            iv = mean_interval(x) if method == "mean_interval" else trimmed_mean_interval(x)
            return iv.low, iv.high, _seed_truth(data, 0, trimmed)
        a, b = _seed_scores(rng, data, n, 0), _seed_scores(rng, data, n, 1)
        d = welch(a, b) if method == "welch" else yuen(a, b)
        return d.low, d.high, _seed_truth(data, 1, trimmed) - _seed_truth(data, 0, trimmed)
    if cell.family == "bounded":
        x = rng.beta(40, 2, n)
        bounds = (0.0, 1.0) if "bounds" in method else None
        iv = mean_interval(x, bounds=bounds)
        return iv.low, iv.high, 40 / 42
    if cell.family == "items":
        formula = "clt" if "(old)" in method else "auto"
        if method.startswith("eval_mean"):
            p = float(data.split("=")[1])
            x = (rng.random(n) < p).astype(float)
            iv = eval_mean(x, formula=formula)
            return iv.low, iv.high, p
        if method.startswith("paired"):
            alpha, beta, shift = PAIRED[data]
            d = rng.beta(alpha, beta, n)
            a = (rng.random(n) < d).astype(float)
            b = (rng.random(n) < np.minimum(d + shift, 1)).astype(float)
            diff = paired_difference(a, b, formula=formula)
            return diff.low, diff.high, PAIRED_TRUTH[data]
        pa, pb = UNPAIRED[data]
        a, b = (rng.random(n) < pa).astype(float), (rng.random(n) < pb).astype(float)
        diff = unpaired_difference(a, b, formula=formula)
        return diff.low, diff.high, pb - pa
    if cell.family == "clusters":
        scores, ids, truth = _cluster_sample(rng, data, n)
        correction = {"CR0": False, "CR1": "CR1"}.get(method.split()[2], None)
        formula = "clt" if correction is not None else "auto"
        iv = eval_mean(scores, ids, finite_cluster_correction=correction, formula=formula)
        return iv.low, iv.high, truth
    # bootstrap: "bootstrap <metric> <method>" or "poi <method>"
    parts = method.split()
    seed = int(rng.integers(2**31))
    if parts[0] == "poi":
        x = _task_scores(rng, "normal", n, POI_SHIFT)
        y = _task_scores(rng, "normal", n)
        iv = probability_of_improvement(x, y, reps=cell.reps, seed=seed, method=parts[1])
        return iv.low, iv.high, truth_table["poi"]
    x = _task_scores(rng, data, n)
    iv = interval_estimates({"x": x}, metric=parts[1], reps=cell.reps, seed=seed,
                            method=parts[2])["x"]
    return iv.low, iv.high, truth_table[(parts[1], data)]


def run_cell(cell: Cell) -> Tally:
    rng = np.random.default_rng(cell.seed)
    truth_table = {**truths(), "poi": float(np.mean(
        stats.norm.cdf(POI_SHIFT / (NORMAL_SD * np.sqrt(2)))))}
    tally = Tally()
    for _ in range(cell.sims):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StatsWarning)
            low, high, truth = _one(cell, rng, truth_table)
        warned = any(getattr(w.message, "kind", "") in QUALIFYING for w in caught)
        hit = bool(low <= truth <= high)
        tally.covered += hit
        tally.warned += warned
        tally.covered_silent += hit and not warned
        tally.outside += bool(low < 0 or high > 1)
        tally.widths.append(high - low)
    return tally


# --- the plan --------------------------------------------------------------


def plan(args: argparse.Namespace) -> list[Cell]:
    fast, slow = args.sims_fast, args.sims
    cells: list[tuple[str, str, str, int, int, int]] = []
    if "seeds" in args.only:
        for method in ("mean_interval", "trimmed_mean_interval", "welch", "yuen"):
            for data in ("normal", "bernoulli", "skewed", "collapsed"):
                cells += [("seeds", method, data, n, fast, 0) for n in args.runs]
    if "bounded" in args.only:
        for method in ("mean_interval", "mean_interval bounds=(0,1)"):
            cells += [("bounded", method, "Beta(40,2)", n, fast, 0) for n in args.runs]
    if "items" in args.only:
        for method in ("eval_mean 0/1 CLT (old)", "eval_mean 0/1 Wilson"):
            for data in ("p=0.9", "p=0.95"):
                cells += [("items", method, data, n, fast, 0)
                          for n in (20, 30, 50, 100, 200, 400)]
        for method in ("paired_difference 0/1 CLT (old)", "paired_difference 0/1 Agresti-Min"):
            for data in PAIRED:
                cells += [("items", method, data, n, fast, 0) for n in (20, 30, 50, 100, 400)]
        for method in ("unpaired_difference 0/1 CLT (old)",
                       "unpaired_difference 0/1 Agresti-Caffo"):
            for data in UNPAIRED:
                cells += [("items", method, data, n, fast, 0) for n in (20, 50, 100, 400)]
    if "clusters" in args.only:
        for method in ("eval_mean clustered CR0 z (old)", "eval_mean clustered CR1 t(G-1)",
                       "eval_mean clustered default (CR2)"):
            for data in ("balanced", "unbalanced", "binary"):
                cells += [("clusters", method, data, g, args.sims_clusters, 0)
                          for g in args.clusters]
    if "bootstrap" in args.only:
        for metric in ("mean", "iqm"):
            for method in ("percentile", "bca", "expanded"):
                for data in ("normal", "bernoulli"):
                    cells += [("bootstrap", f"bootstrap {metric} {method}", data, n, slow,
                               args.reps) for n in args.runs]
        for method in ("percentile", "expanded"):
            cells += [("bootstrap", f"poi {method}", "normal", n, slow, args.reps)
                      for n in args.runs]
    # Methods of one family share the data of a (data, n) cell: same seed, same draws, so
    # old and new defaults are compared on identical experiments.
    return [Cell(*c[:6], seed=zlib.crc32(f"{c[0]}|{c[2]}|{c[3]}".encode())) for c in cells]


def _unit(family: str) -> str:
    return {"items": "items", "clusters": "clusters"}.get(family, "runs")


def report(cells: list[Cell], tallies: list[Tally]) -> None:
    for family in FAMILIES:
        rows = [(c, t) for c, t in zip(cells, tallies, strict=True) if c.family == family]
        if not rows:
            continue
        datas = list(dict.fromkeys(c.data for c, _ in rows))
        print(f"\n{family}:")
        print("| method | n | " + " | ".join(datas) + " |")
        print("| --- | --- |" + " --- |" * len(datas))
        table: dict[tuple[str, int], dict[str, str]] = {}
        for c, t in rows:
            p = t.covered / c.sims
            se = np.sqrt(p * (1 - p) / c.sims)
            flag = "" if 93.0 <= round(100 * p, 1) <= 97.0 else " *"
            text = f"{100 * p:.1f} +- {100 * se:.1f}{flag} ({np.median(t.widths):.3g})"
            if family in ("seeds", "bounded") and t.warned:
                silent = t.covered_silent / max(1, c.sims - t.warned)
                text += f" w{100 * t.warned / c.sims:.1f}% s{100 * silent:.1f}"
            if family == "bounded":
                text += f" out{100 * t.outside / c.sims:.0f}%"
            table.setdefault((c.method, c.n), {})[c.data] = text
        for (method, n), by_data in table.items():
            cells_text = " | ".join(by_data.get(d, "") for d in datas)
            print(f"| {method} | {n} {_unit(family)} | {cells_text} |")


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--only", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--tenth", action="store_true", help="1/10 of the simulations")
    parser.add_argument("--sims", type=int, default=3000, help="simulations per bootstrap cell")
    parser.add_argument("--sims-fast", type=int, default=10_000,
                        help="simulations per seeds / bounded / items cell (cheap)")
    parser.add_argument("--sims-clusters", type=int, default=4000,
                        help="simulations per clusters cell")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    parser.add_argument("--runs", type=int, nargs="+", default=[3, 5, 10])
    parser.add_argument("--clusters", type=int, nargs="+", default=[5, 10, 20, 50, 200])
    args = bench.shrink(parser.parse_args(), sims=20, sims_fast=50, sims_clusters=20, reps=100,
                        runs=[3], clusters=[5])
    if args.tenth:
        args.sims, args.sims_fast, args.sims_clusters = (
            max(100, s // 10) for s in (args.sims, args.sims_fast, args.sims_clusters))

    cells = plan(args)
    start = time.perf_counter()
    tallies = [run_cell(c) for c in cells]
    seconds = time.perf_counter() - start
    print(f"nominal 95% intervals; {args.sims_fast} sims per seeds/bounded/items cell, "
          f"{args.sims_clusters} per clusters cell, {args.sims} per bootstrap cell "
          f"({TASKS} tasks, {args.reps} reps); {seconds:.0f} s in one process")
    print("coverage % +- Monte-Carlo error (median interval width); * = outside 93-97%; "
          "seeds: w = share of experiments with an outlier-seed warning, s = coverage "
          "when silent; bounded: out = share of intervals reaching outside [0, 1]")
    report(cells, tallies)
    bench.save(args, {"seconds": seconds, "coverage": [
        {"family": c.family, "method": c.method, "data": c.data, "n": c.n,
         "coverage": t.covered / c.sims, "sims": c.sims}
        for c, t in zip(cells, tallies, strict=True)]})


if __name__ == "__main__":
    main()
