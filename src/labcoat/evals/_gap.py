"""The contamination gap: one model on original items and on fresh isomorphic twins, paired.

n-gram scans (`scan_contamination`) find eval text in training text; they need the
training data and miss paraphrases. The gap is the behavioural test (GSM-Symbolic,
Mirzadeh et al. 2024): a model that learned the skill scores the same on an item and on a
fresh instance of the same template, with new numbers and names and a recomputed answer; a
model that memorized the published items scores higher on them. Each original item i is
paired with the mean score of its K twins, so item difficulty cancels, and the difference
original - fresh gets the paired interval of `stats.paired_difference` (Miller 2024,
sec. 4.2; for 0/1 scores with one twin each, McNemar's exact test and Tango's interval).

A positive gap whose interval excludes 0 says: these originals are easier for this model
than their twins. Memorization is the usual cause; a generator whose twins are harder than
their originals is the other (check it on a model that cannot have seen the originals: its
gap should include 0). A negative gap means the twins are easier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from labcoat.errors import LabcoatError
from labcoat.stats import Difference, paired_difference

TWIN_SEPARATOR = "~"  # a twin's id is "<original id>~<j>" (the fresh generators' ids)


@dataclass(frozen=True)
class TaskGap:
    """The gap on one task's items."""

    task: str
    items: int
    original: float
    fresh: float
    difference: Difference | None  # None below 2 items


@dataclass(frozen=True)
class ContaminationGap:
    """Original minus fresh score, paired by item, with its interval and verdict.

    original, fresh: mean score on the originals and on their twins (each item's twins
    averaged first); difference: original - fresh (`stats.Difference`); decision:
    "gap" (interval above 0), "no-gap" (interval holds 0) or "fresh-easier" (below 0).
    """

    items: int
    twins: int
    original: float
    fresh: float
    difference: Difference
    decision: str
    tasks: tuple[TaskGap, ...]
    unpaired: tuple[str, ...] = ()  # originals without twins (left out)

    @property
    def line(self) -> str:
        """The verdict in one line."""
        d = self.difference
        ci = f"{d.ci:.0%} CI {d.low:+.3f} to {d.high:+.3f}, p = {d.p_value:.2g}"
        what = (f"original {self.original:.3f} vs fresh {self.fresh:.3f} on {self.items} "
                f"items x {self.twins} twins: gap {d.estimate:+.3f} ({ci})")
        if self.decision == "gap":
            return (f"contamination gap: {what}; the originals are easier than isomorphic "
                    "fresh items for this model (memorized answers, unless the twins are "
                    "harder: a clean model's gap should include 0)")
        if self.decision == "fresh-easier":
            return (f"fresh items easier: {what}; the twins are not as hard as their "
                    "originals (check the generator's difficulty knobs)")
        bound = max(abs(d.low), abs(d.high))
        return (f"no contamination gap: {what}; the interval includes 0 (a gap above "
                f"{bound:.3f} is unlikely)")

    def as_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "line": self.line, "items": self.items,
                "twins": self.twins, "original": self.original, "fresh": self.fresh,
                "difference": _difference_dict(self.difference),
                "tasks": [{"task": t.task, "items": t.items, "original": t.original,
                           "fresh": t.fresh,
                           "difference": None if t.difference is None
                           else _difference_dict(t.difference)} for t in self.tasks],
                "unpaired": list(self.unpaired)}


def contamination_gap(original: ArrayLike, fresh: ArrayLike | Sequence[ArrayLike], *,
                      tasks: Sequence[str] | None = None, ci: float = 0.95,
                      clusters: ArrayLike | None = None) -> ContaminationGap:
    """The paired gap of scores on original items minus scores on their fresh twins.

    original: (n,) one score per original item. fresh: (n, K) the scores of each item's K
    twins, or n sequences (K may differ per item; each needs at least one twin).
    tasks: (n,) task of each item, for the per-task rows. clusters: (n,) optional group
    ids of items that share a passage or template (cluster-robust interval).
    """
    x = np.asarray(original, dtype=float)
    if x.ndim != 1 or x.size < 2:
        raise LabcoatError(f"the gap needs scores of 2 or more original items, got shape "
                           f"{x.shape}")
    rows = [np.asarray(f, dtype=float).ravel() for f in fresh]
    if len(rows) != x.size:
        raise LabcoatError(f"{x.size} original items but twins for {len(rows)}; give each "
                           "original item its twins' scores")
    if any(r.size == 0 for r in rows):
        raise LabcoatError("an original item has no twin scored; score every twin or drop "
                           "the item")
    twin_means = np.array([r.mean() for r in rows])
    difference = paired_difference(twin_means, x, clusters, ci)
    labels = list(tasks) if tasks is not None else ["all"] * x.size
    if len(labels) != x.size:
        raise LabcoatError(f"tasks has {len(labels)} labels for {x.size} items")
    per_task = []
    for task in dict.fromkeys(labels):
        mask = np.array([t == task for t in labels])
        d = paired_difference(twin_means[mask], x[mask], ci=ci) if mask.sum() >= 2 else None
        per_task.append(TaskGap(task, int(mask.sum()), float(x[mask].mean()),
                                float(twin_means[mask].mean()), d))
    return ContaminationGap(items=int(x.size), twins=max(r.size for r in rows),
                            original=float(x.mean()), fresh=float(twin_means.mean()),
                            difference=difference, decision=_decision(difference),
                            tasks=tuple(per_task))


def gap_from_scores(original: Mapping[tuple[str, str], float],
                    fresh: Mapping[tuple[str, str], float],
                    parents: Mapping[tuple[str, str], str] | None = None, *,
                    ci: float = 0.95) -> ContaminationGap:
    """The gap from per-item scores keyed by (task, item id).

    parents: (task, fresh id) -> original id; None reads it from the fresh ids
    (``<original id>~<j>``, as `labcoat evals fresh` writes them). Originals without a
    scored twin are left out and listed in `unpaired`; a twin whose original is not scored
    is an error (a mismatched file).
    """
    twins: dict[tuple[str, str], list[float]] = {}
    for (task, item), score in fresh.items():
        parent = parents.get((task, item)) if parents is not None else _parent(item)
        if parent is None:
            raise LabcoatError(f"fresh item {task}/{item} names no original item (ids are "
                               f"<original id>{TWIN_SEPARATOR}<j>, or give the fresh items "
                               "file with their 'parent' field)")
        if (task, parent) not in original:
            raise LabcoatError(f"fresh item {task}/{item} is a twin of {task}/{parent}, which "
                               "the original scores do not have; score the originals of the "
                               "same suite")
        twins.setdefault((task, parent), []).append(float(score))
    keys = [k for k in original if k in twins]
    if len(keys) < 2:
        raise LabcoatError(f"only {len(keys)} original items have scored twins; the gap "
                           "needs 2 or more")
    gap = contamination_gap([original[k] for k in keys], [twins[k] for k in keys],
                            tasks=[k[0] for k in keys], ci=ci)
    unpaired = tuple(f"{t}/{i}" for t, i in original if (t, i) not in twins)
    return ContaminationGap(**{**gap.__dict__, "unpaired": unpaired})


def _parent(item: str) -> str | None:
    head, sep, tail = item.rpartition(TWIN_SEPARATOR)
    return head if sep and head and tail.isdigit() else None


def _decision(d: Difference) -> str:
    if d.low > 0:
        return "gap"
    if d.high < 0:
        return "fresh-easier"
    return "no-gap"


def _difference_dict(d: Difference) -> dict[str, Any]:
    return {"estimate": d.estimate, "low": d.low, "high": d.high, "se": d.se,
            "p_value": d.p_value, "method": d.method, "n": d.n, "ci": d.ci}
