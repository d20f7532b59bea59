"""Report sections on eval items beyond the verdict: prompt-format sensitivity (items
logged under template variants) and, where no hypothesis judges the items (experiments
without a design, imported or ad-hoc, and designs with scalar hypotheses), the items as a
metric of their own: per arm with intervals across seeds, each arm against the control
paired over items.

An arm's item score is the mean over its finished trials (seeds) of that item's
score at each trial's last eval: the comparisons are paired over items and
measure eval noise for these trained models, not seed noise.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.orm import Session

from labcoat import store
from labcoat.analysis._json import json_safe
from labcoat.store import Experiment, Trial

if TYPE_CHECKING:
    from labcoat.evals import FileComparison


def prompts_data(session: Session, experiment: Experiment, control: str | None
                 ) -> dict[str, Any]:
    """Prompt-format sensitivity from the items logged with a variant; {} when none."""
    from labcoat.evals import TemplateScores, format_sensitivity

    done = [t for t in experiment.trials if t.status == "done"]
    rows = store.variant_eval_items(session, [t.id for t in done])
    if not rows:
        return {}
    arm_of = {t.id: t.arm for t in done}
    sums: dict[str, dict[tuple[str, str, str], list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for r in rows:
        if r.score is not None and np.isfinite(r.score):
            sums[arm_of[r.trial_id]][(r.task, r.item, r.variant)].append(r.score)
    scores = {}
    for arm, cells in sums.items():
        names = sorted({v for _, _, v in cells})
        keys = sorted({(t, i) for t, i, _ in cells})
        keys = [k for k in keys if all((*k, n) in cells for n in names)]
        matrix = np.array([[np.mean(cells[(*k, n)]) for n in names] for k in keys])
        scores[arm] = TemplateScores(names, [k[0] for k in keys], [k[1] for k in keys],
                                     matrix.reshape(len(keys), len(names)))
    if control not in scores:
        control = next(iter(scores))
    try:
        found = format_sensitivity(scores, control=control)
    except ValueError as e:
        return {"note": f"prompt sensitivity not computed: {e}"}
    return {
        "templates": found.templates, "items": found.items,
        "arms": [{"arm": a.arm,
                  "templates": {n: _interval(i) for n, i in a.per_template.items()},
                  "spread": {"estimate": a.spread.estimate, "low": a.spread.low,
                             "high": a.spread.high, "p_value": a.spread.p_value,
                             "best": found.templates[a.spread.best],
                             "worst": found.templates[a.spread.worst]}}
                 for a in found.arms],
        "comparisons": [{"variant": c.variant, "control": c.control, "verdict": c.verdict,
                         "reason": c.reason,
                         "templates": {n: {"estimate": d.estimate, "low": d.low,
                                           "high": d.high, "p_value": d.p_value}
                                       for n, d in c.per_template.items()}}
                        for c in found.comparisons],
        "warnings": found.warnings,
    }


def evaluations_data(session: Session, experiment: Experiment, *, control: str | None = None,
                     judged_by: list[str] | None = None) -> dict[str, Any]:
    """Eval items that no hypothesis judges, as a metric of their own ("item score"): for
    experiments without a design (imported, ad-hoc) and designs whose hypotheses are all on
    scalars (`judged_by` names their metrics). Never mixed into a hypothesis's table.

    Per arm and task: the mean over items of each trial's scores, with a t interval across
    the arm's trials, cut to [0, 1] when every score lies in it (an accuracy cannot leave
    it). Every arm against `control` (else the first arm), paired over the items both
    scored; differences cut to [-1, 1] likewise. {} when no finished trial logged items."""
    from labcoat.evals import ItemScores

    done = [t for t in experiment.trials if t.status == "done"]
    by_arm = arm_item_scores(session, experiment.name, done, ItemScores)
    if not by_arm or (not experiment.design_yaml and len(by_arm) < 2):
        return {}
    arms = list(by_arm)
    if control in by_arm:
        arms.remove(control)
        arms.insert(0, control)
    scores = [float(s) for a in by_arm.values() for s in a.scores]
    bounds = (0.0, 1.0) if 0 <= min(scores) and max(scores) <= 1 else None
    per_arm, tasks, found = _arm_intervals(session, done, bounds)
    out = []
    for arm in arms[1:]:
        out.append({"arm": arm, **_paired(by_arm[arms[0]], by_arm[arm], bounds)})
    return {"metric": "item score", "judged_by": judged_by or [], "tasks": tasks,
            "bounds": list(bounds) if bounds else None, "control": arms[0],
            "arms": [{"arm": arm, **per_arm[arm]} for arm in arms if arm in per_arm],
            "comparisons": out, "warnings": found}


def _arm_intervals(session: Session, done: list[Trial], bounds: tuple[float, float] | None
                   ) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """{arm: {"trials": n, "tasks": {task: interval}}}, the tasks, and the warnings met."""
    from labcoat import stats
    from labcoat.stats import StatsWarning

    _, items = store.primary_values(session, done, source="items", metric="")
    cells = {trial_id: {task: [s for s in per.values() if s is not None and np.isfinite(s)]
                        for task, per in tasks.items()} for trial_id, tasks in items.items()}
    tasks = sorted({task for per in cells.values() for task in per})
    out: dict[str, dict[str, Any]] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StatsWarning)
        for arm in dict.fromkeys(t.arm for t in done):
            trials = [t.id for t in done if t.arm == arm and t.id in cells]
            if not trials:
                continue
            per_task = {}
            for task in tasks:
                means = [float(np.mean(cells[t][task])) for t in trials if cells[t].get(task)]
                if means:
                    i = stats.mean_interval(means, bounds=bounds)
                    per_task[task] = {"point": i.point, "low": i.low, "high": i.high,
                                      "n": len(means)}
            out[arm] = {"trials": len(trials), "tasks": per_task}
    found = [str(w.message) for w in caught if issubclass(w.category, StatsWarning)
             and getattr(w.message, "kind", "") != "few-runs"]
    return json_safe(out), tasks, list(dict.fromkeys(found))


def _paired(a: Any, b: Any, bounds: tuple[float, float] | None) -> dict[str, Any]:
    """B - A paired over items (evals.compare_item_scores), cut to the metric's range."""
    from labcoat.evals import compare_item_scores

    try:
        found = file_comparison_dict(compare_item_scores(a, b))
    except ValueError as e:
        return {"note": str(e)}
    if bounds is not None:
        width = bounds[1] - bounds[0]
        diffs = [found["overall"], *(d for t in found["tasks"]
                                     for d in (t["difference"], t["adjusted"]) if d)]
        for d in diffs:
            d["low"] = None if d["low"] is None else max(d["low"], -width)
            d["high"] = None if d["high"] is None else min(d["high"], width)
    return found


def arm_item_scores(session: Session, experiment: str, trials: list[Trial], cls: Any
                    ) -> dict[str, Any]:
    """{arm: ItemScores} of the plain (variant "") items at each trial's last eval, item
    scores averaged over the arm's trials; arms in trial order."""
    arm_of = {t.id: t.arm for t in trials}
    cells: dict[str, dict[tuple[str, str], list[float]]] = {}
    for r in store.final_eval_items(session, list(arm_of)):
        if r.score is not None and np.isfinite(r.score):
            cells.setdefault(arm_of[r.trial_id], defaultdict(list))[(r.task, r.item)].append(
                r.score)
    out = {}
    for arm in dict.fromkeys(t.arm for t in trials):
        if arm in cells:
            keys = list(cells[arm])
            out[arm] = cls(f"{experiment}/{arm}", "store", "score", [k[0] for k in keys],
                           [k[1] for k in keys],
                           np.array([np.mean(cells[arm][k]) for k in keys]))
    return out


def stored_item_scores(session: Session, experiment: Experiment, name: str) -> Any:
    """ItemScores of arm `name` (its finished trials' item scores averaged), or of the trial
    with key `name`, in `experiment`; LabcoatError naming the arms otherwise."""
    from labcoat.errors import LabcoatError
    from labcoat.evals import ItemScores

    done = [t for t in experiment.trials if t.status == "done"]
    chosen = [t for t in done if t.arm == name] or [t for t in done if t.key == name]
    found = arm_item_scores(session, experiment.name, chosen, ItemScores)
    if not found:
        arms = ", ".join(dict.fromkeys(t.arm for t in done)) or "none finished"
        raise LabcoatError(f"experiment {experiment.name!r} has no finished arm or trial "
                           f"{name!r} with eval items (arms: {arms})")
    (scores,) = found.values()
    return scores


def _interval(i: Any) -> dict[str, float]:
    return {"point": i.point, "low": i.low, "high": i.high}


def file_comparison_dict(c: FileComparison) -> dict[str, Any]:
    def diff(d):
        return {k: getattr(d, k) for k in ("estimate", "low", "high", "se", "p_value", "method",
                                           "n", "correlation", "ci")}

    return json_safe({
        "a": {"path": c.a.path, "format": c.a.format, "metric": c.a.metric},
        "b": {"path": c.b.path, "format": c.b.format, "metric": c.b.metric},
        "paired": c.paired,
        "tasks": [{"task": t.task, "items_a": t.n_a, "items_b": t.n_b, "mean_a": t.mean_a,
                   "mean_b": t.mean_b, "difference": diff(t.difference),
                   "adjusted": diff(t.adjusted.difference) if t.adjusted else None,
                   "family": ({"method": t.adjusted.method, "size": t.adjusted.family_size}
                              if t.adjusted else None)}
                  for t in c.tasks],
        "overall": diff(c.overall),
        "only_a": c.only_a, "only_b": c.only_b, "warnings": c.warnings,
    })
