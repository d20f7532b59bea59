"""`labcoat plan`: how many seeds and items a design needs, and what each buys.

For each hypothesis: the seeds per arm and eval items per task (Miller 2024's
paired formula) that reach 80% power for its smallest effect, and tables of the
minimum detectable effect against seeds and against items, so compute can be
traded for resolution knowingly. For a set of candidate interventions: the
fractional factorial that tests them together.

Seed power is planned for the analysis the report will run (`planned_analysis`):
a paired t test on the per-seed differences when `seed_analysis: paired` (with
the SD of those differences), else a two-sample t test (with the per-seed SD);
each at the per-comparison alpha that keeps its power under the design's
`correction:` over the whole verdict family (`stats.family_alpha`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scipy.optimize import brentq

from labcoat import spec, stats
from labcoat.review._pilot import Pilot
from labcoat.spec import Design, Hypothesis

SEED_GRID = (3, 5, 10, 20, 30, 50)
ITEM_GRID = (50, 100, 200, 500, 1000, 2000)
POWER = 0.8


@dataclass(frozen=True)
class PlannedAnalysis:
    """The seed-level test the report will run for one hypothesis, as power sees it."""

    paired: bool
    """True: paired t on the per-seed differences (df n - 1); False: two-sample t."""
    sd: float | None
    """The SD the power divides by: of the per-seed differences variant - control when
    paired, else the per-seed SD of the metric; None if unknown."""
    sd_source: str
    """Where sd comes from, in words (a pilot, the `sd:` guess, or why it is unknown)."""
    comparisons: int
    """m: comparisons in the report's verdict family (every hypothesis, every variant)."""
    correction: str
    """The design's `correction:` ("holm", "bh", "bonferroni", "none")."""
    alpha: float
    """The hypothesis' alpha."""
    comparison_alpha: float
    """The per-comparison alpha power is planned at: stats.family_alpha(alpha, m, correction)."""
    runs: int = 0
    """Factorial designs: the design's runs (factor-level combinations); 0 for arms."""
    terms: int = 0
    """Factorial designs: effects in the OLS model (main effects and interactions)."""

    def power(self, n: float, effect: float) -> float:
        """Power of this test with n seeds per arm for a true difference `effect`."""
        if self.sd is None:
            raise ValueError("the SD is unknown: declare `sd:` or pass a pilot")
        if self.runs:
            return stats.power_factorial(n, effect, runs=self.runs, terms=self.terms,
                                         sd=self.sd, alpha=self.comparison_alpha)
        test = stats.power_paired if self.paired else stats.power_two_sample
        return test(n, effect, sd=self.sd, alpha=self.comparison_alpha)

    def seeds_needed(self, effect: float, power: float = POWER) -> int:
        """Seeds per arm for `power` to detect `effect` (two-sided)."""
        if self.sd is None:
            raise ValueError("the SD is unknown: declare `sd:` or pass a pilot")
        if self.runs:  # per run: N / 2 trials on each side of an effect
            seeds = 2
            while self.power(seeds, effect) < power:
                seeds *= 2
            low = seeds // 2  # power(low) < power (or low = 1, which may have no df)
            while seeds - low > 1:
                middle = (low + seeds) // 2
                low, seeds = (low, middle) if self.power(middle, effect) >= power else (
                    middle, seeds)
            return seeds
        return stats.seeds_needed(effect, sd=self.sd, alpha=self.comparison_alpha,
                                  power=power, paired=self.paired)

    def minimum_detectable_effect(self, n: int, power: float = POWER) -> float:
        """The effect n seeds per arm detect with `power` (two-sided)."""
        if self.sd is None:
            raise ValueError("the SD is unknown: declare `sd:` or pass a pilot")
        sd = self.sd

        def gap(effect: float) -> float:
            return self.power(n, effect) - power

        high = sd
        while gap(high) < 0:  # bracket the root: power grows with the effect
            high *= 2
        return float(brentq(gap, 1e-9 * sd, high))

    @property
    def description(self) -> str:
        """E.g. "paired t on seed differences, Holm over 3 comparisons: alpha 0.0167 per
        comparison"."""
        test = ("paired t on seed differences" if self.paired else
                f"OLS effect over {self.runs} runs x seeds" if self.runs else
                "two-sample t on seeds")
        m = self.comparisons
        if m == 1:
            family = f"a single comparison: alpha {self.comparison_alpha:.3g}"
        elif self.correction == "none":
            family = (f"{m} comparisons NOT corrected: alpha {self.comparison_alpha:.3g} per "
                      "comparison")
        else:
            method = stats.CORRECTIONS[self.correction]
            family = (f"{method.name} over {m} comparisons: alpha "
                      f"{self.comparison_alpha:.3g} per comparison{method.plan_note}")
        return f"{test}, {family}"


def verdict_comparisons(design: Design) -> int:
    """How many comparisons the report's verdict family has: under every hypothesis, every
    variant against the control (only those in its `compare:` list, if any); for a factorial
    design, the main effects judged (`compare:` or every factor) and the declared
    interactions. At least 1."""
    total = 0
    for h in design.all_hypotheses:
        if design.factors is not None:
            total += len(h.compare or design.factors) + len(design.interactions)
        else:
            variants = [a.name for a in spec.arm_specs(design) if a.name != design.control]
            total += len([a for a in variants if a in h.compare] if h.compare else variants)
    return max(total, 1)


def _unknown_sd(pilot: Pilot | None) -> str:
    """Why the SD is unknown, and what to do: a pilot that was given but says nothing is
    named, not answered with "pass --pilot"."""
    if pilot is None:
        return "unknown: declare `sd:` or pass --pilot EXP"
    if pilot.never_logged:
        return f"unknown: pilot {pilot.experiment}: {pilot.never_logged}"
    if not pilot.finished:
        return (f"unknown: pilot {pilot.experiment} has no finished trial yet; declare `sd:` "
                "or wait for it")
    return (f"unknown: pilot {pilot.experiment} has fewer than 2 finished seeds in every arm; "
            "declare `sd:` or run more seeds of it")


def planned_analysis(design: Design, hypothesis: Hypothesis,
                     pilot: Pilot | None = None) -> PlannedAnalysis:
    """The test, SD and per-comparison alpha that power for `hypothesis` is planned with.

    Paired when `seed_analysis: paired` and the design has arms; a factorial design's
    effects are OLS contrasts over every trial (`stats.power_factorial`). The paired SD comes
    from the pilot's per-seed differences; without them the per-seed SD (pilot, else the
    `sd:` guess) times sqrt(2), the SD of a difference of two arms whose seeds are
    uncorrelated: conservative when shared seeds move both arms alike.
    """
    paired = design.paired_analysis
    seed_sd, source = ((pilot.seed_sd, f"pilot {pilot.experiment}") if pilot and pilot.seed_sd
                       else (hypothesis.sd, "your `sd:` guess"))
    if paired and pilot and pilot.paired_sd:
        sd, source = pilot.paired_sd, (f"pilot {pilot.experiment}, differences on "
                                       f"{pilot.paired_seeds} shared seeds")
    elif seed_sd is None:
        sd, source = None, _unknown_sd(pilot)
    elif paired:
        sd, source = seed_sd * math.sqrt(2), (
            f"{seed_sd:.3g} x sqrt(2), the per-seed SD from {source}: the SD of paired "
            "differences is unknown, so the arms are assumed uncorrelated (conservative)")
    else:
        sd = seed_sd
    m = verdict_comparisons(design)
    runs = len(spec.arm_specs(design)) if design.factors else 0
    terms = len(design.factors or {}) + len(design.interactions)
    return PlannedAnalysis(paired, sd, source, m, design.correction, hypothesis.alpha,
                           stats.family_alpha(hypothesis.alpha, m, design.correction),
                           runs=runs, terms=terms if runs else 0)


@dataclass
class HypothesisPlan:
    id: str
    metric: str
    smallest_effect: float | None
    sd: float | None  # the SD power uses: of per-seed differences if paired, else per-seed
    sd_source: str
    seeds_needed: int | None  # per arm, for POWER at the smallest effect
    mde_by_seeds: list[tuple[int, float]] = field(default_factory=list)
    omega2: float | None = None  # per-item difference variance (pilot)
    items_needed: int | None = None  # per task
    mde_by_items: list[tuple[int, float]] = field(default_factory=list)
    analysis: str = ""  # the test and family alpha planned for, in words
    paired: bool = False  # paired t on seed differences (else two-sample t)
    comparisons: int = 1  # in the report's verdict family
    alpha: float = 0.05  # per comparison, after the family correction
    prior: float | None = None  # `predict: supported`, read as P(the claim is true)
    power: float | None = None  # at the smallest effect, with the design's seeds
    information: float | None = None  # expected bits about the claim (review._information)
    information_note: str = ""  # why it is unknown


@dataclass
class Plan:
    design: str
    seeds: int  # per arm, as designed
    hypotheses: list[HypothesisPlan]
    factorial: stats.FactorialSuggestion | None = None
    notes: list[str] = field(default_factory=list)
    cost: float = 0.0  # compute, in `cost_unit` (review._information.design_cost)
    cost_unit: str = "trials"


def plan(design: Design, pilots: dict[str, Pilot] | None = None, *,
         candidates: list[str] | None = None) -> Plan:
    pilots = pilots or {}
    result = Plan(design.name, len(design.seeds),
                  [_hypothesis_plan(design, h, pilots.get(h.id or ""))
                   for h in design.all_hypotheses])
    names = candidates or _candidates(design)
    if names and len(names) >= 3:
        first = design.all_hypotheses[0] if design.all_hypotheses else None
        seed_sd = _seed_sd(first, pilots.get(first.id or "")) if first else None
        try:
            result.factorial = stats.suggest_fractional(
                names, seeds=max(2, len(design.seeds)), sd=seed_sd,
                smallest_effect=first.smallest_effect if first and seed_sd else None)
        except ValueError as e:
            result.notes.append(f"no fractional factorial suggested: {e}")
    if not result.hypotheses:
        result.notes.append("no hypothesis declared: nothing to plan power for")
    from labcoat.review._information import design_cost  # it builds on this module

    result.cost, result.cost_unit = design_cost(design)
    return result


def _seed_sd(h: Hypothesis, pilot: Pilot | None) -> float | None:
    """Per-seed SD of the metric (a factorial's runs are compared unpaired)."""
    return pilot.seed_sd if pilot and pilot.seed_sd else h.sd


def _candidates(design: Design) -> list[str]:
    """Interventions that could share runs: two-level factors, or one-change arms."""
    if design.factors:
        return [f for f, factor in design.factors.items() if len(factor.named_levels()) == 2]
    return [a for a, arm in (design.arms or {}).items() if not arm.control and arm.params]


def _hypothesis_plan(design: Design, h: Hypothesis, pilot: Pilot | None) -> HypothesisPlan:
    from labcoat.review._information import information  # it builds on this module

    analysis = planned_analysis(design, h, pilot)
    info = information(design, h, pilot)
    out = HypothesisPlan(h.id or "H1", h.metric, h.smallest_effect, analysis.sd,
                         analysis.sd_source, None, analysis=analysis.description,
                         paired=analysis.paired, comparisons=analysis.comparisons,
                         alpha=analysis.comparison_alpha, prior=info.prior, power=info.power,
                         information=info.bits, information_note=info.why)
    if analysis.sd:
        out.mde_by_seeds = [(n, analysis.minimum_detectable_effect(n)) for n in SEED_GRID]
        if h.smallest_effect:
            out.seeds_needed = analysis.seeds_needed(h.smallest_effect)
    if pilot and pilot.omega2 and h.source == "items":
        out.omega2 = pilot.omega2
        out.mde_by_items = [(n, stats.minimum_detectable_effect(n, omega2=pilot.omega2,
                                                                alpha=h.alpha, power=POWER))
                            for n in ITEM_GRID]
        if h.smallest_effect:
            out.items_needed = stats.items_needed(h.smallest_effect, omega2=pilot.omega2,
                                                  alpha=h.alpha, power=POWER)
    return out
