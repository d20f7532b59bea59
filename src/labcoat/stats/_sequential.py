"""Anytime-valid comparison of two arms whose seeds arrive in rounds (`--until-decisive`).

After every round the comparison gives a confidence sequence (CS) for the mean difference
variant - control and an always-valid p-value: a sequence of intervals that covers the
true difference at every round simultaneously with probability >= 1 - alpha (Robbins
1970; Howard, Ramdas, McAuliffe & Sekhon 2021). Looking after every round and stopping as
soon as the verdict is decisive therefore keeps every error rate <= alpha, at any stopping
time. A fixed-n t test checked after every round does not: with 50 looks its type-I error
is about 1/3 at alpha = 0.05 (tests/stats/test_sequential.py shows it).

The unit is a pair: seed i of the control and seed i of the variant (arms share seed
indices); d_i = variant_i - control_i. The pairs are independent and identically
distributed whatever the two arms' variances and whatever the correlation a shared seed
induces, so the two-arm problem with unknown, unequal variances becomes a one-sample
problem with no Behrens-Fisher approximation, at the price of n - 1 rather than 2n - 2
degrees of freedom. The order of the pairs must not depend on their values (seed order or
completion order is fine).

Methods
-------
"t-mixture" (default; normal seeds, unknown variance, exactly valid at every n). Assume
d_i ~ N(mu, sigma^2) iid with sigma unknown. For a candidate mu0 let
t = sqrt(n) (mean - mu0) / s, nu = n - 1, c = 1 + n g. The statistic

    E_n(mu0) = c^(-1/2) * [(1 + t^2/nu) / (1 + t^2/(nu c))]^(n/2)

is the Bayes factor of delta = (mu - mu0)/sigma ~ N(0, g) against delta = 0 with the
right-Haar prior d sigma / sigma on the scale (closed form: Goenen, Johnson, Lu & Westfall
2005, "The Bayesian two-sample t test"; Rouder et al. 2009, the JZS integrand at fixed g;
tests/stats/test_sequential.py checks it against numerical integration). With the
right-Haar prior it equals the likelihood ratio of the scale-invariant statistic
((d_1 - mu0)/|d_1 - mu0|, ..., (d_n - mu0)/|d_1 - mu0|), whose law under mu = mu0 is the
same for every sigma; so under mu = mu0 it is a nonnegative martingale with mean 1 in that
statistic's filtration (Lai 1976, "On confidence sequences", Ann. Statist. 4, which builds
t-based confidence sequences this way; Perez-Ortiz, Lardy, de Heide & Gruenwald 2024,
"E-statistics, group invariance and anytime-valid testing", Ann. Statist.; the "t-test
version" of the mixture SPRT in Pace & Salvan 2019, "Likelihood, replicability and
Robbins' confidence sequences"). Ville's inequality then gives
P(exists n: E_n(mu) >= 1/alpha) <= alpha exactly, for every sigma and every n: no
asymptotics, no plug-in. E_n rises with t^2, so the CS {mu0 : E_n(mu0) < 1/alpha} is the
interval mean +- r_n s / sqrt(n) with r_n in closed form (`_t_radius`); it is the whole
line until (1 + n g)^((n - 1)/2) >= 1/alpha (n = 5 seeds per arm at alpha = 0.05, g = 1):
with fewer seeds no data could be decisive. g = mixture_sd^2 tunes the test to
standardized effects |mu|/sigma (of the differences) near mixture_sd. In simulation
(4000 runs, 50 looks) mixture_sd between 0.7 and 2 kept the expected seeds to a decision
within about 15% of the default's for true standardized effects 0.5-2, so the default 1
rarely needs changing. Assumption: normal seeds. Measured over 50 looks at alpha = 0.05
(benchmarks/sequential.py): type-I error 0.026 for normal seeds, 0.017 with t(3) tails,
0.023 for a 0/1 outcome per seed; but when only the variant's seeds sometimes collapse
(10% of runs diverge) the CS misses the true mean difference in 46% of experiments and
calls the (on average worse) variant better in 17% (one fixed t test at 18 seeds: 15% and
12%): the first seeds show no collapse and the CS settles before one arrives. Where runs
can diverge, use "betting" or catch divergence upstream.

"betting" (bounded metrics, no distributional assumption). When the metric is known to lie
in bounds = (low, high) (accuracies in [0, 1]), d_i lies in [-w, w], w = high - low; after
rescaling to x_i = (d_i + w) / (2w) in [0, 1] the hedged capital process with predictable
plug-in bets of Waudby-Smith & Ramdas 2023 ("Estimating means of bounded random variables
by betting", JRSS-B; truncation c = 1/2, theta = 1/2, as in their confseq package) is a
nonnegative martingale under every distribution with mean m, and the CS is
{m : K_n(m) < 1/alpha}, computed on a grid and widened by one grid step so that an
off-grid truth stays covered. Valid for any distribution in the bounds, but it pays for
that: it must rule out a rare seed at the far end of the range, so with accuracies in
[0, 1] and a difference of 2 points (seed sd 2 points) it needs about 540 seeds per arm
for 80% power where a fixed t test needs 18 (benchmarks/sequential.py).

Not offered: the plug-in mSPRT of Johari, Koomen, Pekelis & Walsh (2017, 2022, "Always
valid inference"), the normal-mixture martingale with sigma^2 replaced by the running
sample variance. Its validity is asymptotic (A/B tests with thousands of users per look);
with a handful of seeds the estimated variance is often far too small: looking from 2
seeds on, its type-I error over 50 looks is 0.28 at alpha = 0.05; from 10 seeds on it
was 0.043 in the same simulation, but nothing guarantees that (benchmarks/sequential.py).
The t-mixture above is its exact small-sample counterpart: the same normal mixture, with
the unknown scale integrated out under the right-Haar prior instead of plugged in.

Each CS is intersected over n (valid because coverage holds at all n at once; Howard et al.
2021), so intervals only shrink and a decision, once reached, stays. When the
intersection is empty (the data contradict the assumptions, or the <= alpha miss happened)
the current interval is reported instead and a StatsWarning says so. Several variants
against one control: give each alpha / k (Bonferroni holds for confidence sequences too).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from labcoat.stats._checks import StatsWarning
from labcoat.stats._power import seeds_needed

Method = Literal["t-mixture", "betting"]
METHODS = ("t-mixture", "betting")
DECISIONS = ("continue", "supported", "refuted", "no effect", "budget spent", "no variation")
DIRECTIONS = ("increase", "decrease")

# Waudby-Smith & Ramdas 2023: bets truncated at c/m (c/(1-m)) with c = 1/2 keep
# every factor 1 +- lambda (x - m) >= 1/2; theta = 1/2 splits the capital between betting
# up and down (their hedged capital process).
_BET_TRUNCATION = 0.5
_BET_THETA = 0.5
_GRID = 2001  # candidate means for the betting CS: a step of 0.1% of the range of d

# Differences whose SD is below this fraction of their size are "all the same": the
# spread left is floating-point rounding (0.2 - 0.1 != 0.4 - 0.3), not seed noise.
_FLAT = 1e-9

# Decision codes of the vectorized core (index into DECISIONS).
_CONTINUE, _SUPPORTED, _REFUTED, _NO_EFFECT, _BUDGET, _NO_VARIATION = range(6)


# --- public results ----------------------------------------------------------------


@dataclass(frozen=True)
class ConfidenceSequence:
    """A confidence sequence over the first 1, 2, ..., n pairs; every array has shape (n,).

    estimate[i]: mean difference of the first i + 1 pairs.
    low[i], high[i]: the anytime-valid interval after i + 1 pairs, intersected with all
      earlier ones; +-inf while no data could be decisive yet.
    p_value[i]: always-valid p-value for "no difference" (non-increasing):
      P(ever <= alpha) <= alpha under no difference.
    """

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray
    alpha: float
    method: str


@dataclass(frozen=True)
class SequentialResult:
    """The comparison after one round. Differences are variant minus control.

    round: looks so far (1 after the first update). n: seeds per arm (pairs) so far.
    estimate: mean difference. low, high: the 1 - alpha anytime-valid confidence sequence
      at this round (+-inf before enough seeds). p_value: always-valid p-value for no
      difference.
    decision: one of DECISIONS, checked in this order:
      "supported" / "refuted": the CS excludes 0 on the predicted / the opposite side;
      "no effect": the CS lies inside (-smallest_effect, +smallest_effect);
      "budget spent": max_seeds reached with none of the above (inconclusive);
      "no variation" (t-mixture): every seed difference is the same value once a verdict
        would be possible: seed noise was not measured (a script that ignores its seed,
        or a discrete metric), so the t-mixture cannot judge and more seeds of the same
        kind will not help; stop, inconclusive. A zero spread is never decisive;
      "continue": add a round.
      A decision is wrong only if the CS misses the true difference, which happens at any
      round with probability <= alpha in total, however many rounds are looked at.
    reason: one sentence for a report.
    """

    round: int
    n: int
    estimate: float
    low: float
    high: float
    p_value: float
    decision: str
    reason: str
    alpha: float
    method: str

    @property
    def stop(self) -> bool:
        """True when the runner should stop adding seeds (any decision but "continue")."""
        return self.decision != "continue"


@dataclass(frozen=True)
class SequentialPlan:
    """Simulated cost of a sequential comparison with the t-mixture; arrays have shape (k,),
    one entry per simulated true difference in `effects`.

    effects: true mean differences variant - control simulated (metric units).
    mean_seeds, median_seeds, p90_seeds: seeds per arm used until the decision (or the
      budget). mean_rounds: looks used.
    decisions: decision -> probability of ending with it, each (k,); rows sum to 1.
    min_seeds: no decision is possible before this many seeds per arm.
    power: P("supported") at effect = smallest_effect (in the predicted direction).
    fixed_seeds: seeds per arm of the fixed two-sample t test with the same alpha and the
      same power at smallest_effect (`seeds_needed`); None when that power is below alpha/2.
    reps, seed: the Monte-Carlo repetitions and seed behind these numbers.
    """

    effects: np.ndarray
    mean_seeds: np.ndarray
    median_seeds: np.ndarray
    p90_seeds: np.ndarray
    mean_rounds: np.ndarray
    decisions: dict[str, np.ndarray]
    min_seeds: int
    power: float
    fixed_seeds: int | None
    max_seeds: int
    reps: int
    seed: int | None = field(default=None)


# --- functional API ----------------------------------------------------------------


def confidence_sequence(
    differences: ArrayLike,
    *,
    alpha: float = 0.05,
    method: Method = "t-mixture",
    mixture_sd: float = 1.0,
    bounds: tuple[float, float] | None = None,
) -> ConfidenceSequence:
    """Anytime-valid confidence sequence for the mean of per-seed differences.

    differences: (n,) variant - control, one per seed pair, in seed (or completion) order.
    alpha: the CS covers the true mean at all n at once with probability >= 1 - alpha.
    method: "t-mixture" (normal seeds, unknown variance) or "betting" (needs bounds).
    mixture_sd: t-mixture only; the standardized effect |mean|/sd(d) the test is tuned to.
    bounds: (low, high), the range the metric itself is known to lie in (e.g. (0, 1) for an
      accuracy); required by "betting". Differences must lie in [-(high-low), high-low].

    Returns a ConfidenceSequence whose arrays have shape (n,), entry i after i + 1 pairs.
    The module docstring gives the construction and its validity argument.
    """
    alpha = _alpha(alpha)
    method = _method(method, bounds)
    g = _mixture_sd(mixture_sd) ** 2
    width = _bounds(bounds)
    d = _values(differences, "differences")
    if width is not None:
        _check_in_range(d, -width, width, "differences",
                        f"[-{width:g}, {width:g}], where differences of values within bounds lie")
    if method == "t-mixture":
        _warn_if_discrete(d)
    estimate, low, high, log_e = _paths(d[None, :], alpha, method, g, width)
    low, high, empty = _intersect(low, high)
    if empty.any():
        first = int(np.argmax(empty[0])) + 1
        warnings.warn(StatsWarning(
            f"the confidence sequence contradicts itself after {first} pairs (its intervals "
            "at different n do not overlap): the differences are unlikely under the method's "
            "assumptions (normal seeds for t-mixture, values within bounds for betting); "
            "check for a collapsed run or a changed setup mid-experiment",
            "sequential-contradiction"), stacklevel=2)
    p = _p_values(log_e)
    return ConfidenceSequence(estimate[0], low[0], high[0], p[0], alpha, method)


class SequentialTest:
    """Compare a variant with the control after every round of seeds; stop when decisive.

        test = SequentialTest(alpha=0.05, direction="increase", smallest_effect=0.01,
                              max_seeds=30)
        for _ in rounds:                           # the runner adds seeds to both arms
            result = test.update(control_so_far, variant_so_far)
            if result.stop:
                break

    alpha: bound on the probability that any decision is wrong, over all rounds looked at.
    direction: "increase" when the variant should raise the metric, "decrease" to lower it.
    smallest_effect: the smallest difference worth having (> 0, metric units); enables the
      "no effect" decision. None: never decide "no effect".
    method, mixture_sd, bounds: as in `confidence_sequence`. With "t-mixture", bounds
      (optional) only check that every value lies in them.
    max_seeds: the budget in seeds per arm; at it an undecided comparison ends with
      "budget spent". None: no budget.
    """

    def __init__(
        self,
        *,
        alpha: float = 0.05,
        direction: Literal["increase", "decrease"] = "increase",
        smallest_effect: float | None = None,
        method: Method = "t-mixture",
        mixture_sd: float = 1.0,
        bounds: tuple[float, float] | None = None,
        max_seeds: int | None = None,
    ) -> None:
        self.alpha = _alpha(alpha)
        self.direction = _direction(direction)
        self.smallest_effect = _smallest_effect(smallest_effect)
        self.method = _method(method, bounds)
        self.mixture_sd = _mixture_sd(mixture_sd)
        _bounds(bounds)
        self.bounds = None if bounds is None else (float(bounds[0]), float(bounds[1]))
        if max_seeds is not None and (isinstance(max_seeds, bool) or int(max_seeds) != max_seeds
                                      or max_seeds < 2):
            raise ValueError(f"max_seeds={max_seeds!r} must be a whole number of seeds per arm, "
                             "at least 2 (or None for no budget)")
        self.max_seeds = None if max_seeds is None else int(max_seeds)
        self._control = np.empty(0)
        self._variant = np.empty(0)
        self._results: list[SequentialResult] = []
        self._warned_discrete = False

    @property
    def results(self) -> tuple[SequentialResult, ...]:
        """One result per round so far, oldest first."""
        return tuple(self._results)

    def update(self, control_values: ArrayLike, variant_values: ArrayLike) -> SequentialResult:
        """Add a round and return the comparison so far.

        control_values, variant_values: (n,) ALL values so far, one per seed, aligned by
          seed index (entry i of both arms is seed i): the values seen at earlier rounds
          followed by the new round's. Earlier values must be unchanged (a rewritten
          history would void the guarantee); pass only seeds finished in both arms. Calling
          again with no new seeds returns the last result (polling is free).
        """
        control = _values(control_values, "control_values")
        variant = _values(variant_values, "variant_values")
        if control.size != variant.size:
            raise ValueError(
                f"control_values has {control.size} seeds and variant_values {variant.size}; "
                "pair seeds by index and pass only seeds finished in both arms"
            )
        seen = self._control.size
        if control.size < seen:
            raise ValueError(
                f"got {control.size} seeds per arm after {seen} at the previous round; pass "
                "all values so far (earlier rounds first), not only the new round"
            )
        for name, old, new in (("control_values", self._control, control),
                               ("variant_values", self._variant, variant)):
            changed = np.flatnonzero(old != new[:seen])
            if changed.size:
                i = int(changed[0])
                raise ValueError(
                    f"{name}[{i}] changed from {old[i]:g} to {new[i]:g} since the last round; "
                    "values already looked at must stay as they were: append new seeds at "
                    "the end (in seed or completion order)"
                )
        if control.size == seen and self._results:
            return self._results[-1]
        if self.bounds is not None:
            low, high = self.bounds
            for name, values in (("control_values", control), ("variant_values", variant)):
                _check_in_range(values, low, high, name,
                                f"bounds=({low:g}, {high:g}), the metric's declared range")
        d = variant - control
        if self.method == "t-mixture" and not self._warned_discrete:
            self._warned_discrete = _warn_if_discrete(d, stacklevel=3)
        width = None if self.bounds is None else self.bounds[1] - self.bounds[0]
        estimate, low, high, log_e = _paths(d[None, :], self.alpha, self.method,
                                            self.mixture_sd**2, width)
        low, high, empty = _intersect(low, high)
        if empty[0, -1] and not empty[0, :-1].any():
            warnings.warn(StatsWarning(
                f"the confidence sequence contradicts itself at {d.size} seeds per arm (its "
                "intervals at different rounds do not overlap): the values are unlikely under "
                "the method's assumptions; check for collapsed runs or a changed setup",
                "sequential-contradiction"), stacklevel=2)
        self._control, self._variant = control, variant
        result = self._result(float(estimate[0, -1]), float(low[0, -1]), float(high[0, -1]),
                              float(_p_values(log_e)[0, -1]), d.size)
        self._results.append(result)
        return result

    def _result(self, estimate: float, low: float, high: float, p: float,
                n: int) -> SequentialResult:
        sign = 1 if self.direction == "increase" else -1
        code = int(_decide(np.array([low]), np.array([high]), sign, self.smallest_effect)[0])
        d = self._variant - self._control
        flat = (self.method == "t-mixture" and d.size >= 2 and _flat(d)
                and n >= _t_min_seeds(self.alpha, self.mixture_sd**2))
        if flat:
            code = _NO_VARIATION
        elif code == _CONTINUE and self.max_seeds is not None and n >= self.max_seeds:
            code = _BUDGET
        decision = DECISIONS[code]
        level = f"{100 * (1 - self.alpha):.3g}%"
        cs = (f"the {level} confidence sequence [{low:+.4g}, {high:+.4g}] after {n} seeds per "
              f"arm (estimate {estimate:+.4g}, always-valid p={p:.3g})")
        moved = "raises" if (low > 0) else "lowers"
        if code == _SUPPORTED:
            reason = f"{cs} excludes 0: the variant {moved} the metric as predicted"
        elif code == _REFUTED:
            reason = f"{cs} excludes 0: the variant {moved} the metric, against the prediction"
        elif code == _NO_VARIATION:
            same = ("both arms gave the same value on every seed"
                    if _flat(self._control) and _flat(self._variant)
                    else "every seed difference is the same value")
            reason = (f"after {n} seeds per arm {same} (difference {estimate:+.4g}): seed "
                      "noise was not measured, so the test cannot judge and more seeds of the "
                      "same kind will not help: inconclusive (does the script use its seed? for "
                      "a discrete metric with a known range use method='betting')")
        elif code == _NO_EFFECT:
            reason = (f"{cs} lies inside +-{self.smallest_effect:g}: any effect is smaller than "
                      "the smallest effect worth having")
        else:
            if math.isinf(low) and self.method == "t-mixture":
                floor = _t_min_seeds(self.alpha, self.mixture_sd**2)
                wait = f"; no verdict is possible before {floor} seeds per arm"
            else:
                wait = ""
            if code == _BUDGET:
                reason = (f"{cs} still contains 0 and the budget of {self.max_seeds} seeds per "
                          f"arm is spent: inconclusive{wait}")
            else:
                reason = f"{cs} contains 0: add seeds{wait}"
        return SequentialResult(len(self._results) + 1, n, estimate, low, high, p, decision,
                                reason, self.alpha, self.method)


# --- planning ----------------------------------------------------------------------


def sequential_plan(
    smallest_effect: float,
    *,
    sd: float,
    correlation: float = 0.0,
    alpha: float = 0.05,
    direction: Literal["increase", "decrease"] = "increase",
    max_seeds: int = 50,
    round_size: int = 1,
    first_round: int | None = None,
    effects: ArrayLike | None = None,
    mixture_sd: float = 1.0,
    reps: int = 2000,
    seed: int | np.random.Generator = 0,
) -> SequentialPlan:
    """Expected seeds and rounds to a decision, from simulated normal seeds.

    smallest_effect: the smallest difference worth having (> 0, metric units).
    sd: per-seed standard deviation of the metric in each arm (a guess or a pilot's).
    correlation: between the two arms' values at one seed (0 for independent arms; shared
      seeds that fix data order and init can make it positive, which shrinks sd(d)).
      The differences have sd = sd * sqrt(2 (1 - correlation)).
    direction: as in SequentialTest; the default effects point this way.
    max_seeds: the budget per arm. round_size: seeds per arm added each round;
      first_round: seeds per arm in the first round (default round_size).
    effects: (k,) true differences variant - control to simulate; default
      (0, smallest_effect/2, smallest_effect, 2 smallest_effect) in `direction`.
    reps: simulated experiments per effect. seed: int or numpy Generator; the only source
      of randomness, so one seed gives one plan.

    Uses the t-mixture, looks after every round. Returns a SequentialPlan.
    """
    delta = _smallest_effect(smallest_effect)
    if delta is None:
        raise ValueError("smallest_effect=None: give the smallest difference worth having (> 0)")
    sd = float(sd)
    if not (math.isfinite(sd) and sd > 0):
        raise ValueError(f"sd={sd!r} must be a finite per-seed standard deviation > 0")
    correlation = float(correlation)
    if not -1 <= correlation < 1:
        raise ValueError(f"correlation={correlation!r} must be in [-1, 1)")
    alpha = _alpha(alpha)
    sign = 1 if _direction(direction) == "increase" else -1
    g = _mixture_sd(mixture_sd) ** 2
    max_seeds = _whole(max_seeds, "max_seeds", 2)
    round_size = _whole(round_size, "round_size", 1)
    first_round = round_size if first_round is None else _whole(first_round, "first_round", 1)
    reps = _whole(reps, "reps", 1)
    looks = _looks(first_round, round_size, max_seeds)
    if effects is None:
        effects_array = sign * delta * np.array([0.0, 0.5, 1.0, 2.0])
    else:
        effects_array = np.asarray(effects, dtype=float).ravel()
        if effects_array.size == 0 or not np.all(np.isfinite(effects_array)):
            raise ValueError("effects must be a non-empty list of finite differences")
    rng = np.random.default_rng(seed)
    sd_d = sd * math.sqrt(2 * (1 - correlation))
    simulate = np.concatenate([effects_array, [sign * delta]])
    rows = []
    for effect in simulate:
        d = rng.normal(effect, sd_d, size=(reps, max_seeds))
        _, low, high, _ = _paths(d, alpha, "t-mixture", g, None)
        low, high, _ = _intersect(low, high)
        rows.append(_first_decision(low, high, looks, sign, delta))
    k = effects_array.size
    used = np.array([r[0] for r in rows[:k]], dtype=float)  # (k, reps)
    codes = np.array([r[1] for r in rows[:k]])
    rounds = np.array([r[2] for r in rows[:k]], dtype=float)
    decisions = {name: (codes == i).mean(axis=1) for i, name in enumerate(DECISIONS)
                 if name != "continue"}
    power = float((rows[-1][1] == _SUPPORTED).mean())
    fixed = None
    if power > alpha / 2:
        # A two-sample t test on arms with sd * sqrt(1 - correlation) has the paired
        # difference's variance; a simulated power of 1 is read as 1 - 1/(2 reps).
        fixed = seeds_needed(delta, alpha=alpha, power=min(power, 1 - 0.5 / reps),
                             sd=sd * math.sqrt(1 - correlation))
    return SequentialPlan(
        effects=effects_array, mean_seeds=used.mean(axis=1),
        median_seeds=np.median(used, axis=1), p90_seeds=np.quantile(used, 0.9, axis=1),
        mean_rounds=rounds.mean(axis=1), decisions=decisions,
        min_seeds=_t_min_seeds(alpha, g), power=power, fixed_seeds=fixed,
        max_seeds=max_seeds, reps=reps, seed=seed if isinstance(seed, int) else None,
    )


@dataclass(frozen=True)
class SequentialPower:
    """Power of the sequential rule itself (not of a fixed-n test) to say "supported".

    power: P("supported" by `max_seeds` seeds per arm) at the true difference
      smallest_effect in the predicted direction (None when no budget was given).
    seeds_needed: the smallest budget (seeds per arm) at which that probability reaches
      `target`, or None when it does not by `limit`.
    target, max_seeds, limit, reps, seed: what was simulated.
    """

    power: float | None
    seeds_needed: int | None
    target: float
    max_seeds: int | None
    limit: int
    reps: int
    seed: int


def sequential_power(
    smallest_effect: float,
    *,
    sd: float,
    alpha: float = 0.05,
    max_seeds: int | None = None,
    target: float = 0.8,
    mixture_sd: float = 1.0,
    limit: int = 400,
    reps: int = 2000,
    seed: int = 0,
) -> SequentialPower:
    """How many seeds per arm the t-mixture rule needs to say "supported" with probability
    `target` when the true difference is smallest_effect, by simulation of the rule.

    A fixed-n power calculation does not apply to a sequential rule: its intervals are wider
    than a t interval at every n (the price of looking at every round), so at the seeds a
    fixed t test needs for 80% power the rule reaches far less (about 30%).
    sd: standard deviation of the per-seed DIFFERENCES variant - control (paired by seed).
    The rule is simulated as `SequentialTest` judges a replay: normal differences, a look
    after every seed, stopping at the first decision ("no effect" needs smallest_effect,
    which is given). max_seeds: also report the power at this budget. limit: the largest
    budget searched. reps, seed: Monte-Carlo repetitions and their seed (one seed, one
    answer).
    """
    delta = _smallest_effect(smallest_effect)
    if delta is None:
        raise ValueError("smallest_effect=None: give the smallest difference worth having (> 0)")
    sd = float(sd)
    if not (math.isfinite(sd) and sd > 0):
        raise ValueError(f"sd={sd!r} must be a finite SD of seed differences > 0")
    alpha = _alpha(alpha)
    if not 0 < target < 1:
        raise ValueError(f"target={target!r} must be a power in (0, 1), e.g. 0.8")
    g = _mixture_sd(mixture_sd) ** 2
    limit = _whole(limit, "limit", 2)
    reps = _whole(reps, "reps", 1)
    budget = None if max_seeds is None else _whole(max_seeds, "max_seeds", 2)
    horizon = max(limit, budget or 0)
    rng = np.random.default_rng(seed)
    d = rng.normal(delta, sd, size=(reps, horizon))
    _, low, high, _ = _paths(d, alpha, "t-mixture", g, None)
    low, high, _ = _intersect(low, high)
    codes = _decide(low, high, 1, delta)  # (reps, horizon), a look after every seed
    decisive = codes != _CONTINUE
    first = np.where(decisive.any(axis=1), np.argmax(decisive, axis=1), horizon)
    won = codes[np.arange(reps), np.minimum(first, horizon - 1)] == _SUPPORTED
    won &= first < horizon
    # P(supported by n seeds) for n = 1..horizon: the first decision is reached by n and
    # is "supported" (a run stopped earlier by "no effect" never says supported later).
    by_n = np.cumsum(np.bincount(first[won], minlength=horizon)[:horizon]) / reps
    reached = np.flatnonzero(by_n[:limit] >= target)
    return SequentialPower(
        power=None if budget is None else float(by_n[budget - 1]),
        seeds_needed=int(reached[0]) + 1 if reached.size else None,
        target=float(target), max_seeds=budget, limit=limit, reps=reps, seed=int(seed))


# --- vectorized core (benchmarks/sequential.py uses it directly) ---------------------


def _paths(d: np.ndarray, alpha: float, method: str, g: float, width: float | None,
           grid_size: int = _GRID) -> tuple[np.ndarray, ...]:
    """d: (reps, n) differences -> estimate, low, high, log e-value at 0, each (reps, n),
    entry [r, i] after the first i + 1 pairs; low/high not yet intersected over n.
    grid_size: betting only; simulations of many repetitions may use a coarser grid (the
    CS only widens: it is widened by one grid step)."""
    if method == "t-mixture":
        return _t_mixture_paths(d, alpha, g)
    assert width is not None
    return _betting_paths(d, alpha, width, grid_size)


def _t_radius(n_max: int, alpha: float, g: float) -> np.ndarray:
    """r_n for n = 1..n_max, shape (n_max,): the CS is mean +- r_n s / sqrt(n).

    E_n >= 1/alpha  <=>  (1 + u) / (1 + u/c) >= K  with u = t^2/nu, c = 1 + n g,
    K = (c / alpha^2)^(1/n)  <=>  u >= (K - 1) / (1 - K/c)  (K < c; otherwise the ratio,
    which tends to c as t -> inf, never reaches K and r_n = inf). r_n = sqrt(nu u).
    """
    n = np.arange(1, n_max + 1, dtype=float)
    c = 1 + n * g
    log_k = (np.log(c) - 2 * math.log(alpha)) / n
    finite = (n >= 2) & (log_k < np.log(c))
    k = np.exp(np.where(finite, log_k, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (k - 1) / (1 - k / c)
        return np.where(finite, np.sqrt((n - 1) * u), np.inf)


def _t_min_seeds(alpha: float, g: float) -> int:
    """Smallest n >= 2 with sup_t E_n = (1 + n g)^((n-1)/2) >= 1/alpha."""
    n = 2
    while (n - 1) / 2 * math.log1p(n * g) < math.log(1 / alpha):
        n += 1
    return n


def _t_mixture_paths(d: np.ndarray, alpha: float, g: float) -> tuple[np.ndarray, ...]:
    reps, n_max = d.shape
    n = np.arange(1, n_max + 1, dtype=float)
    # Shift by the first value so that the running sums of squares do not cancel.
    y = d - d[:, :1]
    mean_y = np.cumsum(y, axis=1) / n
    estimate = mean_y + d[:, :1]
    squares = np.maximum(np.cumsum(y * y, axis=1) - n * mean_y**2, 0.0)  # sum (d_i - mean)^2
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(squares / np.maximum(n - 1, 1) / n)
        radius = _t_radius(n_max, alpha, g)
        # Zero spread (all differences equal) measures no noise: such a look carries no
        # information, not a zero-width interval (issue 30: a script ignoring its seed was
        # "supported" at the first look). Its interval is the whole line and E_n(0) = 1.
        flat = (squares <= (_FLAT * np.maximum.accumulate(np.abs(d), axis=1)) ** 2 * n) \
            & (n >= 2)
        half = np.where(np.isinf(radius) | flat, np.inf, radius * se)
        # log E_n(0) = -log(c)/2 - (n/2) log((1 - w) + w/c), w = t^2/(nu + t^2)
        # = n mean^2 / (n mean^2 + sum of squares): finite when s = 0 (w = 1, t = inf).
        top = n * estimate**2
        w = np.where(top > 0, top / (top + squares), 0.0)
    c = 1 + n * g
    log_e = -0.5 * np.log(c) - 0.5 * n * np.log((1 - w) + w / c)
    log_e[:, 0] = 0.0  # one pair: the invariant is a sign, equally likely under both
    log_e[flat] = 0.0
    return estimate, estimate - half, estimate + half, log_e


def _betting_paths(d: np.ndarray, alpha: float, width: float,
                   grid_size: int = _GRID) -> tuple[np.ndarray, ...]:
    """Hedged capital CS of Waudby-Smith & Ramdas 2023 on x = (d + w) / (2w)."""
    reps, n_max = d.shape
    x = (d + width) / (2 * width)
    t = np.arange(1, n_max + 1, dtype=float)
    # Predictable plug-in bets (Waudby-Smith & Ramdas's PrPl): mu_t, sigma2_t regularized by
    # one fake observation (1/2, 1/4); the bet at t uses sigma2_{t-1}.
    mu = (0.5 + np.cumsum(x, axis=1)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2, axis=1)) / (t + 1)
    sigma2_prev = np.concatenate([np.full((reps, 1), 0.25), sigma2[:, :-1]], axis=1)
    bets = np.sqrt(2 * math.log(2 / alpha) / (sigma2_prev * t * np.log1p(t)))
    grid = np.linspace(0.0, 1.0, grid_size)
    with np.errstate(divide="ignore"):
        cap_up, cap_down = _BET_TRUNCATION / grid, _BET_TRUNCATION / (1 - grid)
    log_up = np.zeros((reps, grid_size))
    log_down = np.zeros((reps, grid_size))
    zero_up = np.zeros(reps)  # the capital at m = 1/2 (d = 0), exactly, for the p-value
    zero_down = np.zeros(reps)
    low = np.empty((reps, n_max))
    high = np.empty((reps, n_max))
    log_e = np.empty((reps, n_max))
    threshold = math.log(1 / alpha)
    log_theta, log_rest = math.log(_BET_THETA), math.log(1 - _BET_THETA)
    rows = np.arange(reps)
    for i in range(n_max):
        bet = bets[:, i : i + 1]
        gap = x[:, i : i + 1] - grid
        log_up += np.log1p(np.minimum(bet, cap_up) * gap)
        log_down += np.log1p(-np.minimum(bet, cap_down) * gap)
        log_k = np.maximum(log_theta + log_up, log_rest + log_down)
        keep = log_k < threshold
        first = np.argmax(keep, axis=1)
        last = grid_size - 1 - np.argmax(keep[:, ::-1], axis=1)
        none = ~keep[rows, first]
        # One grid step outward: the set kept is an interval, so the truth lying between
        # a rejected and a kept grid point is still inside.
        lo = grid[np.maximum(first - 1, 0)]
        hi = grid[np.minimum(last + 1, grid_size - 1)]
        best = grid[np.argmin(log_k, axis=1)]
        low[:, i] = np.where(none, best, lo)
        high[:, i] = np.where(none, best, hi)
        b = bets[:, i]
        zero_up += np.log1p(np.minimum(b, 2 * _BET_TRUNCATION) * (x[:, i] - 0.5))
        zero_down += np.log1p(-np.minimum(b, 2 * _BET_TRUNCATION) * (x[:, i] - 0.5))
        log_e[:, i] = np.maximum(log_theta + zero_up, log_rest + zero_down)
    estimate = np.cumsum(d, axis=1) / t
    return estimate, 2 * width * low - width, 2 * width * high - width, log_e


def _intersect(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Running intersection over n (axis 1); where it is empty, the current interval."""
    run_low = np.maximum.accumulate(low, axis=1)
    run_high = np.minimum.accumulate(high, axis=1)
    empty = run_low > run_high
    return np.where(empty, low, run_low), np.where(empty, high, run_high), empty


def _p_values(log_e: np.ndarray) -> np.ndarray:
    """Always-valid p-values 1 / max_{k <= n} E_k, capped at 1 (Johari et al. 2022)."""
    return np.minimum(1.0, np.exp(-np.maximum.accumulate(log_e, axis=1)))


def _decide(low: np.ndarray, high: np.ndarray, sign: int,
            delta: float | None) -> np.ndarray:
    """Decision codes (same shape as low/high) before any budget: see SequentialResult."""
    up, down = low > 0, high < 0
    codes = np.full(low.shape, _CONTINUE)
    if delta is not None:
        codes[(low > -delta) & (high < delta)] = _NO_EFFECT
    codes[up if sign > 0 else down] = _SUPPORTED
    codes[down if sign > 0 else up] = _REFUTED
    return codes


def _looks(first_round: int, round_size: int, max_seeds: int) -> np.ndarray:
    """Seeds per arm at each look: first_round, + round_size, ..., capped at max_seeds."""
    looks = list(range(min(first_round, max_seeds), max_seeds + 1, round_size))
    if looks[-1] != max_seeds:
        looks.append(max_seeds)
    return np.array(looks)


def _first_decision(low: np.ndarray, high: np.ndarray, looks: np.ndarray, sign: int,
                    delta: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """low, high: (reps, n_max) intersected CS; looks: (L,) seeds per arm at each look.
    Returns seeds used, decision code and rounds used, each (reps,), stopping at the
    first decisive look and ending with "budget spent" after the last."""
    codes = _decide(low[:, looks - 1], high[:, looks - 1], sign, delta)  # (reps, L)
    decisive = codes != _CONTINUE
    any_ = decisive.any(axis=1)
    at = np.where(any_, np.argmax(decisive, axis=1), looks.size - 1)
    code = np.where(any_, codes[np.arange(codes.shape[0]), at], _BUDGET)
    return looks[at], code, at + 1


# --- argument checks -----------------------------------------------------------------


def _values(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name} must have shape (n_seeds,), one value per seed; got shape "
                         f"{array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty: need at least one seed")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf; drop or fix failed runs first")
    return array


def _alpha(alpha: float) -> float:
    alpha = float(alpha)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must be a probability in (0, 1), e.g. 0.05")
    return alpha


def _direction(direction: str) -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r}; choose 'increase' (the variant should raise "
                         "the metric) or 'decrease'")
    return direction


def _method(method: str, bounds: tuple[float, float] | None) -> str:
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not one of {', '.join(map(repr, METHODS))}")
    if method == "betting" and bounds is None:
        raise ValueError("method='betting' needs bounds=(low, high), the range the metric is "
                         "known to lie in (e.g. (0, 1) for an accuracy); or use 't-mixture'")
    return method


def _bounds(bounds: tuple[float, float] | None) -> float | None:
    """The width high - low of the metric's range, or None."""
    if bounds is None:
        return None
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"bounds={bounds!r} must be a pair (low, high) of numbers, e.g. "
                         "(0, 1)") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"bounds={bounds!r} must be finite with low < high, e.g. (0, 1)")
    return high - low


def _mixture_sd(mixture_sd: float) -> float:
    value = float(mixture_sd)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"mixture_sd={mixture_sd!r} must be a finite standardized effect > 0; "
                         "the default 1.0 suits most comparisons")
    return value


def _smallest_effect(smallest_effect: float | None) -> float | None:
    if smallest_effect is None:
        return None
    value = float(smallest_effect)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"smallest_effect={smallest_effect!r} must be a positive size in the "
                         "metric's units (e.g. 0.01), or None")
    return value


def _whole(value: int, name: str, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name}={value!r} must be a whole number >= {minimum}")
    return int(value)


def _check_in_range(values: np.ndarray, low: float, high: float, name: str,
                    what: str) -> None:
    outside = np.flatnonzero((values < low) | (values > high))
    if outside.size:
        i = int(outside[0])
        raise ValueError(f"{name}[{i}]={values[i]:g} lies outside {what}; fix the bounds or "
                         "the data")


def _flat(values: np.ndarray) -> bool:
    """Every value the same, up to floating-point rounding (see _FLAT)."""
    return bool(np.std(values) <= _FLAT * np.max(np.abs(values)))


def _warn_if_discrete(d: np.ndarray, stacklevel: int = 3) -> bool:
    """Warn when one value makes up most differences (a 0/1 metric, or identical arms): the
    t-mixture assumes normal seeds and would read a run of ties as zero spread."""
    if d.size < 4:
        return False
    scale = float(np.max(np.abs(d))) or 1.0  # ties up to rounding (0.2 - 0.1, 0.4 - 0.3)
    _, counts = np.unique(np.round(d / scale, 9), return_counts=True)
    if counts.max() <= d.size / 2:
        return False
    warnings.warn(StatsWarning(
        f"{counts.max()} of {d.size} seed differences are the same value: the metric looks "
        "discrete (or the arms are identical), and the t-mixture assumes normal seeds. For a "
        "metric with a known range use method='betting' with bounds=(low, high)",
        "discrete-metric"), stacklevel=stacklevel)
    return True
