"""Report sections on eval items beyond the verdict: prompt-format sensitivity (items
logged under template variants) and the eval items no hypothesis judges, as a metric
of their own (experiments without a design, designs with scalar hypotheses).

An arm's item score is the mean over its finished trials (seeds) of that item's
score at each trial's last eval: the comparisons are paired over items and
measure eval noise for these trained models, not seed noise.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table


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
    """Eval items no hypothesis judges, as their own metric (analysis.evaluations_data)."""
    if not data:
        return
    judged = ", ".join(data.get("judged_by", []))
    why = f"; not the hypothesis's metric ({judged}): described, not judged" if judged else ""
    console.print(f"\n[bold]evaluations[/]: eval items (run.log_items), metric "
                  f"{escape(data.get('metric', 'item score'))}{escape(why)}", soft_wrap=True)
    if data.get("arms"):
        console.print(_arms_table(data))
    for message in data.get("warnings", []):
        console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)
    if data["comparisons"]:
        console.print(f"each arm minus {escape(data['control'])}, paired over shared items "
                      "(eval noise only)", soft_wrap=True)
    for c in data["comparisons"]:
        if "note" in c:
            console.print(f"{escape(c['arm'])}: {escape(c['note'])}", soft_wrap=True)
        else:
            _print_comparison(c, console)


def evaluations_title(data: dict[str, Any]) -> str:
    """The per-arm table's title, in both reports."""
    bounds = data.get("bounds")
    within = f", cut to [{bounds[0]:g}, {bounds[1]:g}]" if bounds else ""
    return (f"{data.get('metric', 'item score')} by arm: mean over items, 95% CI across "
            f"seeds{within}")


def _arms_table(data: dict[str, Any]) -> Table:
    table = Table(title=evaluations_title(data), title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("task")
    for a in data["arms"]:
        table.add_column(escape(f"{a['arm']} (n={a['trials']})"), justify="right")
    for task in data["tasks"]:
        table.add_row(escape(task), *(interval_text(a["tasks"].get(task)) for a in data["arms"]))
    return table


def interval_text(i: dict[str, Any] | None) -> str:
    """An interval of plain data as both reports write it."""
    if i is None or i.get("point") is None:
        return "-"
    if i.get("low") is None or i.get("high") is None:
        return f"{i['point']:.3f} (no CI)"
    return f"{i['point']:.3f} [{i['low']:.3f}, {i['high']:.3f}]"


def _print_comparison(c: dict[str, Any], console: Console) -> None:
    control = c["a"]["path"].rsplit("/", 1)[-1]
    table = Table(title=f"{c['arm']} - {control} ({'paired' if c['paired'] else 'UNPAIRED'})",
                  title_justify="left", box=box.SIMPLE_HEAD)
    adjusted = any(t["adjusted"] for t in c["tasks"])
    ci = "CI (Holm over tasks)" if adjusted else "95% CI"
    for column in ("task", "items", control, c["arm"], "diff", ci, "p"):
        table.add_column(escape(column), justify="left" if column == "task" else "right")
    for t in c["tasks"]:
        table.add_row(escape(t["task"]), str(t["items_a"]), f"{t['mean_a']:.3f}",
                      f"{t['mean_b']:.3f}", *difference_cells(t["adjusted"] or t["difference"]))
    if len(c["tasks"]) > 1:
        table.add_row("macro", "", "", "", *difference_cells(c["overall"]))
    console.print(table)


def difference_cells(d: dict[str, Any]) -> list[str]:
    """diff, CI and p of a difference of plain data, as both reports write them."""
    def num(x: Any, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    return [num(d["estimate"], "+.3f"), f"[{num(d['low'], '+.3f')}, {num(d['high'], '+.3f')}]",
            num(d["p_value"], ".2g")]


def _cell(i: dict[str, float]) -> str:
    return f"{i['point']:.3f} [{i['low']:.3f}, {i['high']:.3f}]"
