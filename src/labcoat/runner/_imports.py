"""`labcoat import`: per-item results computed elsewhere (lm-eval-harness --log_samples,
Inspect AI logs, labcoat's CSV/JSON) become a finished trial of an experiment in the
store, so `labcoat compare --experiment` and `labcoat report` pair them item by item."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labcoat import store
from labcoat.errors import LabcoatError


@dataclass
class ImportSummary:
    experiment: str
    trial: str
    tasks: dict[str, int]  # task -> items
    format: str
    metric: str
    notes: list[str]


def import_results(paths: list[str | Path], *, experiment: str, arm: str,
                   seed: int | None = None, metric: str | None = None,
                   filter: str | None = None,  # noqa: A002 - lm-eval's word
                   replace: bool = False) -> ImportSummary:
    """Read every path (file or directory; see labcoat.evals.load_item_scores) as the results
    of one model and store them as trial `arm` (`arm-sSEED`) of `experiment`. Different
    scores for an arm and seed that already hold some are refused unless `replace`."""
    from labcoat.evals import load_item_scores, merge_item_scores

    if not paths:
        raise LabcoatError("nothing to import: give result files or directories")
    if not arm.strip():
        raise LabcoatError("--arm must name the model or arm these results belong to")
    scores = merge_item_scores([load_item_scores(p, metric=metric, filter=filter)
                                for p in paths])
    rows = [{"task": t, "item": i, "score": float(s)}
            for t, i, s in zip(scores.tasks, scores.items, scores.scores, strict=True)]
    source = {"paths": [str(p) for p in paths], "format": scores.format,
              "metric": scores.metric, "notes": list(scores.notes)}
    db = store.open_store()
    try:
        with db.session() as session:
            trial = store.record_import(session, experiment=experiment, arm=arm, seed=seed,
                                        rows=rows, source=source, replace=replace)
            key = trial.key
            session.commit()
    finally:
        db.close()
    tasks: dict[str, int] = {}
    for t in scores.tasks:
        tasks[t] = tasks.get(t, 0) + 1
    return ImportSummary(experiment, key, tasks, scores.format, scores.metric,
                         list(scores.notes))
