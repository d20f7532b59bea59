"""labcoat.stats against statsmodels where they overlap, on large inputs, in one run.

- Clustered standard error of a mean eval score: `stats.eval_mean(scores, clusters,
  finite_cluster_correction=...)` vs statsmodels `OLS(scores, ones).fit(cov_type=
  "cluster", cov_kwds={"groups": clusters, "use_correction": ...}, use_t=...)`, the
  regression on a constant whose coefficient is the mean. CR0 = use_correction=False
  (normal quantile), CR1 = use_correction=True with use_t=True (G/(G-1), t(G-1)).
  Continuous scores (so both use the symmetric interval; labcoat's default for 0/1
  scores is Wilson, which statsmodels does not have, and its default CR2 neither).
- Paired difference of two models on clustered items: `stats.paired_difference(a, b,
  clusters, finite_cluster_correction="CR1")` vs the same OLS on b - a.
- Multiple testing: `stats.holm`, `stats.benjamini_hochberg`, `stats.bonferroni` vs
  `statsmodels.stats.multitest.multipletests(p, method="holm" / "fdr_bh" /
  "bonferroni")`.

Every case asserts the values agree (SE, interval ends, adjusted p-values) to 1e-10
(absolute) and prints the largest difference. Timings: each call timed alone, arms
interleaved (order alternating) over --rounds rounds; ratio = statsmodels / labcoat
per round, min / median / max over rounds.

Run: nice -n 10 .venv/bin/python benchmarks/stats_vs_statsmodels.py [--rounds 7] [--quick]
"""

from __future__ import annotations

import os
import statistics
import warnings

import _harness as bench
import numpy as np
import statsmodels
import statsmodels.api as sm
from statsmodels.stats.multitest import multipletests

import labcoat
from labcoat import stats

TOL = 1e-10


def clustered_data(n: int, g: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n continuous scores in g clusters of unequal (lognormal) sizes with a cluster effect."""
    rng = np.random.default_rng(seed)
    weights = rng.lognormal(0.0, 1.0, g)
    clusters = rng.choice(g, size=n, p=weights / weights.sum())
    clusters[:g] = np.arange(g)  # every cluster present
    effect = rng.normal(0.0, 0.3, g)
    scores = np.clip(0.6 + effect[clusters] + rng.normal(0.0, 0.3, n), 0.0, 1.0)
    return scores, clusters


def ols_mean(y: np.ndarray, clusters: np.ndarray, correction: str):
    fit = sm.OLS(y, np.ones((y.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": clusters, "use_correction": correction == "CR1"},
        use_t=correction == "CR1")
    low, high = fit.conf_int(alpha=0.05)[0]
    return float(fit.params[0]), float(fit.bse[0]), float(low), float(high)


def mean_cases(n: int, g: int, seed: int):
    scores, clusters = clustered_data(n, g, seed)
    for correction in ("CR0", "CR1"):
        def ours(correction=correction):
            r = stats.eval_mean(scores, clusters, finite_cluster_correction=correction,
                                formula="clt")
            return r.point, r.se, r.low, r.high

        yield (f"eval_mean {correction}, n={n:.0e}, G={g}", ours,
               lambda correction=correction: ols_mean(scores, clusters, correction))


def paired_cases(n: int, g: int, seed: int):
    a, clusters = clustered_data(n, g, seed)
    b = np.clip(a + np.random.default_rng(seed + 1).normal(0.02, 0.1, n), 0.0, 1.0)

    def ours():
        r = stats.paired_difference(a, b, clusters=clusters, finite_cluster_correction="CR1",
                                    formula="clt")
        return r.estimate, r.se, r.low, r.high

    yield (f"paired_difference CR1, n={n:.0e}, G={g}", ours,
           lambda: ols_mean(b - a, clusters, "CR1"))


def multiple_cases(m: int, seed: int):
    rng = np.random.default_rng(seed)
    # a mix of nulls (uniform) and effects (small p-values), with ties
    p = np.concatenate([rng.uniform(size=m - m // 10), rng.beta(0.1, 10.0, m // 10)])
    p[: m // 100] = 0.5
    rng.shuffle(p)
    for ours, method in ((stats.holm, "holm"), (stats.benjamini_hochberg, "fdr_bh"),
                         (stats.bonferroni, "bonferroni")):
        yield (f"{ours.__name__}, m={m:.0e}", lambda ours=ours: ours(p),
               lambda method=method: multipletests(p, alpha=0.05, method=method)[1])


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = bench.shrink(parser.parse_args(), rounds=1)
    warnings.simplefilter("ignore")  # statsmodels' and ours' notes are not the point here
    k = 100 if args.quick else 1  # --quick: inputs 100x smaller
    cases = [*mean_cases(100_000 // k, 1_000 // k, 1), *mean_cases(1_000_000 // k, 10_000 // k, 2),
             *paired_cases(1_000_000 // k, 10_000 // k, 3), *multiple_cases(100_000 // k, 4),
             *multiple_cases(1_000_000 // k, 5)]
    results = {}
    print(f"labcoat {labcoat.__version__}, statsmodels {statsmodels.__version__}, numpy "
          f"{np.__version__}; {args.rounds} interleaved rounds; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    print(f"{'case':42s} {'max |diff|':>10s}  {'labcoat s':>9s} {'statsm. s':>9s}  "
          "ratio statsmodels/labcoat min median max")
    for name, ours, theirs in cases:
        a, b = np.asarray(ours(), dtype=float), np.asarray(theirs(), dtype=float)
        diff = float(np.max(np.abs(a - b)))
        if not diff <= TOL:
            raise SystemExit(f"{name}: values differ by {diff:.3g} (> {TOL})")
        times = bench.interleaved({"ours": ours, "theirs": theirs}, args.rounds)
        t_ours, t_theirs = times["ours"].times, times["theirs"].times
        results[name] = {"max_diff": diff, "labcoat": times["ours"],
                         "statsmodels": times["theirs"]}
        ratios = [t / o for t, o in zip(t_theirs, t_ours, strict=True)]
        print(f"{name:42s} {diff:10.2e}  {statistics.median(t_ours):9.4f} "
              f"{statistics.median(t_theirs):9.4f}  {min(ratios):6.1f} "
              f"{statistics.median(ratios):6.1f} {max(ratios):6.1f}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    bench.save(args, results)


if __name__ == "__main__":
    main()
