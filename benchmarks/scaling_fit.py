"""Scaling-law fits: speed of the starting grid, and recovery of published Chinchilla fits.

1. Speed. Hoffmann et al. 2022 (approach 3) and Besiroglu et al. 2024 start
   L-BFGS from every point of a 4,500-point grid. Baseline: scipy's
   `minimize(method="L-BFGS-B")` with the analytic gradient, one call per start
   in a Python loop (as their notebooks do), timed on a random subset of starts
   and scaled to the full grid. labcoat: `scaling.fit(..., starts=None)` (every
   grid point through the batched L-BFGS) and the default (`starts=256`, the best
   grid points by objective). Both minimize the same objective; the best
   objectives are printed side by side. Then the bootstrap (4,000 replicates).
2. Recovery. Points on Chinchilla's grid of model sizes and token counts,
   generated from the published fits of Hoffmann et al. 2022 (E=1.69, A=406.4,
   B=410.7, alpha=0.34, beta=0.28) and of Besiroglu et al. 2024 (E=1.8172,
   A=482.01, B=2085.43, alpha=0.3478, beta=0.3658), noise-free and with 1% log
   noise over several seeds: estimates, 95% bootstrap intervals, and how often
   the intervals cover the generating values.

3. Real data (with --epoch-csv PATH): the 245 runs Besiroglu et al. extracted
   from Hoffmann et al.'s figure 4 (`svg_extracted_data.csv`, columns Model
   Size, Training FLOP, loss; D = FLOP / 6N), minus the 5 runs with the fewest
   tokens per parameter (their highest losses), as they do; fitted with 4,000
   bootstrap replicates and compared with their published estimates.

    .venv/bin/python benchmarks/scaling_fit.py              # ~3-5 min on 2 cores
    .venv/bin/python benchmarks/scaling_fit.py --short      # fewer baseline starts and seeds
    .venv/bin/python benchmarks/scaling_fit.py --quick      # a smoke run, seconds
    .venv/bin/python benchmarks/scaling_fit.py --epoch-csv svg_extracted_data.csv --only-real
"""

from __future__ import annotations

import csv
import time
import warnings

import _harness as bench
import numpy as np
from scipy.optimize import minimize

from labcoat import scaling
from labcoat.scaling import _forms as forms

HOFFMANN = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}
BESIROGLU = {"E": 1.8172, "A": 482.01, "alpha": 0.3478, "B": 2085.43, "beta": 0.3658}
PUBLISHED = {"Hoffmann et al. 2022": HOFFMANN, "Besiroglu et al. 2024": BESIROGLU}


def law(N: np.ndarray, D: np.ndarray, p: dict[str, float]) -> np.ndarray:
    return p["E"] + p["A"] * N ** -p["alpha"] + p["B"] * D ** -p["beta"]


def chinchilla_design(sizes: int = 16, per_size: int = 15, seed: int = 0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """~240 runs like Chinchilla's: sizes 70M-16B, each at `per_size` token counts
    between 2 and 200 tokens per parameter (log-uniform jitter, fixed seed)."""
    rng = np.random.default_rng(seed)
    n = np.repeat(np.geomspace(7e7, 1.6e10, sizes), per_size)
    ratio = np.exp(rng.uniform(np.log(2), np.log(200), n.size))
    return n, n * ratio


def time_grid(N: np.ndarray, D: np.ndarray, loss: np.ndarray, baseline_starts: int,
              seed: int, boot_reps: int = 4000, every_start: bool = True) -> None:
    """every_start=False (--quick) leaves out the fit from every grid start (~20 s)."""
    form = forms.CHINCHILLA
    points = forms.grid_points(form, forms.default_grid(form))
    log_n, log_d, log_loss = np.log(N), np.log(D), np.log(loss)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            f, g = forms.huber_objective(theta[None, :], log_n, log_d, log_loss, 1.0, 1e-3)
        return float(f[0]), g[0]

    rng = np.random.default_rng(seed)
    subset = rng.choice(points.shape[0], size=baseline_starts, replace=False)
    started = time.perf_counter()
    best_base = np.inf
    for i in subset:
        res = minimize(objective, points[i], jac=True, method="L-BFGS-B")
        if np.isfinite(res.fun):
            best_base = min(best_base, res.fun)
    per_start = (time.perf_counter() - started) / baseline_starts
    baseline = per_start * points.shape[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = time.perf_counter()
        every = scaling.fit(N=N, D=D, loss=loss, bootstrap=0, starts=None) if every_start \
            else None
        t_every = time.perf_counter() - started
        started = time.perf_counter()
        default = scaling.fit(N=N, D=D, loss=loss, bootstrap=0)
        t_default = time.perf_counter() - started
        started = time.perf_counter()
        boot = scaling.fit(N=N, D=D, loss=loss, bootstrap=boot_reps, seed=0)
        t_boot = boot.diagnostics.seconds_bootstrap
    # diagnostics.objective is sum Huber (not divided by delta); the baseline's is / delta.
    obj = {"every": every.diagnostics.objective / 1e-3 if every else float("nan"),
           "default": default.diagnostics.objective / 1e-3}
    print(f"grid of {points.shape[0]:,} starts, {N.size} points (chinchilla form)")
    print(f"  scipy L-BFGS-B per start (loop over {baseline_starts} random starts): "
          f"{1e3 * per_start:.1f} ms/start -> {baseline:.1f} s for the grid "
          f"(best objective on the subset {best_base:.6f})")
    if every is not None:
        print(f"  labcoat, every start (starts=None): {t_every:.2f} s = "
              f"{baseline / t_every:.0f}x faster; objective {obj['every']:.6f}, "
              f"{every.diagnostics.starts_at_best} starts reached it, converged: "
              f"{every.diagnostics.converged}")
    print(f"  labcoat, default (256 best grid points): {t_default:.2f} s = "
          f"{baseline / t_default:.0f}x faster; objective {obj['default']:.6f}")
    # Baseline for the bootstrap: scipy L-BFGS-B per replicate, warm-started at the estimate
    # (as Besiroglu et al. do), on a subset of the same kind of resampled data.
    reps = baseline_starts // 4
    weights = rng.multinomial(N.size, np.full(N.size, 1.0 / N.size), size=reps).astype(float)
    started = time.perf_counter()
    for w in weights:
        def weighted(theta: np.ndarray, w: np.ndarray = w) -> tuple[float, np.ndarray]:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                f, g = forms.huber_objective(theta[None, :], log_n, log_d, log_loss, w, 1e-3)
            return float(f[0]), g[0]
        minimize(weighted, boot.theta, jac=True, method="L-BFGS-B")
    per_rep = (time.perf_counter() - started) / reps
    print(f"  bootstrap, {boot_reps:,} replicates (batched, warm-started): {t_boot:.1f} s; "
          f"{100 * boot.diagnostics.bootstrap_converged:.1f}% converged")
    print(f"  scipy L-BFGS-B per replicate, warm-started ({reps} replicates): "
          f"{1e3 * per_rep:.1f} ms -> {boot_reps * per_rep:.1f} s for {boot_reps:,} = "
          f"{boot_reps * per_rep / t_boot:.1f}x the batched bootstrap")


def recovery(N: np.ndarray, D: np.ndarray, seeds: int, noise: float, bootstrap: int) -> None:
    for name, truth in PUBLISHED.items():
        clean = scaling.fit(N=N, D=D, loss=law(N, D, truth), bootstrap=0, warn=False)
        worst = max(abs(clean.params[k] / v - 1) for k, v in truth.items())
        print(f"\n{name}: {truth}")
        print(f"  noise-free ({N.size} points): largest relative parameter error "
              f"{worst:.1e}; converged {clean.diagnostics.converged}")
        hits = dict.fromkeys(truth, 0)
        estimates: dict[str, list[float]] = {k: [] for k in truth}
        widths: dict[str, list[float]] = {k: [] for k in truth}
        rng = np.random.default_rng(1)
        for s in range(seeds):
            loss = law(N, D, truth) * np.exp(rng.normal(0, noise, N.size))
            f = scaling.fit(N=N, D=D, loss=loss, bootstrap=bootstrap, seed=s, warn=False)
            for k, v in truth.items():
                iv = f.intervals[k]
                hits[k] += iv.low <= v <= iv.high
                estimates[k].append(f.params[k])
                widths[k].append(iv.high - iv.low)
        print(f"  {noise:.0%} log noise, {seeds} data sets, {bootstrap} bootstrap replicates:")
        # A calibrated 95% interval is ~3.92 SDs of the estimate wide (normal approximation);
        # "width / 3.92 SD" near 1 means the bootstrap matches the spread over data sets.
        print("  | param | true | mean estimate | SD of estimates | mean 95% CI width | "
              "width / 3.92 SD | CI covers true |")
        print("  | --- | --- | --- | --- | --- | --- | --- |")
        for k, v in truth.items():
            est = np.array(estimates[k])
            sd = est.std(ddof=1)
            print(f"  | {k} | {v:g} | {est.mean():.4g} | {sd:.3g} | "
                  f"{np.mean(widths[k]):.3g} | {np.mean(widths[k]) / (3.92 * sd):.2f} | "
                  f"{hits[k]}/{seeds} |")


def real_data(path: str) -> None:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    N = np.array([float(r["Model Size"]) for r in rows])
    C = np.array([float(r["Training FLOP"]) for r in rows])
    loss = np.array([float(r["loss"]) for r in rows])
    D = C / (6 * N)
    keep = np.argsort(D / N)[5:]  # drop the 5 runs with the fewest tokens per parameter
    started = time.perf_counter()
    f = scaling.fit(N=N[keep], D=D[keep], loss=loss[keep], bootstrap=4000, seed=0, warn=False)
    seconds = time.perf_counter() - started
    print(f"\nBesiroglu et al.'s data: {len(rows)} runs, {keep.size} fitted (5 with the fewest "
          f"tokens per parameter dropped); fit + 4,000 bootstrap replicates in {seconds:.1f} s; "
          f"converged {f.diagnostics.converged}, {f.diagnostics.starts_at_best} of "
          f"{f.diagnostics.starts_optimized} starts at the best objective")
    print("| param | published (Besiroglu et al. 2024) | labcoat | labcoat 95% CI | "
          "Hoffmann et al. 2022 |")
    print("| --- | --- | --- | --- | --- |")
    for k, v in BESIROGLU.items():
        iv = f.intervals[k]
        print(f"| {k} | {v:g} | {f.params[k]:.5g} | [{iv.low:.4g}, {iv.high:.4g}] | "
              f"{HOFFMANN[k]:g} |")
    published = scaling.fit(N=N[keep], D=D[keep], loss=loss[keep], bootstrap=0, warn=False,
                            grid={k: [v] for k, v in _theta(BESIROGLU).items()}, starts=1)
    print(f"objective (sum Huber, delta 1e-3): labcoat {f.diagnostics.objective:.6g}; "
          f"polished from the published estimate {published.diagnostics.objective:.6g}")
    for k in ("a", "b"):
        iv = f.intervals[k]
        print(f"  {k} = {iv.point:.4f} [{iv.low:.4f}, {iv.high:.4f}]")
    alloc = f.allocation(5.76e23)  # Chinchilla's own budget
    tpp = alloc["tokens_per_parameter"]
    print(f"  tokens per parameter at C = 5.76e23: {tpp.point:.1f} [{tpp.low:.1f}, {tpp.high:.1f}]")


def _theta(p: dict[str, float]) -> dict[str, float]:
    return {"e": float(np.log(p["E"])), "a": float(np.log(p["A"])), "alpha": p["alpha"],
            "b": float(np.log(p["B"])), "beta": p["beta"]}


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--short", action="store_true", help="fewer baseline starts and seeds "
                        "(what this script's --quick was before the harness)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epoch-csv", help="Besiroglu et al.'s svg_extracted_data.csv")
    parser.add_argument("--only-real", action="store_true", help="only the real-data fit")
    args = parser.parse_args()
    if args.epoch_csv:
        real_data(args.epoch_csv)
    if args.only_real:
        return
    N, D = chinchilla_design()
    rng = np.random.default_rng(args.seed)
    loss = law(N, D, BESIROGLU) * np.exp(rng.normal(0, 0.01, N.size))
    starts, seeds, bootstrap = (5, 2, 50) if args.quick else (50, 5, 300) if args.short else (
        200, 20, 1000)
    time_grid(N, D, loss, baseline_starts=starts, seed=args.seed,
              boot_reps=200 if args.quick else 4000, every_start=not args.quick)
    recovery(N, D, seeds=seeds, noise=0.01, bootstrap=bootstrap)
    bench.save(args, {"baseline_starts": starts, "seeds": seeds, "bootstrap": bootstrap})


if __name__ == "__main__":
    main()
