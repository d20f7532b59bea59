"""Evaluations: per-item results from files (labcoat, CSV/JSON, lm-eval-harness) and their
comparison."""

from labcoat.evals._compare import FileComparison, TaskComparison, compare_item_scores
from labcoat.evals._importers import ItemScores, load_item_scores

__all__ = [
    "FileComparison",
    "ItemScores",
    "TaskComparison",
    "compare_item_scores",
    "load_item_scores",
]
