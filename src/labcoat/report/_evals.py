"""Report sections on eval items beyond the verdict: prompt-format sensitivity (items
logged under template variants) and, for experiments without a design (imported or
ad-hoc), each arm against the first, paired over items.

An arm's item score is the mean over its finished trials (seeds) of that item's
score at each trial's last eval: the comparisons are paired over items and
measure eval noise for these trained models, not seed noise.
"""

from __future__ import annotations

from typing import Any

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
