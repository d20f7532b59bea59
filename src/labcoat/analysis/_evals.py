"""Report sections on eval items beyond the verdict: prompt-format sensitivity (items
logged under template variants) and, for experiments without a design (imported or
ad-hoc), each arm against the first, paired over items.

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


def evaluations_data(session: Session, experiment: Experiment) -> dict[str, Any]:
    """Experiments without a design (imported, ad-hoc): every arm against the first, paired
    over the items both scored; {} with a design, or with fewer than two arms with items."""
    from labcoat.evals import ItemScores, compare_item_scores
    from labcoat.stats import StatsWarning

    if experiment.design_yaml:
        return {}
    done = [t for t in experiment.trials if t.status == "done"]
    by_arm = arm_item_scores(session, experiment.name, done, ItemScores)
    if len(by_arm) < 2:
        return {}
    arms = list(by_arm)
    out = []
    for arm in arms[1:]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StatsWarning)
            try:
                result = compare_item_scores(by_arm[arms[0]], by_arm[arm])
            except ValueError as e:
                out.append({"arm": arm, "note": str(e)})
                continue
        out.append({"arm": arm, **file_comparison_dict(result)})
    return {"control": arms[0], "comparisons": out}


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
