"""`labcoat plan`: how many seeds and items a design needs, and what each buys.

For each hypothesis: the seeds per arm (noncentral t, two-sided) and eval items
per task (Miller 2024's paired formula) that reach 80% power for its smallest
effect, and tables of the minimum detectable effect against seeds and against
items, so compute can be traded for resolution knowingly. For a set of
candidate interventions: the fractional factorial that tests them together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scipy.optimize import brentq

from labcoat import stats
from labcoat.review._pilot import Pilot
from labcoat.spec import Design, Hypothesis

SEED_GRID = (3, 5, 10, 20, 30, 50)
ITEM_GRID = (50, 100, 200, 500, 1000, 2000)
POWER = 0.8


@dataclass
class HypothesisPlan:
    id: str
    metric: str
    smallest_effect: float | None
    sd: float | None  # per-seed SD of the metric
    sd_source: str
    seeds_needed: int | None  # per arm, for POWER at the smallest effect
    mde_by_seeds: list[tuple[int, float]] = field(default_factory=list)
    omega2: float | None = None  # per-item difference variance (pilot)
    items_needed: int | None = None  # per task
    mde_by_items: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class Plan:
    design: str
    seeds: int  # per arm, as designed
    hypotheses: list[HypothesisPlan]
    factorial: stats.FactorialSuggestion | None = None
    notes: list[str] = field(default_factory=list)


def plan(design: Design, pilots: dict[str, Pilot] | None = None, *,
         candidates: list[str] | None = None) -> Plan:
    pilots = pilots or {}
    result = Plan(design.name, len(design.seeds),
                  [_hypothesis_plan(h, pilots.get(h.id or "")) for h in design.all_hypotheses])
    names = candidates or _candidates(design)
    if names and len(names) >= 3:
        first = result.hypotheses[0] if result.hypotheses else None
        try:
            result.factorial = stats.suggest_fractional(
                names, seeds=max(2, len(design.seeds)), sd=first.sd if first else None,
                smallest_effect=first.smallest_effect if first and first.sd else None)
        except ValueError as e:
            result.notes.append(f"no fractional factorial suggested: {e}")
    if not result.hypotheses:
        result.notes.append("no hypothesis declared: nothing to plan power for")
    return result


def _candidates(design: Design) -> list[str]:
    """Interventions that could share runs: two-level factors, or one-change arms."""
    if design.factors:
        return [f for f, factor in design.factors.items() if len(factor.named_levels()) == 2]
    return [a for a, arm in (design.arms or {}).items() if not arm.control and arm.params]


def _hypothesis_plan(h: Hypothesis, pilot: Pilot | None) -> HypothesisPlan:
    sd, source = (pilot.seed_sd, f"pilot {pilot.experiment}") if pilot and pilot.seed_sd else (
        h.sd, "your `sd:` guess" if h.sd else "unknown: declare `sd:` or pass --pilot EXP")
    out = HypothesisPlan(h.id or "H1", h.metric, h.smallest_effect, sd, source, None)
    if sd:
        out.mde_by_seeds = [(n, _mde_seeds(n, sd, h.alpha)) for n in SEED_GRID]
        if h.smallest_effect:
            out.seeds_needed = stats.seeds_needed(h.smallest_effect, sd=sd, alpha=h.alpha,
                                                  power=POWER)
    if pilot and pilot.omega2 and h.source == "items":
        out.omega2 = pilot.omega2
        out.mde_by_items = [(n, stats.minimum_detectable_effect(n, omega2=pilot.omega2,
                                                                alpha=h.alpha, power=POWER))
                            for n in ITEM_GRID]
        if h.smallest_effect:
            out.items_needed = stats.items_needed(h.smallest_effect, omega2=pilot.omega2,
                                                  alpha=h.alpha, power=POWER)
    return out


def _mde_seeds(n: int, sd: float, alpha: float) -> float:
    """The effect n seeds per arm detect with POWER (noncentral t, two-sided)."""
    def gap(effect: float) -> float:
        power = stats.power_two_sample(n, effect, sd=sd, alpha=alpha)
        # scipy's noncentral t gives NaN far in the tail, where the power is ~1
        return (1.0 if math.isnan(power) else power) - POWER

    high = sd
    while gap(high) < 0:  # bracket the root: power grows with the effect
        high *= 2
    return float(brentq(gap, 1e-9 * sd, high))
