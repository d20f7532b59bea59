"""Each trial's primary metric, the number a hypothesis is judged on."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy.orm import Session

from labcoat.store._models import Trial
from labcoat.store._queries import final_item_scores, last_values

TrialItemScores = dict[int, dict[str, dict[str, float]]]  # trial id -> task -> item -> score


def primary_values(session: Session, trials: Sequence[Trial], *, source: str, metric: str
                   ) -> tuple[dict[int, float], TrialItemScores]:
    """Per trial id: the metric (source "scalar": its last logged value; "items": the mean
    over tasks of each task's mean item score at the trial's last eval), and the final
    per-item scores of every trial that logged any."""
    ids = [t.id for t in trials]
    items: TrialItemScores = defaultdict(lambda: defaultdict(dict))
    for trial_id, task, item, score in final_item_scores(session, ids):
        items[trial_id][task][item] = score
    if source == "items":
        values = {tid: _mean([_mean(list(s.values())) for s in per_task.values()])
                  for tid, per_task in items.items()}
    else:
        values = last_values(session, ids, metric)
    return values, items


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
