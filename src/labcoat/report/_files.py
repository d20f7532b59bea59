"""Rendering of `labcoat compare`: two result files, item by item."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.evals import FileComparison
from labcoat.report._status import print_wide


def print_file_comparison(c: FileComparison, console: Console) -> None:
    console.print(f"A: {escape(c.a.path)} ({c.a.format}, metric {escape(c.a.metric)})",
                  soft_wrap=True)
    console.print(f"B: {escape(c.b.path)} ({c.b.format}, metric {escape(c.b.metric)})",
                  soft_wrap=True)
    kind = "paired on shared items" if c.paired else "UNPAIRED (no shared items)"
    family = ""
    if any(t.adjusted for t in c.tasks):
        example = next(t.adjusted for t in c.tasks if t.adjusted)
        family = (f"Per-task CIs and p: Holm-adjusted over {example.family_size} tasks "
                  f"({100 * example.ci_level:.3g}% CIs for a {100 * example.family_ci:.3g}% "
                  "family level); macro: unadjusted.")
    table = Table(title=f"B - A, {kind}: difference, CI, p", title_justify="left",
                  box=box.SIMPLE_HEAD, caption=family or None, caption_justify="left")
    ci_header = "adjusted CI" if family else f"{100 * c.overall.ci:.3g}% CI"
    for column in ("task", "items", "A", "B", "diff", ci_header, "p", "corr"):
        if column == "task":
            table.add_column(column, no_wrap=True)  # whole: print_wide makes the room
        else:
            table.add_column(column, justify="right", no_wrap=True)
    for t in c.tasks:
        d = t.adjusted.difference if t.adjusted else t.difference
        n = str(t.n_a) if c.paired else f"{t.n_a}/{t.n_b}"
        table.add_row(escape(t.task), n, f"{t.mean_a:.3f}", f"{t.mean_b:.3f}",
                      f"{d.estimate:+.3f}", f"[{d.low:+.3f}, {d.high:+.3f}]", f"{d.p_value:.2g}",
                      f"{d.correlation:.2f}")
    if len(c.tasks) > 1:
        d = c.overall
        table.add_row("[bold]macro[/]", str(sum(t.n_a for t in c.tasks)), "", "",
                      f"{d.estimate:+.3f}", f"[{d.low:+.3f}, {d.high:+.3f}]", f"{d.p_value:.2g}",
                      "")
    print_wide(table, console)
    for message in c.warnings:
        console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)
