"""What an experiment is expected to teach, and what it costs: choosing what to run.

The expected information of a hypothesis is the mutual information, in bits, between the
claim and the verdict (`stats.expected_information`, Lindley 1956): the prior is the
`predict: supported` probability read as the probability that the claim is true (an
effect of at least `smallest_effect` in the stated direction); the verdict says
SUPPORTED with the design's power at the smallest effect if it is, and with alpha / 2 (a
two-sided test significant in the predicted direction) if there is no effect. A nearly
certain prior or an underpowered design teaches little. Candidate designs are ranked by
expected information per unit of compute: the budget's CPU/GPU-hours when `budget:`
states minutes per trial, else the sum of the trials' `steps` param, else the trial count.
"""

from __future__ import annotations

from dataclasses import dataclass

from labcoat import spec, stats
from labcoat.review._pilot import Pilot
from labcoat.review._plan import planned_analysis
from labcoat.spec import Design, Hypothesis


@dataclass(frozen=True)
class Information:
    """One hypothesis: its prior, the power its verdict has, what it is expected to teach."""

    prior: float | None
    power: float | None  # at the smallest effect, with the design's seeds
    false_positive: float | None  # P(SUPPORTED | no effect) = per-comparison alpha / 2
    bits: float | None  # None: prior or power unknown (`why` says which)
    why: str = ""


def information(design: Design, h: Hypothesis, pilot: Pilot | None = None) -> Information:
    """Expected information (bits) the verdict on `h` gives about its claim."""
    prior = h.predict.supported if h.predict is not None else None
    analysis = planned_analysis(design, h, pilot)
    n = len(design.seeds)
    if h.smallest_effect is None or analysis.sd is None or n < 2:
        missing = ("`smallest_effect:`" if h.smallest_effect is None else
                   "two or more seeds" if n < 2 else "the SD (`sd:` or --pilot EXP)")
        return Information(prior, None, None, None, f"power unknown: needs {missing}")
    power = analysis.power(n, h.smallest_effect)
    false_positive = analysis.comparison_alpha / 2
    if prior is None:
        return Information(None, power, false_positive, None,
                           "no prior: add `predict: {supported: P}` under the hypothesis")
    bits = stats.expected_information(prior, power, false_positive)
    return Information(prior, power, false_positive, bits)


def design_cost(design: Design) -> tuple[float, str]:
    """(cost, unit): budget hours, else the sum of the trials' steps, else trials."""
    trials = spec.trial_count(design)
    b = design.budget
    if b is not None and b.trial_minutes is not None:
        kind, per_trial = ("GPU", b.gpus_per_trial) if b.gpus_per_trial else (
            "CPU", b.cpus_per_trial)
        return trials * b.trial_minutes / 60 * per_trial, f"{kind}-hours"
    steps = [t.params.get("steps") for t in spec.expand(design)]
    if steps and all(isinstance(s, int | float) and not isinstance(s, bool) and s > 0
                     for s in steps):
        return float(sum(steps)), "trial-steps"
    return float(trials), "trials"


@dataclass(frozen=True)
class Candidate:
    """One design among several, as `labcoat plan A.yaml B.yaml` ranks them."""

    name: str  # the design file
    bits: float | None  # summed over its hypotheses with a prior and a known power
    cost: float
    unit: str
    why: str = ""  # why bits is unknown

    @property
    def bits_per_cost(self) -> float | None:
        return None if self.bits is None else self.bits / self.cost


def rank(candidates: list[tuple[str, Design, dict[str, Pilot]]]) -> list[Candidate]:
    """Candidates by expected information per unit of compute, best first (unknowns
    last). Costs in different units are compared in trials, and the unit says so."""
    found = []
    for name, design, pilots in candidates:
        infos = [information(design, h, pilots.get(h.id or "")) for h in design.all_hypotheses]
        known = [i.bits for i in infos if i.bits is not None]
        why = "" if known else (next((i.why for i in infos if i.why), "no hypothesis"))
        cost, unit = design_cost(design)
        found.append(Candidate(name, sum(known) if known else None, cost, unit, why))
    if len({c.unit for c in found}) > 1:
        found = [Candidate(c.name, c.bits, float(spec.trial_count(d)), "trials", c.why)
                 for c, (_, d, _) in zip(found, candidates, strict=True)]
    return sorted(found, key=lambda c: (c.bits_per_cost is None, -(c.bits_per_cost or 0)))
