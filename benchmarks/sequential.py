"""Sequential seeds (`labcoat run --until-decisive`) against a fixed number of seeds.

Simulated two-arm experiments: per-seed values of a control and a variant, independent
arms, a true difference of 0, 1/2, 1, 3/2, 2 or 3 times the smallest effect worth
having (delta). The sequential design adds one seed per arm per round (`--round-size`),
looks after every round with `labcoat.stats` SequentialTest's rule (anytime-valid
confidence sequence for the paired differences; stop at "supported", "refuted",
"no effect" or the budget) and is compared with the fixed design a planner would run:

- budget: the smallest number of seeds per arm at which the sequential design reaches
  `--power` (80%) at delta, so both designs are planned for the same power;
- fixed at alpha: the two-sample t test with `seeds_needed(delta, alpha, power=the
  sequential design's power at delta, sd)` seeds per arm: same nominal type-I error, same
  power at delta;
- fixed at matched alpha: the same with alpha = the sequential design's realised type-I
  error (it is conservative), i.e. the same realised error rates.

Compute is seeds per arm (both arms run the same number); saved = 1 - sequential mean /
fixed n. Then a validity table: the probability of ever excluding 0 over 50 looks under
no effect, for the t-mixture, Johari et al.'s plug-in mSPRT, the naive t test repeated
after every seed and the betting CS, on normal, heavy-tailed, collapsing and discrete
data; and the probability of ever missing the true difference when only the variant's
seeds sometimes collapse.

    .venv/bin/python benchmarks/sequential.py            # about 1 minute on 2 cores
    .venv/bin/python benchmarks/sequential.py --reps 1000 --round-size 4
    .venv/bin/python benchmarks/sequential.py --quick    # a smoke run, seconds
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import _harness as bench
import numpy as np
from scipy import stats as sps

from labcoat.stats import seeds_needed
from labcoat.stats._sequential import (
    _BUDGET,
    _CONTINUE,
    _NO_EFFECT,
    _REFUTED,
    _SUPPORTED,
    _decide,
    _intersect,
    _paths,
    _t_min_seeds,
)

MULTIPLES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
BETTING_GRID = 401  # coarser than the API's 2001 for speed: the CS only gets wider
Draw = Callable[[np.random.Generator, float, tuple[int, int]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Scenario:
    name: str
    sd: float  # per-seed SD of one arm (for seeds_needed)
    delta: float  # smallest effect worth having
    draw: Draw  # (rng, effect, (reps, n)) -> control, variant
    bounds: tuple[float, float] | None = None


def normal(sd: float) -> Draw:
    def draw(rng: np.random.Generator, effect: float, shape: tuple[int, int]):
        return rng.normal(0.0, sd, shape), rng.normal(effect, sd, shape)
    return draw


def accuracy(items: int, p: float) -> Draw:
    """Each seed's accuracy on `items` Bernoulli items: Binomial(items, p) / items."""
    def draw(rng: np.random.Generator, effect: float, shape: tuple[int, int]):
        return (rng.binomial(items, p, shape) / items,
                rng.binomial(items, p + effect, shape) / items)
    return draw


# --- the two designs -------------------------------------------------------------------


def first_decisions(control: np.ndarray, variant: np.ndarray, method: str, alpha: float,
                    looks: np.ndarray, delta: float,
                    bounds: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """(reps, n) arms -> (reps,) index of the first decisive look (len(looks) if none)
    and its decision code, with no budget."""
    width = None if bounds is None else bounds[1] - bounds[0]
    _, low, high, _ = _paths(variant - control, alpha, method, 1.0, width, BETTING_GRID)
    low, high, _ = _intersect(low, high)
    codes = _decide(low[:, looks - 1], high[:, looks - 1], +1, delta)
    decisive = codes != _CONTINUE
    at = np.where(decisive.any(axis=1), np.argmax(decisive, axis=1), looks.size)
    code = codes[np.arange(codes.shape[0]), np.minimum(at, looks.size - 1)]
    return at, np.where(at < looks.size, code, _BUDGET)


def with_budget(at: np.ndarray, code: np.ndarray, looks: np.ndarray,
                last: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeds used and decision when the budget is looks[last]."""
    stopped = at <= last
    return looks[np.minimum(at, last)], np.where(stopped, code, _BUDGET)


def fixed_supports(control: np.ndarray, variant: np.ndarray, alpha: float) -> np.ndarray:
    """(reps, n) arms -> (reps,) pooled two-sample t test rejects with variant > control."""
    n = control.shape[1]
    diff = variant.mean(axis=1) - control.mean(axis=1)
    pooled = (control.var(axis=1, ddof=1) + variant.var(axis=1, ddof=1)) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / np.sqrt(pooled * 2 / n)
    return (t > sps.t.isf(alpha / 2, 2 * n - 2)) & np.isfinite(t)


def compare(scenario: Scenario, method: str, args: argparse.Namespace,
            rng: np.random.Generator) -> str:
    alpha, delta = args.alpha, scenario.delta
    n80 = seeds_needed(delta, alpha=alpha, power=args.power, sd=scenario.sd)
    horizon = 4 * n80
    looks = np.arange(args.round_size, horizon + 1, args.round_size)
    reps = args.reps if method == "t-mixture" else args.betting_reps
    results = {}
    for multiple in MULTIPLES:
        control, variant = scenario.draw(rng, multiple * delta, (reps, horizon))
        results[multiple] = first_decisions(control, variant, method, alpha, looks, delta,
                                            scenario.bounds)
    at, code = results[1.0]
    power_by_look = np.array([np.mean((at <= i) & (code == _SUPPORTED))
                              for i in range(looks.size)])
    reached = np.flatnonzero(power_by_look >= args.power)
    last = int(reached[0]) if reached.size else looks.size - 1
    budget = int(looks[last])
    used, decision = {}, {}
    for multiple, (at, code) in results.items():
        used[multiple], decision[multiple] = with_budget(at, code, looks, last)
    type1 = float(np.isin(decision[0.0], (_SUPPORTED, _REFUTED)).mean())
    power = float((decision[1.0] == _SUPPORTED).mean())

    lines = [
        f"### {scenario.name}: {method}, a look every {args.round_size} seed(s) per arm",
        "",
        f"fixed design at {args.power:.0%} power: {n80} seeds/arm; sequential budget for "
        f"{args.power:.0%} power: {budget} seeds/arm "
        f"({'reached' if reached.size else f'NOT reached by {horizon}'}); {reps} sims per row",
    ]
    fixed = {}
    for label, level in (("alpha", alpha), ("matched alpha", max(type1, 0.5 / reps))):
        if power > level / 2:
            fixed[label] = (seeds_needed(delta, alpha=level, power=min(power, 1 - 0.5 / reps),
                                         sd=scenario.sd), level)
    sims = {}
    if "alpha" in fixed:
        n_fixed, level = fixed["alpha"]
        for multiple in MULTIPLES:
            control, variant = scenario.draw(rng, multiple * delta, (args.reps, n_fixed))
            sims[multiple] = float(fixed_supports(control, variant, level).mean())
            if multiple == 0:  # two-sided type-I: either direction
                sims[0.0] += float(fixed_supports(variant, control, level).mean())
    lines.append(
        f"sequential: type-I {type1:.3f}, power at delta {power:.3f}; "
        + "; ".join(f"fixed at {label} {lvl:.3g}: {n} seeds/arm" for label, (n, lvl)
                    in fixed.items())
        + ("" if fixed else "no fixed design matches a power this low")
    )
    lines += ["", "| effect | supported | refuted | no effect | budget spent | mean seeds "
              "| fixed: supported | saved vs fixed | saved vs fixed, matched alpha |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for multiple in MULTIPLES:
        dec, mean = decision[multiple], float(used[multiple].mean())
        rates = [float((dec == c).mean()) for c in (_SUPPORTED, _REFUTED, _NO_EFFECT, _BUDGET)]
        saved = [f"{100 * (1 - mean / fixed[k][0]):+.0f}%" if k in fixed else "-"
                 for k in ("alpha", "matched alpha")]
        fixed_rate = f"{sims[multiple]:.3f}" if sims else "-"
        lines.append(f"| {multiple:g} delta | " + " | ".join(f"{r:.3f}" for r in rates)
                     + f" | {mean:.1f} | {fixed_rate} | {saved[0]} | {saved[1]} |")
    return "\n".join(lines)


# --- validity under the null (and one shape change) ------------------------------------


def plugin_msprt_rejects(d: np.ndarray, alpha: float, first: int = 2,
                         g: float = 1.0) -> np.ndarray:
    """Johari et al. 2017/2022's normal-mixture mSPRT with sigma^2 replaced by the running
    sample variance (tau^2 = g s^2, the same mixture in standardized units as the
    t-mixture): log L_n = -log(1 + n g)/2 + n g t^2 / (2 (1 + n g)), looking from n = first."""
    n = np.arange(1, d.shape[1] + 1, dtype=float)
    mean = np.cumsum(d, axis=1) / n
    squares = np.maximum(np.cumsum(d * d, axis=1) - n * mean**2, 0)[:, first - 1:]
    n, mean = n[first - 1:], mean[:, first - 1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        t2 = np.where(mean != 0, mean**2 * n * (n - 1) / squares, 0.0)
    c = 1 + n * g
    log_l = -0.5 * np.log(c) + n * g * t2 / (2 * c)
    return (log_l >= math.log(1 / alpha)).any(axis=1)


def one_t_misses(d: np.ndarray, truth: float, alpha: float) -> np.ndarray:
    """One paired t interval on all of d (a fixed design's single look): misses truth?"""
    n = d.shape[1]
    mean, se = d.mean(axis=1), d.std(axis=1, ddof=1) / math.sqrt(n)
    half = sps.t.isf(alpha / 2, n - 1) * se
    return (mean - half > truth) | (mean + half < truth)


def naive_t_rejects(d: np.ndarray, alpha: float) -> np.ndarray:
    """Paired t test at alpha after every seed from 2 on: ever p < alpha?"""
    n = np.arange(1, d.shape[1] + 1, dtype=float)
    mean = np.cumsum(d, axis=1) / n
    squares = np.maximum(np.cumsum(d * d, axis=1) - n * mean**2, 0)[:, 1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean[:, 1:] / np.sqrt(squares / (n[1:] - 1) / n[1:])
        p = np.where(np.isnan(t), 1.0, 2 * sps.t.sf(np.abs(t), n[1:] - 1))
    return (p < alpha).any(axis=1)


def ever_misses(d: np.ndarray, truth: float, method: str, alpha: float,
                bounds: tuple[float, float] | None) -> np.ndarray:
    width = None if bounds is None else bounds[1] - bounds[0]
    _, low, high, _ = _paths(d, alpha, method, 1.0, width, BETTING_GRID)
    low, high, _ = _intersect(low, high)
    return ((low > truth) | (high < truth)).any(axis=1)


def collapsing(rng: np.random.Generator, shape: tuple[int, int], typical: float,
               rate: float) -> np.ndarray:
    """Accuracy-like metric: N(typical, 0.02) per seed, but a fraction `rate` of seeds
    diverge and score 0.25."""
    values = np.clip(rng.normal(typical, 0.02, shape), 0, 1)
    return np.where(rng.random(shape) < rate, 0.25, values)


def validity(args: argparse.Namespace, rng: np.random.Generator) -> str:
    looks, alpha = args.looks, args.alpha
    shape = (args.reps, looks)
    small = (args.betting_reps, looks)
    cases: list[tuple[str, Callable[[tuple[int, int]], np.ndarray], float,
                      tuple[float, float] | None]] = [
        ("normal", lambda s: rng.normal(0, 1, s) - rng.normal(0, 1, s), 0.0, None),
        ("heavy tails (t, 3 df)", lambda s: rng.standard_t(3, s) - rng.standard_t(3, s),
         0.0, None),
        ("accuracy, 500 items (p 0.7)",
         lambda s: (rng.binomial(500, 0.7, s) - rng.binomial(500, 0.7, s)) / 500, 0.0, (0, 1)),
        ("binary per seed (p 0.5)",
         lambda s: rng.binomial(1, 0.5, s) - rng.binomial(1, 0.5, s), 0.0, (0, 1)),
        ("10% of seeds collapse, both arms",
         lambda s: collapsing(rng, s, 0.7, 0.1) - collapsing(rng, s, 0.7, 0.1), 0.0, (0, 1)),
        # Only the variant collapses: typical seeds gain 0.02, the mean loses
        # 0.9 * 0.72 + 0.1 * 0.25 - 0.7 = -0.027; the row is P(CS ever misses -0.027).
        ("variant: +0.02 but 10% of seeds collapse (miss rate)",
         lambda s: collapsing(rng, s, 0.72, 0.1) - collapsing(rng, s, 0.7, 0.0),
         0.9 * 0.72 + 0.1 * 0.25 - 0.7, (0, 1)),
    ]
    lines = [f"### Validity: P(ever wrong) over {looks} looks (one per seed), alpha {alpha}",
             "", f"{args.reps} sims per cell ({args.betting_reps} for betting); Monte-Carlo "
             f"SE at 0.05: {math.sqrt(0.0475 / args.reps):.3f}", "",
             "| data | t-mixture | plug-in mSPRT | plug-in mSPRT from 10 seeds "
             f"| naive t, every seed | one t test at {args.fixed_look} seeds "
             "| betting (bounds 0, 1) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, draw, truth, bounds in cases:
        d = draw(shape).astype(float)
        t_mix = ever_misses(d, truth, "t-mixture", alpha, None).mean()
        if truth == 0:
            plugin = f"{plugin_msprt_rejects(d, alpha).mean():.3f}"
            late = f"{plugin_msprt_rejects(d, alpha, first=10).mean():.3f}"
            naive = f"{naive_t_rejects(d, alpha).mean():.3f}"
        else:
            plugin = late = naive = "-"
        once = one_t_misses(d[:, :args.fixed_look], truth, alpha).mean()
        bet = "-"
        if bounds is not None:
            misses = ever_misses(draw(small).astype(float), truth, "betting", alpha, bounds)
            bet = f"{misses.mean():.3f}"
        lines.append(f"| {name} | {t_mix:.3f} | {plugin} | {late} | {naive} | {once:.3f} "
                     f"| {bet} |")
    return "\n".join(lines)


def betting_horizon(args: argparse.Namespace, rng: np.random.Generator) -> str:
    """Seeds per arm the betting CS needs for 80% power on the accuracy scenario."""
    draw, delta, horizon, reps = accuracy(500, 0.7), 0.02, args.betting_horizon, 200
    looks = np.arange(1, horizon + 1)
    parts = []
    for multiple in (1.0, 3.0):
        control, variant = draw(rng, multiple * delta, (reps, horizon))
        at, code = first_decisions(control, variant, "betting", args.alpha, looks, delta,
                                   (0.0, 1.0))
        seeds = np.sort(np.where(code == _SUPPORTED, looks[np.minimum(at, horizon - 1)],
                                 np.inf))
        n80 = seeds[int(math.ceil(args.power * reps)) - 1]
        parts.append(f"{multiple:g} delta: {n80:.0f}" if np.isfinite(n80)
                     else f"{multiple:g} delta: > {horizon}")
    return ("betting CS on the accuracy scenario, seeds per arm for "
            f"{args.power:.0%} power ({reps} sims): " + ", ".join(parts))


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--reps", type=int, default=20000, help="simulations per row")
    parser.add_argument("--betting-reps", type=int, default=1000,
                        help="simulations per row for the (slower) betting CS")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--power", type=float, default=0.8,
                        help="power at the smallest effect both designs are planned for")
    parser.add_argument("--round-size", type=int, default=1, help="seeds per arm per round")
    parser.add_argument("--looks", type=int, default=50, help="looks in the validity table")
    parser.add_argument("--betting-horizon", type=int, default=1000,
                        help="longest experiment simulated for the betting CS's seed count")
    parser.add_argument("--fixed-look", type=int, default=18,
                        help="seeds of the single fixed-design t test in the validity table")
    parser.add_argument("--seed", type=int, default=0)
    args = bench.shrink(parser.parse_args(), reps=200, betting_reps=10, looks=10,
                        betting_horizon=100)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    sd_accuracy = math.sqrt(0.7 * 0.3 / 500)
    scenarios = [
        (Scenario("normal seeds, sd 1, delta 1 sd", 1.0, 1.0, normal(1.0)), "t-mixture"),
        (Scenario("normal seeds, sd 1, delta 0.5 sd", 1.0, 0.5, normal(1.0)), "t-mixture"),
        (Scenario("accuracy on 500 items (p 0.7, sd 0.0205), delta 0.02", sd_accuracy, 0.02,
                  accuracy(500, 0.7), (0.0, 1.0)), "t-mixture"),
        (Scenario("accuracy on 500 items (p 0.7, sd 0.0205), delta 0.02", sd_accuracy, 0.02,
                  accuracy(500, 0.7), (0.0, 1.0)), "betting"),
    ]
    print(f"alpha {args.alpha}, t-mixture mixture_sd 1 (no decision before "
          f"{_t_min_seeds(args.alpha, 1.0)} seeds/arm), seed {args.seed}\n")
    for scenario, method in scenarios:
        print(compare(scenario, method, args, rng), "\n", flush=True)
    print(betting_horizon(args, rng), "\n")
    print(validity(args, rng), "\n")
    print(f"{time.perf_counter() - start:.0f} s")
    bench.save(args, {"seconds": time.perf_counter() - start, "reps": args.reps})


if __name__ == "__main__":
    main()
