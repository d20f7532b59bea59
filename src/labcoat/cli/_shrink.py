"""`labcoat shrink EXP/TRIAL`: the smallest configuration that still fails the same way."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.cli._common import JsonFlag, console, print_json

if TYPE_CHECKING:
    from labcoat.shrink import Candidate, ShrinkResult

OUTCOME_STYLE = {"fails": "red", "passes": "green", "slip": "yellow"}


def shrink(
    trial: Annotated[str, typer.Argument(metavar="EXP/TRIAL", help="a failed or alerted trial")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="where to write the minimal reproduction's design (default: "
        "EXP-TRIAL-min.yaml here)")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Shrink a failed trial to its smallest reproduction: halve the params its design's
    `shrink:` block names toward their floors, then switch features off (ddmin), keeping a
    change only while the failure keeps its signature (guard rule or diagnosed cause, at a
    comparable relative step). Every candidate is a real trial of EXP-shrink. Ctrl-C keeps
    what was found.

    Exit status: 0 with a reproduction found, 1 when the failure did not reproduce.
    """
    from labcoat.shrink import shrink_trial

    progress = _Progress(Console(stderr=True))
    with progress:
        result = shrink_trial(trial, out=out, on_start=progress.start, on_done=progress.done)
    if as_json:
        print_json(result.as_dict())
    else:
        print_result(result, console)
    if not result.reproduced:
        raise typer.Exit(1)


class _Progress:
    """A live line: the candidate running, how many ran, the smallest failing one so far."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.status: Any = None
        self.ran = 0
        self.best = ""

    def __enter__(self) -> _Progress:
        self.status = self.out.status("shrink: reading the trial")
        self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.status.__exit__(*exc)

    def start(self, number: int, change: str) -> None:
        best = f"; smallest failing so far: {self.best}" if self.best else ""
        self.status.update(escape(f"shrink: candidate {number} ({change}){best}"))

    def done(self, c: Candidate) -> None:
        self.out.print(escape(f"  c{c.number:02d} {c.change}: {_outcome(c)}"))
        if c.outcome == "fails":
            self.best = f"c{c.number:02d}"


def _outcome(c: Candidate) -> str:
    text = c.outcome
    if c.outcome == "passes" and c.stopped:
        text += " (stopped at the time budget)"
    if c.signature is not None:
        text += f": {c.signature.describe()}"
    if c.reused:
        text += " [earlier run]"
    return text


def _short(c: Candidate) -> str:
    sig = c.signature
    if sig is None:
        return "-"
    at = "" if sig.step is None else f" @{sig.step}"
    rel = "" if sig.relative is None else f" ({sig.relative:.0%})"
    return f"{sig.name}{at}{rel}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def print_result(result: ShrinkResult, out: Console) -> None:
    out.print(f"[bold]labcoat shrink {escape(result.trial)}[/]: "
              f"{escape(result.signature.describe())}")
    table = Table("#", "change", "outcome", "failure", "time to failure", "wall",
                  title=f"{len(result.candidates)} candidate(s), trials of "
                        f"{escape(result.experiment)}; {len(result.slips)} slip(s)")
    for c in result.candidates:
        style = OUTCOME_STYLE.get(c.outcome, "")
        outcome = c.outcome + (" (budget)" if c.stopped and c.outcome == "passes" else "") + (
            " (earlier)" if c.reused else "")
        table.add_row(f"c{c.number:02d}", escape(c.change), f"[{style}]{outcome}[/]",
                      escape(_short(c)), _seconds(c.time_to_failure), _seconds(c.wall))
    out.print(table)
    if not result.reproduced:  # it did not fail again, or Ctrl-C came first
        out.print(f"[yellow]{escape(result.minimality())}[/]")
        return
    changed = [f"{k} {result.original[k]} -> {v}" for k, v in result.minimal.items()
               if result.original[k] != v]
    out.print(f"minimal reproduction: {escape(', '.join(changed) or 'the original settings')}")
    ttf, wall = result.time_to_failure, result.wall
    line = (f"time to failure {_seconds(ttf.original)} -> {_seconds(ttf.minimal)}"
            + (f" ({ttf.ratio:.1f}x cheaper)" if ttf.ratio else "")
            + f"; wall {_seconds(wall.original)} -> {_seconds(wall.minimal)}"
            + (f" ({wall.ratio:.1f}x)" if wall.ratio else ""))
    if result.parameters is not None and result.parameters.ratio:
        line += (f"; parameters {result.parameters.original:,.0f} -> "
                 f"{result.parameters.minimal:,.0f} ({result.parameters.ratio:.1f}x)")
    out.print(line)
    out.print(escape(result.minimality()))
    if result.stopped:
        out.print(f"[yellow]search ended early: {escape(result.stopped)}[/]")
    if result.design_path:
        out.print(f"design: {escape(result.design_path)}")
    if result.command:
        out.print(f"rerun it: {escape(result.command)}")
