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
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy.orm import Session

from labcoat import store
from labcoat.store import Experiment, Trial


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
    from labcoat.report._files import file_comparison_dict
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


def print_prompts(data: dict[str, Any], console: Console) -> None:
    if not data:
        return
    if "note" in data:
        console.print(escape(data["note"]), soft_wrap=True)
        return
    table = Table(title=f"prompt-format sensitivity ({data['items']} items, paired over "
                  "templates): mean [95% CI]", title_justify="left")
    table.add_column("template")
    for a in data["arms"]:
        table.add_column(escape(a["arm"]), justify="right", no_wrap=True)
    for name in data["templates"]:
        table.add_row(escape(name), *(_cell(a["templates"][name]) for a in data["arms"]))
    table.add_row("spread (max-min)",
                  *(f"{a['spread']['estimate']:.3f} [{a['spread']['low']:.3f}, "
                    f"{a['spread']['high']:.3f}]" for a in data["arms"]))
    table.add_row("p (no template effect)",
                  *(f"{a['spread']['p_value']:.2g}" for a in data["arms"]))
    console.print(table)
    for c in data["comparisons"]:
        style = "green" if c["verdict"] == "consistent" else "bold yellow"
        console.print(f"template check {escape(c['variant'])} vs {escape(c['control'])}: "
                      f"[{style}]{c['verdict'].upper()}[/] - {escape(c['reason'])}",
                      soft_wrap=True)
    for message in data.get("warnings", []):
        console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)


def print_evaluations(data: dict[str, Any], console: Console) -> None:
    if not data:
        return
    console.print(f"[bold]evaluations[/]: each arm minus {escape(data['control'])}, paired "
                  "over shared items", soft_wrap=True)
    for c in data["comparisons"]:
        if "note" in c:
            console.print(f"{escape(c['arm'])}: {escape(c['note'])}", soft_wrap=True)
        else:
            _print_comparison(c, console)


def _print_comparison(c: dict[str, Any], console: Console) -> None:
    table = Table(title=f"{c['arm']} - {c['a']['path'].rsplit('/', 1)[-1]} "
                  f"({'paired' if c['paired'] else 'UNPAIRED'})", title_justify="left")
    adjusted = any(t["adjusted"] for t in c["tasks"])
    ci = "CI (Holm over tasks)" if adjusted else "95% CI"
    for column in ("task", "items", "A", "B", "diff", ci, "p"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for t in c["tasks"]:
        d = t["adjusted"] or t["difference"]
        table.add_row(escape(t["task"]), str(t["items_a"]), f"{t['mean_a']:.3f}",
                      f"{t['mean_b']:.3f}", f"{d['estimate']:+.3f}",
                      f"[{d['low']:+.3f}, {d['high']:+.3f}]", f"{d['p_value']:.2g}")
    if len(c["tasks"]) > 1:
        d = c["overall"]
        table.add_row("macro", "", "", "", f"{d['estimate']:+.3f}",
                      f"[{d['low']:+.3f}, {d['high']:+.3f}]", f"{d['p_value']:.2g}")
    console.print(table)


def _cell(i: dict[str, float]) -> str:
    return f"{i['point']:.3f} [{i['low']:.3f}, {i['high']:.3f}]"


def _interval(i: Any) -> dict[str, float]:
    return {"point": i.point, "low": i.low, "high": i.high}
