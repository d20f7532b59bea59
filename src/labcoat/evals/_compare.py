"""Two models' per-item results, aligned item by item and compared (`labcoat compare`)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from labcoat import stats
from labcoat.evals._importers import ItemScores
from labcoat.stats import Difference, StatsWarning


@dataclass
class TaskComparison:
    task: str
    n_shared: int
    mean_a: float
    mean_b: float
    difference: Difference  # b - a


@dataclass
class FileComparison:
    """B minus A per task and overall; `paired` is False when no items were shared."""

    a: ItemScores
    b: ItemScores
    tasks: list[TaskComparison]
    overall: Difference
    only_a: int
    only_b: int
    warnings: list[str] = field(default_factory=list)


def compare_item_scores(a: ItemScores, b: ItemScores, ci: float = 0.95) -> FileComparison:
    """Paired differences on the items both files scored, per task and macro-averaged."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StatsWarning)
        result = _compare(a, b, ci)
    result.warnings = [str(w.message) for w in caught if issubclass(w.category, StatsWarning)]
    return result


def _compare(a: ItemScores, b: ItemScores, ci: float) -> FileComparison:
    index_a = {key: i for i, key in enumerate(a.keys())}
    index_b = {key: i for i, key in enumerate(_keys_as_in(b, a))}
    shared = [key for key in index_a if key in index_b]
    only_a, only_b = len(index_a) - len(shared), len(index_b) - len(shared)
    if only_a or only_b:
        warnings.warn(
            f"the files score different items ({only_a} only in A, {only_b} only in B); "
            f"comparing the {len(shared)} shared items", StatsWarning, stacklevel=3)
    if len(shared) < 2:
        raise ValueError(
            f"{a.path} and {b.path} share {len(shared)} item(s); a paired comparison needs "
            "the same items (check that item ids match, e.g. doc_id)"
        )
    tasks = []
    for task in dict.fromkeys(t for t, _ in shared):
        keys = [k for k in shared if k[0] == task]
        xa = a.scores[[index_a[k] for k in keys]]
        xb = b.scores[[index_b[k] for k in keys]]
        clusters = ([a.clusters[index_a[k]] for k in keys] if a.clusters else None)
        diff = stats.paired_difference(xa, xb, clusters=clusters, ci=ci)
        tasks.append(TaskComparison(task, len(keys), float(np.mean(xa)), float(np.mean(xb)), diff))
    overall = tasks[0].difference if len(tasks) == 1 else stats.macro_average(
        [t.difference for t in tasks], ci=ci)
    return FileComparison(a, b, tasks, overall, only_a, only_b)


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
