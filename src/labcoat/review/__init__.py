"""Design review: lint rules for weak experiments, power planning from pilot data."""

from labcoat.review._findings import Finding
from labcoat.review._lint import lint, pilots_from_store
from labcoat.review._pilot import Pilot, pilot_for
from labcoat.review._plan import HypothesisPlan, Plan, plan

__all__ = [
    "Finding",
    "HypothesisPlan",
    "Pilot",
    "Plan",
    "lint",
    "pilot_for",
    "pilots_from_store",
    "plan",
]
