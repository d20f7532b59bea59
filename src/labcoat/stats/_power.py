"""Planning: how many eval items, or how many seeds, an experiment needs.

Items (Miller 2024, sec. 5): two models answer the same n items, each item K
times; the paired difference of means is normal, so the sample size has a
closed form (eq. 9) and so has the minimum detectable effect (eq. 10).

Seeds: a handful of runs per arm compared with a two-sample t test, or, when
the arms share seeds and the analysis pairs them (`seed_analysis: paired`), a
paired t test on the per-seed differences; with so few runs the normal formula
undercounts, so power comes from the noncentral t distribution (Cohen 1988,
"Statistical Power Analysis for the Behavioral Sciences", ch. 2), searched over
n. A family of comparisons corrected by Holm or Bonferroni is planned at the
per-comparison alpha `family_alpha` gives.

Miller 2024 = E. Miller, "Adding Error Bars to Evals: A Statistical Approach to
Language Model Evaluations", arXiv:2411.00640.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import integrate
from scipy import stats as sps

from labcoat.stats._checks import StatsWarning
from labcoat.stats._items import _item_matrix
from labcoat.stats._multiple import CORRECTIONS, METHODS

Alternative = Literal["two-sided", "larger", "smaller"]
_ALTERNATIVES = ("two-sided", "larger", "smaller")
_MAX_SEEDS = 10**9

# --- items: Miller's normal power formula ---------------------------------------


def items_needed(
    delta: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    omega2: float,
    sigma2_a: float = 0.0,
    sigma2_b: float = 0.0,
    k_a: int = 1,
    k_b: int = 1,
) -> int:
    """Items n for a paired two-sided z test to detect a mean difference delta.

    Miller 2024, eq. 9:

        n = (z_{alpha/2} + z_beta)^2 (omega^2 + sigma_A^2/K_A + sigma_B^2/K_B) / delta^2

    delta: the true difference in mean score to detect (same units as the scores,
        e.g. 0.03 for 3 points of accuracy); its sign does not matter.
    alpha: two-sided significance level. power: 1 - beta, chance of detecting delta.
    omega2: omega^2, the variance across items of the difference of the two models'
        conditional mean scores x_A,i - x_B,i (the item score averaged over
        infinitely many answers). With one answer per item and no separate sigma^2,
        simply the variance of the per-item score difference.
    sigma2_a, sigma2_b: sigma_A^2, sigma_B^2, the mean within-item variance of each
        model's answers to one item (0 for greedy decoding).
    k_a, k_b: K_A, K_B, answers sampled per item from each model.

    Returns ceil(n), at least 2 (a paired SE needs two items). Miller's example:
    omega2=1/9, delta=0.03 gives 969. `pilot_variances` estimates omega2 and sigma2
    from a pilot; `items_needed_from_pilot` does both steps.
    """
    variance = _item_variance(omega2, sigma2_a, sigma2_b, k_a, k_b)
    delta = _nonzero_finite(delta, "delta")
    z = _z_sum(alpha, power)
    n = z**2 * variance / delta**2
    # Guard ceil against round-off just above an integer (e.g. 969.0000000001).
    return max(2, math.ceil(n - 1e-9 * max(1.0, n)))


def minimum_detectable_effect(
    n_items: int,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    omega2: float,
    sigma2_a: float = 0.0,
    sigma2_b: float = 0.0,
    k_a: int = 1,
    k_b: int = 1,
) -> float:
    """Smallest |difference| n_items paired items detect with the given power.

    Miller 2024, eq. 10 (eq. 9 solved for delta):

        MDE = (z_{alpha/2} + z_beta) sqrt((omega^2 + sigma_A^2/K_A + sigma_B^2/K_B) / n)

    Parameters as in `items_needed`. The inverse of it: items_needed(MDE(n)) == n.
    """
    if isinstance(n_items, bool) or int(n_items) != n_items or n_items < 2:
        raise ValueError(f"n_items={n_items!r} must be a whole number of items, at least 2")
    variance = _item_variance(omega2, sigma2_a, sigma2_b, k_a, k_b)
    return _z_sum(alpha, power) * math.sqrt(variance / int(n_items))


@dataclass(frozen=True)
class PilotVariances:
    """Variance components estimated from a paired pilot (Miller 2024, sec. 3.1, 5).

    Feed them to `items_needed` / `minimum_detectable_effect`.
    """

    omega2: float
    """omega^2: variance of the difference of conditional item means. When a model
    had one answer per item (K = 1) its sigma^2 cannot be separated and is inside
    omega2, so planning more answers for it is conservative."""
    sigma2_a: float
    """sigma_A^2: mean within-item variance of model a (0 when its pilot K_a = 1)."""
    sigma2_b: float
    """sigma_B^2: mean within-item variance of model b (0 when its pilot K_b = 1)."""
    k_a: int
    """Answers per item of model a in the pilot."""
    k_b: int
    """Answers per item of model b in the pilot."""
    n_items: int
    """Items in the pilot."""


def pilot_variances(a: ArrayLike, b: ArrayLike) -> PilotVariances:
    """Estimate omega^2, sigma_A^2, sigma_B^2 from pilot scores of two models on the same items.

    a: (n_items,) or (n_items, K_a); b: (n_items,) or (n_items, K_b), rows aligned
    on the same items. sigma^2 is the mean over items of the within-item sample
    variance (ddof=1), needing K >= 2; omega^2 is the variance of the per-item
    mean difference minus the within-item parts it contains,
    Var(mean_b,i - mean_a,i) - sigma_A^2/K_A - sigma_B^2/K_B (law of total variance,
    Miller 2024, sec. 3.1, with independent answers of the two models), clipped at
    0 with a StatsWarning.
    """
    x, y = _item_matrix(a, "a"), _item_matrix(b, "b")
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"pilot scores must be on the same items: got {x.shape[0]} items in a and "
            f"{y.shape[0]} in b; align them on shared item ids"
        )
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"a pilot needs at least 2 items to estimate a variance, got {n}")
    k_a, k_b = x.shape[1], y.shape[1]
    sigma2_a = float(x.var(axis=1, ddof=1).mean()) if k_a > 1 else 0.0
    sigma2_b = float(y.var(axis=1, ddof=1).mean()) if k_b > 1 else 0.0
    total = float((y.mean(axis=1) - x.mean(axis=1)).var(ddof=1))
    omega2 = total - sigma2_a / k_a - sigma2_b / k_b
    if omega2 < 0:
        warnings.warn(
            f"the pilot's omega^2 estimate is negative ({omega2:.3g}): the per-item "
            "differences vary no more than answer-to-answer noise explains; using omega2 = 0",
            StatsWarning,
            stacklevel=2,
        )
        omega2 = 0.0
    return PilotVariances(omega2, sigma2_a, sigma2_b, k_a, k_b, n)


def items_needed_from_pilot(
    a: ArrayLike,
    b: ArrayLike,
    delta: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    k_a: int | None = None,
    k_b: int | None = None,
) -> int:
    """`items_needed` with omega^2 and sigma^2 estimated from pilot paired scores.

    a, b: pilot scores as in `pilot_variances`, (n_items,) or (n_items, K).
    k_a, k_b: answers per item planned for the full eval; default: as in the pilot.
    Planning k > 1 from a pilot with one answer per item warns (StatsWarning): its
    within-item variance is inside omega^2, so the plan gets no credit for
    resampling (conservative). The pilot estimates are themselves noisy; a small
    pilot gives a rough n.
    """
    pilot = pilot_variances(a, b)
    plan_a = pilot.k_a if k_a is None else k_a
    plan_b = pilot.k_b if k_b is None else k_b
    for name, pilot_k, plan_k in (("a", pilot.k_a, plan_a), ("b", pilot.k_b, plan_b)):
        if pilot_k == 1 and plan_k != 1:
            warnings.warn(
                f"the pilot has one answer per item for model {name}, so its within-item "
                f"variance cannot be separated from omega^2; the plan for k_{name}={plan_k} "
                "assumes resampling does not help (conservative). Pilot with K >= 2 answers "
                "per item to credit it",
                StatsWarning,
                stacklevel=2,
            )
    scale = max(float(np.abs(a).max()), float(np.abs(b).max()))
    # Zero up to round-off (e.g. b = a + 0.1 in floating point): no n follows from it.
    if pilot.omega2 + pilot.sigma2_a + pilot.sigma2_b <= (1e-10 * scale) ** 2:
        raise ValueError(
            "the pilot differences have zero variance (the models differ by the same amount "
            "on every item), so no sample size follows from it; check the pilot scores"
        )
    return items_needed(delta, alpha=alpha, power=power, omega2=pilot.omega2,
                        sigma2_a=pilot.sigma2_a, sigma2_b=pilot.sigma2_b, k_a=plan_a, k_b=plan_b)


# --- seeds: two-sample and paired t tests, noncentral t ------------------------


def power_two_sample(
    n: float,
    effect: float,
    *,
    alpha: float = 0.05,
    sd: float | None = None,
    ratio: float = 1.0,
    alternative: Alternative = "two-sided",
) -> float:
    """Power of a pooled two-sample t test with n runs in arm 1 and ratio * n in arm 2.

    effect: the true mean difference (arm 2 - arm 1) in the metric's units when sd
    is given, else a standardized effect (Cohen's d = difference / sd).
    sd: the common per-run standard deviation of the metric.
    alternative: "two-sided", "larger" (arm 2 > arm 1) or "smaller".

    The t statistic follows a noncentral t with df = n1 + n2 - 2 and noncentrality
    d * sqrt(n1 n2 / (n1 + n2)) (Cohen 1988, ch. 2); same conventions as
    statsmodels' TTestIndPower().power(effect, n, alpha, ratio, alternative), and
    finite in [0, 1] where scipy's noncentral t (and so statsmodels) gives NaN far in
    the tail (see `_t_power`).
    """
    n1 = _runs(n)
    d = _standardized(effect, sd)
    alpha = _probability(alpha, "alpha")
    ratio = _positive_finite(ratio, "ratio")
    _check_alternative(alternative)
    return _t_power(n1, d, alpha, ratio, alternative)


def power_paired(
    n: float,
    effect: float,
    *,
    alpha: float = 0.05,
    sd: float | None = None,
    alternative: Alternative = "two-sided",
) -> float:
    """Power of a paired t test on n seeds run in both arms (`stats.paired_t`).

    effect: the true mean of the per-seed difference (variant - control) in the
    metric's units when sd is given, else standardized (effect / sd of differences).
    sd: the SD of the per-seed differences variant - control, NOT the per-run SD of
    the metric: sd_diff = sqrt(sd_a^2 + sd_b^2 - 2 rho sd_a sd_b), so seeds that move
    both arms alike (correlation rho > 0) make it small. With rho unknown,
    sd * sqrt(2) (rho = 0, the same noise as two independent arms) is conservative
    for rho >= 0.
    alternative: "two-sided", "larger" (variant > control) or "smaller".

    The t statistic of the differences is noncentral t with df = n - 1 and
    noncentrality d * sqrt(n); equals statsmodels'
    TTestPower().power(effect / sd, nobs=n, alpha=alpha, alternative=alternative)
    where that is finite.
    """
    pairs = _runs(n)
    d = _standardized(effect, sd)
    alpha = _probability(alpha, "alpha")
    _check_alternative(alternative)
    return _nct_power(pairs - 1, d * math.sqrt(pairs), alpha, alternative)


def power_factorial(
    seeds: int,
    effect: float,
    *,
    runs: int,
    terms: int,
    alpha: float = 0.05,
    sd: float | None = None,
) -> float:
    """Power of the two-sided t test of one effect of a two-level (fractional) factorial,
    as `stats.factorial_effects` estimates it: OLS over every seed of every run.

    seeds: seeds per run; runs: factor-level combinations (rows of the design);
    terms: effects in the model (main effects plus declared interactions).
    effect: the true effect (mean at +1 minus mean at -1) in the metric's units when
    sd (the per-run SD) is given, else standardized. With N = runs * seeds trials the
    effect's SE is 2 sd / sqrt(N), every trial informing every effect (Box, Hunter &
    Hunter 2005, ch. 5), so its t statistic is noncentral t with df = N - 1 - terms and
    noncentrality d sqrt(N) / 2 -- a two-sample test with N / 2 trials per side.
    """
    for name, value in (("seeds", seeds), ("runs", runs), ("terms", terms)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name}={value!r} must be a whole number >= 1")
    n = int(runs) * int(seeds)
    df = n - 1 - int(terms)
    if df < 1:
        raise ValueError(f"{seeds} seed(s) x {runs} runs fit {terms} effects with no residual "
                         "degrees of freedom: no test exists; run more seeds per run")
    d = _standardized(effect, sd)
    return _nct_power(df, d * math.sqrt(n) / 2, _probability(alpha, "alpha"), "two-sided")


def seeds_needed(
    effect: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    sd: float | None = None,
    ratio: float = 1.0,
    alternative: Alternative = "two-sided",
    paired: bool = False,
) -> int:
    """Smallest whole number of runs (seeds) per arm for a t test to reach power.

    paired=False: a two-sample t test (`power_two_sample`); arm 1 gets n runs and
    arm 2 ratio * n (round up when ratio != 1); sd is the per-run SD of the metric.
    Equals ceil(statsmodels TTestIndPower().solve_power(effect_size=d, alpha=alpha,
    power=power, ratio=ratio, alternative=alternative)) (2 if that is below 2).
    paired=True: a paired t test on n shared seeds (`power_paired`); sd is the SD of
    the per-seed differences variant - control; ratio must be 1. Equals
    ceil(TTestPower().solve_power(...)) (at least 2).
    effect, alternative as in `power_two_sample`: a raw difference when sd is given,
    else standardized. alpha is the per-comparison level: for a family of
    comparisons pass `family_alpha(alpha, m, correction)`. Searches integers n >= 2.
    """
    d = _standardized(effect, sd)
    alpha = _probability(alpha, "alpha")
    power = _probability(power, "power")
    ratio = _positive_finite(ratio, "ratio")
    _check_alternative(alternative)
    if paired and ratio != 1:
        raise ValueError(
            f"ratio={ratio!r} with paired=True: a paired design runs every seed in both arms; "
            "leave ratio=1, or plan a two-sample test (paired=False)"
        )
    if alternative == "larger" and d < 0 or alternative == "smaller" and d > 0:
        raise ValueError(
            f"effect={effect!r} points the other way from alternative={alternative!r}: "
            "such a test can never reach the power; flip the sign of effect or the alternative"
        )
    level = alpha / 2 if alternative == "two-sided" else alpha
    if power <= level:
        raise ValueError(
            f"power={power!r} is below the false-positive rate {level:g} of the test itself; "
            "ask for a power above alpha, e.g. 0.8"
        )

    def enough(n: int) -> bool:
        if paired:
            return _nct_power(n - 1.0, d * math.sqrt(n), alpha, alternative) >= power
        return _t_power(float(n), d, alpha, ratio, alternative) >= power

    # Power rises with n (both the noncentrality and df grow): double, then bisect.
    low, high = 1, 2
    while not enough(high):
        low, high = high, high * 2
        if high > _MAX_SEEDS:
            raise ValueError(
                f"effect={effect!r} needs more than {_MAX_SEEDS} runs per arm; "
                "plan for a larger effect"
            )
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


def family_alpha(alpha: float, comparisons: int, method: str) -> float:
    """The per-comparison alpha to plan each comparison of a corrected family at.

    alpha: the family's level (the hypothesis' alpha). comparisons: m, the number of
    comparisons the correction runs over (every variant against the control under
    every hypothesis). method: the design's `correction:`, one of "holm", "bh",
    "bonferroni", "none".

    - "bonferroni": alpha / m, the level each comparison is tested at.
    - "holm": alpha / m. Holm's first step is Bonferroni's test and it rejects at
      least what Bonferroni rejects (Holm 1979), so power planned at alpha / m is a
      guaranteed lower bound for each comparison, whatever the others do; Holm gives
      more when several effects are real.
    - "bh": alpha / m as well, which is conservative: Benjamini-Hochberg rejects a
      comparison with p <= alpha / m always, and up to p <= alpha when the others are
      rejected too, so the true power lies between the two plans.
    - "none", or m == 1: alpha, the comparison is tested at alpha.
    Planning at plain alpha for a family of 3 under Holm gives about 65% power where
    80% was asked.
    """
    alpha = _probability(alpha, "alpha")
    if isinstance(comparisons, bool) or int(comparisons) != comparisons or comparisons < 1:
        raise ValueError(f"comparisons={comparisons!r} must be a whole number, at least 1")
    if method not in CORRECTIONS:
        raise ValueError(f"method={method!r} is not one of {', '.join(map(repr, METHODS))}")
    return alpha / int(comparisons) if CORRECTIONS[method].divides_alpha else alpha


def seeds_needed_from_pilot(
    control_values: ArrayLike,
    variant_values: ArrayLike,
    effect: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    ratio: float = 1.0,
    alternative: Alternative = "two-sided",
    paired: bool = False,
) -> int:
    """`seeds_needed` for a raw effect, with sd from pilot runs.

    control_values: (n_c,), variant_values: (n_v,): one metric value per pilot run,
    at least 2 each. paired=False: sd is the pooled sd
    sqrt(((n_c-1) s_c^2 + (n_v-1) s_v^2) / (n_c+n_v-2)), the sd the pooled t test
    assumes. paired=True: the runs are aligned by seed (n_c == n_v, value i of both
    from seed i) and sd is the SD of the differences variant - control, for a paired
    t test. effect: the difference (variant - control) to detect, in the metric's
    units; the pilot's observed difference is not used. An sd from a few pilot runs
    is itself uncertain (with 3 runs per arm its 95% interval spans roughly 0.6x to
    2.9x), so treat the answer as a rough guide.
    """
    groups = []
    for name, values in (("control_values", control_values), ("variant_values", variant_values)):
        array = np.asarray(values, dtype=float)
        if array.ndim != 1:
            raise ValueError(f"{name} must have shape (n_runs,), got shape {array.shape}")
        if array.size < 2:
            raise ValueError(f"{name} has {array.size} run(s); a pilot needs at least 2 per arm")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or inf; drop or fix failed runs first")
        groups.append(array)
    control, variant = groups
    if paired:
        if control.size != variant.size:
            raise ValueError(
                f"paired=True needs one value per seed in both arms, aligned: got "
                f"{control.size} and {variant.size} runs; keep the seeds both arms ran"
            )
        sd = float((variant - control).std(ddof=1))
        if sd == 0:
            raise ValueError(
                "the pilot's per-seed differences have zero spread (sd 0) so any effect would "
                "look certain; check that the arms really differ and ran different seeds"
            )
    else:
        df = control.size + variant.size - 2
        sd = math.sqrt(((control.size - 1) * control.var(ddof=1)
                        + (variant.size - 1) * variant.var(ddof=1)) / df)
        if sd == 0:
            raise ValueError(
                "the pilot runs have zero spread (pooled sd 0) so any effect would look "
                "certain; check that the runs used different seeds"
            )
    return seeds_needed(effect, alpha=alpha, power=power, sd=sd, ratio=ratio,
                        alternative=alternative, paired=paired)


# --- helpers -------------------------------------------------------------------


def _t_power(n1: float, d: float, alpha: float, ratio: float, alternative: str) -> float:
    n2 = ratio * n1
    return _nct_power(n1 + n2 - 2, d * math.sqrt(n1 * n2 / (n1 + n2)), alpha, alternative)


def _nct_power(df: float, noncentrality: float, alpha: float, alternative: str) -> float:
    """P(reject) for a t statistic ~ noncentral t(df, noncentrality): finite, in [0, 1]."""
    level = alpha / 2 if alternative == "two-sided" else alpha
    critical = float(sps.t.isf(level, df))
    result = 0.0
    if alternative in ("two-sided", "larger"):
        result += _nct_sf(critical, df, noncentrality)
    if alternative in ("two-sided", "smaller"):
        # P(T < -c | delta) = P(T > c | -delta): T is antisymmetric in delta.
        result += _nct_sf(critical, df, -noncentrality)
    return min(1.0, result)


def _nct_sf(critical: float, df: float, noncentrality: float) -> float:
    """P(T > critical) for T ~ noncentral t(df, noncentrality), critical >= 0.

    scipy's nct.sf is accurate where the tail is large, but far out (the wrong-way
    tail of a large noncentrality, e.g. df 18, delta 13.4) it returns NaN or values
    off by orders of magnitude (scipy issues #7104, #25106). Those values are
    bounded: T > c >= 0 needs Z + delta > 0, so 0 <= P(T > c) <= Phi(delta). Clipping
    to that bound makes any error at most Phi(delta), below 1e-16 once delta < -8.3,
    which is where the garbage lives; a non-finite result falls back to quadrature.
    """
    bound = float(sps.norm.cdf(noncentrality))
    if bound < 1e-300:
        return 0.0
    value = float(sps.nct.sf(critical, df, noncentrality))
    if not math.isfinite(value):
        value = _nct_sf_by_quadrature(critical, df, noncentrality)
    return min(max(value, 0.0), bound)


def _nct_sf_by_quadrature(critical: float, df: float, noncentrality: float) -> float:
    """P(T > c) from the definition T = (Z + delta) / S, S = sqrt(chi^2_df / df):
    the integral of Phi(delta - c s) over the density of S (Johnson, Kotz &
    Balakrishnan 1995, "Continuous Univariate Distributions" vol. 2, ch. 31)."""
    scale = math.sqrt(df)
    chi = sps.chi(df)

    def integrand(s: float) -> float:
        return float(chi.pdf(s * scale) * scale * sps.norm.cdf(noncentrality - critical * s))

    low, high = chi.ppf(1e-17) / scale, chi.isf(1e-17) / scale
    # Break at the centre of S and where Phi(delta - c s) drops, so quad sees both.
    points = sorted({1.0, *((noncentrality / critical,) if critical > 0 else ())})
    points = [p for p in points if low < p < high]
    edges = [low, *points, high]
    return float(sum(integrate.quad(integrand, a, b, epsabs=1e-15, epsrel=1e-12,
                                    limit=200)[0] for a, b in itertools.pairwise(edges)))


def _runs(n: float) -> float:
    value = float(n)
    if not value >= 2 or math.isinf(value):
        raise ValueError(f"n={n!r} must be at least 2 runs (seeds) per arm")
    return value


def _item_variance(omega2: float, sigma2_a: float, sigma2_b: float, k_a: int, k_b: int) -> float:
    for name, value in (("omega2", omega2), ("sigma2_a", sigma2_a), ("sigma2_b", sigma2_b)):
        if not (math.isfinite(float(value)) and value >= 0):
            raise ValueError(f"{name}={value!r} must be a finite variance >= 0")
    for name, value in (("k_a", k_a), ("k_b", k_b)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name}={value!r} must be a whole number of answers per item, >= 1")
    variance = omega2 + sigma2_a / k_a + sigma2_b / k_b
    if variance == 0:
        raise ValueError(
            "omega2 + sigma2_a/k_a + sigma2_b/k_b is 0, so any n would detect any difference; "
            "give the variance of the per-item score difference (e.g. from pilot_variances)"
        )
    return variance


def _z_sum(alpha: float, power: float) -> float:
    """z_{alpha/2} + z_beta, the normal quantiles of Miller 2024, eq. 9."""
    alpha = _probability(alpha, "alpha")
    power = _probability(power, "power")
    total = float(sps.norm.isf(alpha / 2) + sps.norm.ppf(power))
    if total <= 0:
        raise ValueError(
            f"power={power!r} is below alpha/2={alpha / 2:g}, the false-positive rate of the "
            "test itself; ask for a power above alpha, e.g. 0.8"
        )
    return total


def _standardized(effect: float, sd: float | None) -> float:
    effect = _nonzero_finite(effect, "effect")
    if sd is None:
        return effect
    return effect / _positive_finite(sd, "sd")


def _probability(value: float, name: str) -> float:
    value = float(value)
    if not 0 < value < 1:
        raise ValueError(f"{name}={value!r} must be a probability in (0, 1), e.g. 0.05 or 0.8")
    return value


def _nonzero_finite(value: float, name: str) -> float:
    value = float(value)
    if not math.isfinite(value) or value == 0:
        raise ValueError(f"{name}={value!r} must be a finite, nonzero difference to detect")
    return value


def _positive_finite(value: float, name: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}={value!r} must be a finite number > 0")
    return value


def _check_alternative(alternative: str) -> None:
    if alternative not in _ALTERNATIVES:
        raise ValueError(
            f"alternative={alternative!r} is not one of {', '.join(map(repr, _ALTERNATIVES))}"
        )
