"""Planning a fractional factorial: runs x seeds against one-at-a-time arms, the minimum
detectable effect, and what the design can and cannot attribute."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from labcoat.stats._factorial import (
    FEW_DF,
    FactorialDesign,
    _check_names,
    _roman,
    fractional_factorial,
)
from labcoat.stats._power import _nct_power, seeds_needed


@dataclass(frozen=True, eq=False)
class Suggestion:
    """A fractional factorial for k candidate interventions, against one-at-a-time arms.

    All standard errors and effects are in units of the per-run sd sigma (`*_in_sd`),
    and in the metric's units when sd was given.
    """

    candidates: list[str]
    design: FactorialDesign
    seeds: int
    """Seeds per run (each run of the design is trained `seeds` times)."""
    runs: int
    """Runs (factor-level combinations) of the design, 2^(k-p)."""
    trials: int
    """runs * seeds: trainings the factorial needs."""
    df: int
    """Residual degrees of freedom of the main-effects model: trials - k - 1."""
    se_in_sd: float
    """SE of every main effect / sigma: 2 / sqrt(trials), since every trial informs
    every main effect (Box, Hunter & Hunter 2005, ch. 5: V(effect) = 4 sigma^2 / N)."""
    one_at_a_time_arms: int
    """k + 1: a baseline arm and one arm per candidate alone."""
    one_at_a_time_seeds: int
    """Seeds per arm one-at-a-time needs for the same SE: sigma sqrt(2/n) =
    2 sigma / sqrt(trials) gives n = trials / 2."""
    one_at_a_time_trials: int
    """one_at_a_time_arms * one_at_a_time_seeds."""
    mde_in_sd: float
    """Minimum detectable main effect / sigma at alpha (two-sided) and power."""
    mde: float | None
    """mde_in_sd * sd when sd was given, else None."""
    mde_method: str
    alpha: float
    power: float
    sd: float | None
    smallest_effect: float | None
    """The effect to detect, in the metric's units when sd was given, else in sd units."""
    power_at_smallest_effect: float | None
    """Power of the factorial with `seeds` seeds per run to detect smallest_effect."""
    seeds_for_smallest_effect: int | None
    """Fewest seeds per run giving the factorial the requested power for smallest_effect."""
    one_at_a_time_seeds_for_smallest_effect: int | None
    """Seeds per arm a two-sample t test (each candidate vs the baseline) needs for it
    (`seeds_needed`)."""

    @property
    def summary(self) -> str:
        """The plan in words: runs, trials, the one-at-a-time comparison, the MDE and the
        aliasing statement of the design."""
        k, design = len(self.candidates), self.design
        kind = (f"full 2^{k} factorial" if design.resolution is None else
                f"2^({k}-{design.p}) fractional factorial, resolution "
                f"{_roman(design.resolution)}")
        lines = [
            f"{k} candidate intervention{'s' if k > 1 else ''}: {kind}, {self.runs} runs x "
            f"{self.seeds} seed{'s' if self.seeds > 1 else ''} = {self.trials} trials.",
            f"Each main effect has SE {self.se_in_sd:.3g} sd (2 sd / sqrt({self.trials})): every "
            "trial informs every effect. One-at-a-time (a baseline plus one arm per "
            f"candidate) needs {self.one_at_a_time_arms} arms x {self.one_at_a_time_seeds} "
            f"seeds = {self.one_at_a_time_trials} trials for the same SE.",
            f"Minimum detectable effect ({self.mde_method}): {self.mde_in_sd:.3g} sd"
            + (f" = {self.mde:.4g} for sd = {self.sd:.4g}." if self.mde is not None else "."),
        ]
        if self.smallest_effect is not None:
            unit = "" if self.sd is not None else " sd"
            lines.append(
                f"To detect {self.smallest_effect:.4g}{unit} with power {self.power:g}: power "
                f"now {self.power_at_smallest_effect:.2f}; the factorial needs "
                f"{self.seeds_for_smallest_effect} seed(s) per run "
                f"({self.runs * self.seeds_for_smallest_effect} trials), one-at-a-time "
                f"{self.one_at_a_time_seeds_for_smallest_effect} per arm "
                f"({self.one_at_a_time_arms * self.one_at_a_time_seeds_for_smallest_effect} "
                "trials)."
            )
        if self.df < FEW_DF:
            lines.append(
                f"Only {self.df} residual df for the main-effects model: intervals will be "
                "wide and the analysis will warn; add seeds."
            )
        lines.append(
            "A factorial main effect is averaged over the other candidates' levels; it "
            "equals the one-at-a-time effect (the candidate added alone to the baseline) only "
            "if the candidates do not interact."
        )
        lines.append(design.describe())
        return "\n".join(lines)


def suggest_fractional(
    candidates: Sequence[str],
    *,
    min_resolution: int = 4,
    seeds: int,
    sd: float | None = None,
    smallest_effect: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> Suggestion:
    """The smallest standard two-level design of at least min_resolution for k candidates.

    candidates: the k interventions, each a factor off (baseline, -1) / on (+1).
    min_resolution: 3 to attribute main effects if two-factor interactions are
        negligible; 4 (default) to attribute main effects if only three-factor
        interactions are; 5 to attribute two-factor interactions as well.
    seeds: seeds per run. sd: the per-run sd of the metric (e.g. from a pilot),
        optional. smallest_effect: an effect worth detecting, in the metric's units
        when sd is given, else in sd units (Cohen's d), optional.
    alpha: two-sided level; power: wanted chance of detecting an effect of MDE size.

    The MDE uses the exact noncentral t distribution (Cohen 1988, ch. 2): the t
    statistic of an effect delta has noncentrality delta / SE, SE = 2 sigma / sqrt(N),
    with the residual df N - k - 1 of the main-effects model, and the MDE is the
    delta reaching the requested power in a two-sided test. The one-at-a-time
    comparison matches standard errors (sigma sqrt(2/n) per comparison with the
    baseline); for smallest_effect it matches power through `seeds_needed`.
    """
    names = _check_names(candidates, "candidates")
    k = len(names)
    if isinstance(min_resolution, bool) or not isinstance(min_resolution, int | np.integer):
        raise ValueError(f"min_resolution={min_resolution!r} must be a whole number: 3, 4 or 5")
    if isinstance(seeds, bool) or not isinstance(seeds, int | np.integer) or seeds < 1:
        raise ValueError(f"seeds={seeds!r} must be a whole number of seeds per run, at least 1")
    alpha = _probability(alpha, "alpha")
    power = _probability(power, "power")
    if power <= alpha:
        raise ValueError(
            f"power={power!r} is not above alpha={alpha!r}, the false-positive rate of the "
            "test itself; ask for a power above alpha, e.g. 0.8"
        )
    if sd is not None:
        sd = float(sd)
        if not (math.isfinite(sd) and sd > 0):
            raise ValueError(f"sd={sd!r} must be a finite standard deviation > 0")
    design = fractional_factorial(names, resolution=int(min_resolution))
    seeds = int(seeds)
    trials = design.n_runs * seeds
    df = trials - k - 1
    if df < 1:
        enough = math.ceil((k + 2) / design.n_runs)
        raise ValueError(
            f"{design.n_runs} runs x {seeds} seed(s) leave no residual degrees of freedom for "
            f"the mean and {k} main effects, so no effect could get an interval; use seeds >= "
            f"{enough}"
        )
    se_in_sd = 2 / math.sqrt(trials)
    oat_seeds = trials // 2  # n_runs is a power of two >= 2, so trials is even
    mde_in_sd = _noncentrality_for_power(df, alpha, power) * se_in_sd
    method = (f"two-sided alpha = {alpha:g}, power {power:g}, exact noncentral t with {df} "
              "residual df of the main-effects model")
    power_now = seeds_for = oat_for = None
    effect = None
    if smallest_effect is not None:
        effect = float(smallest_effect)
        if not math.isfinite(effect) or effect == 0:
            raise ValueError(
                f"smallest_effect={smallest_effect!r} must be a finite, nonzero effect to detect"
            )
        d = abs(effect) / (sd if sd is not None else 1.0)
        power_now = _t_power(d / se_in_sd, df, alpha)
        seeds_for = _seeds_for(d, design.n_runs, k, alpha, power)
        oat_for = seeds_needed(d, alpha=alpha, power=power)
    return Suggestion(
        candidates=names, design=design, seeds=seeds, runs=design.n_runs, trials=trials,
        df=df, se_in_sd=se_in_sd, one_at_a_time_arms=k + 1, one_at_a_time_seeds=oat_seeds,
        one_at_a_time_trials=(k + 1) * oat_seeds, mde_in_sd=mde_in_sd,
        mde=None if sd is None else mde_in_sd * sd, mde_method=method, alpha=alpha,
        power=power, sd=sd, smallest_effect=effect, power_at_smallest_effect=power_now,
        seeds_for_smallest_effect=seeds_for, one_at_a_time_seeds_for_smallest_effect=oat_for,
    )


def _probability(value: float, name: str) -> float:
    value = float(value)
    if not 0 < value < 1:
        raise ValueError(f"{name}={value!r} must be a probability in (0, 1), e.g. 0.05 or 0.8")
    return value


def _t_power(noncentrality: float, df: int, alpha: float) -> float:
    """Power of a two-sided t test at level alpha: P(|T| > t_{1-alpha/2, df}) for T
    noncentral t(df, noncentrality) (Cohen 1988, ch. 2), finite far in the tails."""
    return _nct_power(df, noncentrality, alpha, "two-sided")


def _noncentrality_for_power(df: int, alpha: float, power: float) -> float:
    """The noncentrality at which the two-sided t test reaches `power` (power > alpha)."""
    high = 1.0
    while _t_power(high, df, alpha) < power:
        high *= 2
    return float(optimize.brentq(lambda x: _t_power(x, df, alpha) - power, 0.0, high,
                                 xtol=1e-12))


def _seeds_for(d: float, n_runs: int, k: int, alpha: float, power: float) -> int:
    """Fewest seeds per run for the factorial to detect a standardized effect d."""
    def enough(seeds: int) -> bool:
        n = n_runs * seeds
        return n - k - 1 >= 1 and _t_power(d * math.sqrt(n) / 2, n - k - 1, alpha) >= power

    # Power rises with seeds (noncentrality and df both grow): double, then bisect.
    low, high = 0, 1
    while not enough(high):
        low, high = high, high * 2
        if high > 10**9:
            raise ValueError(f"an effect of {d:.3g} sd needs more than 10^9 seeds per run; "
                             "plan for a larger effect")
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high
