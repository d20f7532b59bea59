"""Rendering of `labcoat compare`: two result files, item by item."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.evals import FileComparison
from labcoat.report._terminal import _json_safe


def print_file_comparison(c: FileComparison, console: Console) -> None:
    console.print(f"A: {escape(c.a.path)} ({c.a.format}, metric {escape(c.a.metric)})",
                  soft_wrap=True)
    console.print(f"B: {escape(c.b.path)} ({c.b.format}, metric {escape(c.b.metric)})",
                  soft_wrap=True)
    table = Table(title="B - A on shared items: paired difference, 95% CI, p",
                  title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("task", "items", "A", "B", "diff", "95% CI", "p", "corr"):
        if column == "task":
            table.add_column(column, overflow="fold")
        else:
            table.add_column(column, justify="right", no_wrap=True)
    for t in c.tasks:
        d = t.difference
        table.add_row(escape(t.task), str(t.n_shared), f"{t.mean_a:.3f}", f"{t.mean_b:.3f}",
                      f"{d.estimate:+.3f}", f"[{d.low:+.3f}, {d.high:+.3f}]", f"{d.p_value:.2g}",
                      f"{d.correlation:.2f}")
    if len(c.tasks) > 1:
        d = c.overall
        table.add_row("[bold]macro[/]", str(sum(t.n_shared for t in c.tasks)), "", "",
                      f"{d.estimate:+.3f}", f"[{d.low:+.3f}, {d.high:+.3f}]", f"{d.p_value:.2g}",
                      "")
    console.print(table)
    for message in c.warnings:
        console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)


def file_comparison_dict(c: FileComparison) -> dict[str, Any]:
    def diff(d):
        return {k: getattr(d, k) for k in ("estimate", "low", "high", "se", "p_value", "method",
                                           "n", "correlation", "ci")}

    return _json_safe({
        "a": {"path": c.a.path, "format": c.a.format, "metric": c.a.metric},
        "b": {"path": c.b.path, "format": c.b.format, "metric": c.b.metric},
        "tasks": [{"task": t.task, "items": t.n_shared, "mean_a": t.mean_a, "mean_b": t.mean_b,
                   "difference": diff(t.difference)} for t in c.tasks],
        "overall": diff(c.overall),
        "only_a": c.only_a, "only_b": c.only_b, "warnings": c.warnings,
    })
