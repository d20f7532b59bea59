"""Two models' per-item results, aligned item by item and compared (`labcoat compare`).

Items both files scored are compared paired (Miller 2024: the shared item
difficulty cancels). Only when the files share no items at all is the
comparison unpaired, and it says so. With several tasks, the per-task
intervals are Holm-adjusted as one family.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from labcoat import stats
from labcoat.evals._importers import ItemScores
from labcoat.stats import Adjusted, Difference, StatsWarning

FAMILY_METHOD = "holm"


@dataclass
class TaskComparison:
    task: str
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    difference: Difference  # b - a, unadjusted
    adjusted: Adjusted | None = None  # within the family of tasks (several tasks only)


@dataclass
class FileComparison:
    """B minus A per task and overall."""

    a: ItemScores
    b: ItemScores
    paired: bool
    tasks: list[TaskComparison]
    overall: Difference
    only_a: int
    only_b: int
    warnings: list[str] = field(default_factory=list)


def compare_item_scores(a: ItemScores, b: ItemScores, ci: float = 0.95) -> FileComparison:
    """B - A per task (paired on shared items) and macro-averaged over tasks."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StatsWarning)
        result = _compare(a, b, ci)
    found = [str(w.message) for w in caught if issubclass(w.category, StatsWarning)]
    result.warnings = list(dict.fromkeys(found))
    return result


def _compare(a: ItemScores, b: ItemScores, ci: float) -> FileComparison:
    keys_a, keys_b = a.keys(), _keys_as_in(b, a)
    index_a = {key: i for i, key in enumerate(keys_a)}
    index_b = {key: i for i, key in enumerate(keys_b)}
    shared = [key for key in keys_a if key in index_b]
    paired = bool(shared)
    if paired and len(shared) < max(len(keys_a), len(keys_b)):
        warnings.warn(
            f"the files score different items ({len(keys_a) - len(shared)} only in A, "
            f"{len(keys_b) - len(shared)} only in B); comparing the {len(shared)} shared items",
            StatsWarning, stacklevel=3)
    elif not paired:
        warnings.warn("the files share no items: comparing them unpaired, which keeps the "
                      "item-difficulty variance a paired comparison would cancel",
                      StatsWarning, stacklevel=3)
    tasks = []
    for task in dict.fromkeys(t for t, _ in (shared if paired else keys_a)):
        if paired:
            keys = [k for k in shared if k[0] == task]
            xa, xb = a.scores[[index_a[k] for k in keys]], b.scores[[index_b[k] for k in keys]]
            clusters = [a.clusters[index_a[k]] for k in keys] if a.clusters else None
            diff = stats.paired_difference(xa, xb, clusters=clusters, ci=ci)
        else:
            xa = a.scores[[i for k, i in index_a.items() if k[0] == task]]
            xb = b.scores[[i for k, i in index_b.items() if k[0] == task]]
            if xb.size < 2 or xa.size < 2:
                continue
            diff = stats.unpaired_difference(xa, xb, ci=ci)
        tasks.append(TaskComparison(task, xa.size, xb.size, float(np.mean(xa)),
                                    float(np.mean(xb)), diff))
    if not tasks:
        raise ValueError(f"{a.path} and {b.path} have no task with 2 or more items in common; "
                         "check that task names and item ids match")
    if len(tasks) > 1:
        for task, adjusted in zip(tasks, stats.adjust([t.difference for t in tasks],
                                                       FAMILY_METHOD), strict=True):
            task.adjusted = adjusted
    overall = tasks[0].difference if len(tasks) == 1 else stats.macro_average(
        [t.difference for t in tasks], ci=ci)
    shared_count = len(shared) if paired else 0
    return FileComparison(a, b, paired, tasks, overall, len(keys_a) - shared_count,
                          len(keys_b) - shared_count)


def _keys_as_in(b: ItemScores, a: ItemScores) -> list[tuple[str, str]]:
    """B's keys; when each file holds one task under different names (e.g. lm-eval file
    names), B's task is renamed to A's so their items align."""
    task_a, task_b = set(a.tasks), set(b.tasks)
    if len(task_a) == 1 and len(task_b) == 1 and task_a != task_b:
        (name_a,), (name_b,) = task_a, task_b
        warnings.warn(f"comparing task {name_a!r} of A with task {name_b!r} of B",
                      StatsWarning, stacklevel=4)
        return [(name_a, item) for item in b.items]
    return b.keys()
