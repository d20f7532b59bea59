"""Design review: lint rules for weak experiments, power planning from pilot data.

planned_analysis(design, hypothesis, pilot) is the seed test, SD and per-comparison alpha
that power is planned with (the analysis the report runs); verdict_comparisons(design)
counts the report's verdict family. information(design, hypothesis) is what its verdict is
expected to teach about the claim (bits, from the `predict:` prior and the power);
rank(candidates) orders designs by expected information per unit of compute.
"""

from labcoat.review._findings import Finding
from labcoat.review._information import Candidate, Information, design_cost, information, rank
from labcoat.review._lint import lint, pilots_from_store
from labcoat.review._pilot import Pilot, never_logged, pilot_for
from labcoat.review._plan import (
    HypothesisPlan,
    Plan,
    PlannedAnalysis,
    plan,
    planned_analysis,
    verdict_comparisons,
)

__all__ = [
    "Candidate",
    "Finding",
    "Information",
    "design_cost",
    "information",
    "rank",
    "HypothesisPlan",
    "Pilot",
    "Plan",
    "PlannedAnalysis",
    "lint",
    "never_logged",
    "pilot_for",
    "pilots_from_store",
    "plan",
    "planned_analysis",
    "verdict_comparisons",
]
