"""Coverage of scaling-fit bootstrap intervals over simulated data sets: "residual" vs "pairs".

An audit found the pairs (case) bootstrap of Chinchilla-form fits over-covering
(99-100% for B and beta at nominal 95%) on small designs. This script measures
it: data sets of 8 model sizes (70M-2B, log-spaced) x 5 token budgets (5-80
tokens per parameter), loss from a published fit (Hoffmann et al. 2022 or
Besiroglu et al. 2024) times exp(N(0, sd)) with sd = 1%, 2%, 3%; each data set
is fitted with `scaling.fit(form="chinchilla", interval_method=M)` for each
method M, and for every parameter we count how often the 95% interval contains
the generating value.

Per parameter and method it prints:
- coverage: share of data sets whose interval contains the truth, with the
  Monte-Carlo error sqrt(p (1 - p) / S);
- width ratio: mean interval width / (3.92 x SD of the estimates over the data
  sets), ~1 for an interval as wide as the estimate's sampling spread says (a
  normal 95% interval is 3.92 SDs wide). E, A, B are taken in log (the
  optimizer's coordinates, where their estimates are near normal; on the
  linear scale a few data sets with A in the thousands dominate the SD). The
  ratio's standard error (bootstrap over data sets) is in brackets.
And for a new run at 10x the largest size (N = 2e10, D = 20 N): the prediction
interval's coverage (noise=True; exact probability that a new log-normal point
lands inside, averaged over data sets) and the curve band's (noise=False)
coverage of the true curve.

Both methods fit the same data sets (seeded by cell), with the same point
estimate: the second fit polishes from the first's optimum (grid = that point),
so only the bootstrap differs. 100 data sets of a cell take 1.5-6 minutes on a
shared core (400 replicates), so run cells in pieces and merge them:

    nice -n 10 .venv/bin/python benchmarks/scaling_coverage.py --short   # 20 data sets, 1 min
    .venv/bin/python benchmarks/scaling_coverage.py --quick             # a smoke run, seconds
    # a cell in pieces of 100 data sets, then the table of all 200:
    nice -n 10 .venv/bin/python benchmarks/scaling_coverage.py --law hoffmann --noise 0.03 \
        --datasets 100 --save h3a.json
    nice -n 10 .venv/bin/python benchmarks/scaling_coverage.py --law hoffmann --noise 0.03 \
        --datasets 100 --first 100 --save h3b.json
    .venv/bin/python benchmarks/scaling_coverage.py --merge h3a.json h3b.json
    # every cell at once (2 x 3 cells x 200 data sets: ~40 minutes)
    nice -n 10 .venv/bin/python benchmarks/scaling_coverage.py
"""

from __future__ import annotations

import json
import time
import warnings

import _harness as bench
import numpy as np
from scipy.special import ndtr

from labcoat import scaling

HOFFMANN = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}
BESIROGLU = {"E": 1.8172, "A": 482.01, "alpha": 0.3478, "B": 2085.43, "beta": 0.3658}
LAWS = {"hoffmann": HOFFMANN, "besiroglu": BESIROGLU}
PARAMS = ("E", "A", "alpha", "B", "beta")
LOG_PARAMS = ("E", "A", "B")
METHODS = ("residual", "pairs")
TARGET_N = 2e10  # 10x the largest size
TARGET_D = 20 * TARGET_N


def design() -> tuple[np.ndarray, np.ndarray]:
    """(N, D): 8 sizes 70M-2B, each at 5, 10, 20, 40, 80 tokens per parameter (40 points)."""
    n = np.repeat(np.geomspace(7e7, 2e9, 8), 5)
    return n, n * np.tile([5.0, 10.0, 20.0, 40.0, 80.0], 8)


def law(N: np.ndarray | float, D: np.ndarray | float, p: dict[str, float]) -> np.ndarray:
    return p["E"] + p["A"] * np.asarray(N) ** -p["alpha"] + p["B"] * np.asarray(D) ** -p["beta"]


def simulate(law_name: str, sd: float, datasets: range, reps: int, methods: tuple[str, ...],
             seed: int) -> dict:
    """Fit data sets number `datasets` of the cell (law, sd) with each method -> raw results."""
    truth = LAWS[law_name]
    N, D = design()
    clean = law(N, D, truth)
    target_true = float(law(TARGET_N, TARGET_D, truth))
    est = {k: [] for k in PARAMS}
    out = {m: {"low": {k: [] for k in PARAMS}, "high": {k: [] for k in PARAMS},
               "pred": [], "curve": [], "seconds": 0.0, "converged": []} for m in methods}
    for s in datasets:
        # One stream per data set: the same for every method, every run and every split.
        rng = np.random.default_rng([seed, list(LAWS).index(law_name), round(sd * 1e4), s])
        loss = clean * np.exp(rng.normal(0.0, sd, N.size))
        first = None
        for m in methods:
            started = time.perf_counter()
            kw = {} if first is None else {
                "grid": {k: [float(v)] for k, v in zip(("e", "a", "alpha", "b", "beta"),
                                                        first.theta, strict=True)},
                "starts": 1}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f = scaling.fit(N=N, D=D, loss=loss, form="chinchilla", bootstrap=reps,
                                seed=s, interval_method=m, warn=False, **kw)
            if first is None:
                first = f
                for k in PARAMS:
                    est[k].append(f.params[k])
            elif not np.allclose(f.theta, first.theta, rtol=0, atol=1e-6):
                raise RuntimeError(f"data set {s}: the polished estimate moved "
                                   f"({f.theta} vs {first.theta})")
            rec = out[m]
            for k in PARAMS:
                rec["low"][k].append(f.intervals[k].low)
                rec["high"][k].append(f.intervals[k].high)
            _, lo, hi = f.predict_interval(TARGET_N, TARGET_D, noise=True)
            z = (np.log([lo, hi]) - np.log(target_true)) / sd
            rec["pred"].append(float(ndtr(z[1]) - ndtr(z[0])))
            _, lo, hi = f.predict_interval(TARGET_N, TARGET_D, noise=False)
            rec["curve"].append(bool(lo <= target_true <= hi))
            rec["converged"].append(f.diagnostics.bootstrap_converged)
            rec["seconds"] += time.perf_counter() - started
    return {"law": law_name, "sd": sd, "first": datasets.start, "datasets": len(datasets),
            "reps": reps, "seed": seed, "estimates": est, "methods": out}


def merge(parts: list[dict]) -> dict:
    """Join raw results of one cell run in pieces (--first/--datasets, saved with --save)."""
    head = parts[0]
    for p in parts[1:]:
        if (p["law"], p["sd"], p["reps"], p["seed"], list(p["methods"])) != (
                head["law"], head["sd"], head["reps"], head["seed"], list(head["methods"])):
            raise ValueError("--merge: the files are from different cells, replicate counts, "
                             "seeds or methods")
    parts = sorted(parts, key=lambda p: p["first"])
    firsts = [p["first"] for p in parts]
    for a, b in zip(parts, parts[1:], strict=False):
        if a["first"] + a["datasets"] != b["first"]:
            raise ValueError(f"--merge: data sets do not join up (pieces start at {firsts})")
    out = {**head, "datasets": sum(p["datasets"] for p in parts),
           "estimates": {k: sum((p["estimates"][k] for p in parts), []) for k in PARAMS}}
    out["methods"] = {}
    for m in head["methods"]:
        rs = [p["methods"][m] for p in parts]
        out["methods"][m] = {
            "low": {k: sum((r["low"][k] for r in rs), []) for k in PARAMS},
            "high": {k: sum((r["high"][k] for r in rs), []) for k in PARAMS},
            "pred": sum((r["pred"] for r in rs), []), "curve": sum((r["curve"] for r in rs), []),
            "converged": sum((r["converged"] for r in rs), []),
            "seconds": sum(r["seconds"] for r in rs)}
    return out


def summarize(res: dict, boot_seed: int = 0) -> list[dict]:
    """Rows: one per (method, parameter) with coverage, its MC error, width ratio and SE."""
    S = res["datasets"]
    truth = LAWS[res["law"]]
    rows = []
    rng = np.random.default_rng(boot_seed)
    resample = rng.integers(0, S, size=(1000, S))  # data sets, for the ratio's SE
    for m, r in res["methods"].items():
        for k in PARAMS:
            log = k in LOG_PARAMS
            tr = np.log(truth[k]) if log else truth[k]
            lo, hi, e = (np.asarray(x, dtype=float) for x in (
                r["low"][k], r["high"][k], res["estimates"][k]))
            if log:
                with np.errstate(divide="ignore"):
                    lo, hi, e = np.log(lo), np.log(hi), np.log(e)
            covered = (lo <= tr) & (tr <= hi)
            width = hi - lo
            p = float(covered.mean())
            ratio = float(np.mean(width) / (3.92 * e.std(ddof=1)))
            with np.errstate(invalid="ignore", divide="ignore"):
                boots = np.mean(width[resample], axis=1) / (3.92 * e[resample].std(axis=1, ddof=1))
            boots = boots[np.isfinite(boots)]
            rows.append({"method": m, "param": ("log " if log else "") + k, "coverage": p,
                         "mc": float(np.sqrt(p * (1 - p) / S)), "ratio": ratio,
                         "ratio_se": float(np.std(boots)) if boots.size else np.nan,
                         "median_ratio": float(np.median(width) / (3.92 * e.std(ddof=1)))})
        pred_each = np.asarray(r["pred"], dtype=float)
        pred = float(pred_each.mean())
        curve = float(np.mean(r["curve"]))
        rows.append({"method": m, "param": "new run at 10x (prediction interval)",
                     "coverage": pred, "mc": float(pred_each.std(ddof=1) / np.sqrt(S)),
                     "ratio": np.nan, "ratio_se": np.nan, "median_ratio": np.nan})
        rows.append({"method": m, "param": "curve at 10x (noise=False band)",
                     "coverage": curve, "mc": float(np.sqrt(curve * (1 - curve) / S)),
                     "ratio": np.nan, "ratio_se": np.nan, "median_ratio": np.nan})
    return rows


def report(res: dict) -> None:
    methods = list(res["methods"])
    print(f"\n{res['law']} ({LAWS[res['law']]}), noise sd {res['sd']:g} (log), "
          f"{res['datasets']} data sets, {res['reps']} bootstrap replicates")
    for m in methods:
        r = res["methods"][m]
        print(f"  {m}: {r['seconds']:.0f} s; bootstrap refits converged "
              f"{100 * np.mean(r['converged']):.1f}% (mean over data sets)")
    rows = summarize(res)
    by = {(row["method"], row["param"]): row for row in rows}
    params = list(dict.fromkeys(row["param"] for row in rows))
    head = " | ".join(f"{m} coverage | {m} width ratio" for m in methods)
    print(f"| law | noise | param | {head} |")
    print("| --- | --- | --- |" + " --- | --- |" * len(methods))
    for k in params:
        cells = []
        for m in methods:
            row = by[(m, k)]
            cells.append(f"{100 * row['coverage']:.1f} ± {100 * row['mc']:.1f}")
            cells.append("" if np.isnan(row["ratio"])
                         else f"{row['ratio']:.2f} ({row['ratio_se']:.2f}); "
                              f"median {row['median_ratio']:.2f}")
        print(f"| {res['law']} | {res['sd']:g} | {k} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--law", choices=list(LAWS), action="append",
                        help="generating fit (repeatable; default both)")
    parser.add_argument("--noise", type=float, action="append",
                        help="log-noise sd (repeatable; default 0.01, 0.02, 0.03)")
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--first", type=int, default=0,
                        help="number of the first data set (to run a cell in pieces)")
    parser.add_argument("--save", help="write the raw results (JSON) here, for --merge")
    parser.add_argument("--merge", nargs="+", metavar="FILE",
                        help="summarize saved pieces of one cell instead of simulating")
    parser.add_argument("--reps", type=int, default=400, help="bootstrap replicates per fit")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="comma-separated interval methods (default residual,pairs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--short", action="store_true", help="20 data sets, 200 replicates "
                        "(what this script's --quick was before the harness)")
    args = bench.shrink(parser.parse_args(), law=[next(iter(LAWS))], noise=[0.02], datasets=2,
                        reps=50)
    if args.merge:
        parts = []
        for path in args.merge:
            with open(path, encoding="utf-8") as handle:
                parts.append(json.load(handle))
        report(merge(parts))
        return
    datasets, reps = (20, 200) if args.short else (args.datasets, args.reps)
    methods = tuple(m for m in args.methods.split(",") if m)
    cells = [(name, sd) for name in args.law or list(LAWS)
             for sd in args.noise or [0.01, 0.02, 0.03]]
    if args.save and len(cells) > 1:
        parser.error("--save takes one cell: give one --law and one --noise")
    results = {}
    for name, sd in cells:
        res = simulate(name, sd, range(args.first, args.first + datasets), reps, methods,
                       args.seed)
        if args.save:
            with open(args.save, "w", encoding="utf-8") as handle:
                json.dump(res, handle)
        report(res)
        results[f"{name}/{sd:g}"] = res
    bench.save(args, results)


if __name__ == "__main__":
    main()
