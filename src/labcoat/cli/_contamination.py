"""`labcoat contamination`: eval items whose n-grams occur in training text.

This verb parses flags, calls
`scan_contamination` and prints; every problem with the inputs ends in one
LabcoatError naming the file, line or flag and the fix (exit status 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.errors import LabcoatError

if TYPE_CHECKING:
    from labcoat.evals import ContaminationReport


def contamination(
    train: Annotated[list[Path], typer.Option(
        "--train", help="training text: a file or directory (repeat the flag for more); "
        "plain text, or JSONL with a text field; .gz too")],
    eval_suite: Annotated[Path, typer.Option(
        "--eval", help="eval suite: a .jsonl/.csv file of items (id, input, target, optional "
        "task, cluster) or a directory with one file per task")],
    n: Annotated[int, typer.Option("--n", help="words per n-gram (GPT-3 and lm-eval-harness "
                                   "use 13; tasks of short items use fewer, down to --min-n)")
                 ] = 13,
    min_n: Annotated[int, typer.Option("--min-n", help="smallest n for tasks of short items")
                     ] = 8,
    scores: Annotated[Path | None, typer.Option(
        "--scores", help="per-item scores of a model on the suite (as `labcoat compare` "
        "reads): compare contaminated with clean items")] = None,
    text_field: Annotated[str, typer.Option("--text-field", help="JSONL field with the text")
                          ] = "text",
    target: Annotated[bool, typer.Option("--target", help="scan the targets (answers) too, "
                                         "not only the inputs")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print machine-readable JSON")
                       ] = False,
) -> None:
    """Find eval items whose normalized word n-grams appear in training text.

    Per item: contaminated or not, n-grams found, the first match and where (file and
    byte offset; JSONL: the record's line). Per task: the contamination rate. With
    --scores: contaminated minus clean mean score with a 95% CI.
    """
    if n < 1:
        raise LabcoatError(f"--n {n}: the n-gram length must be at least 1 (default 13)")
    if min_n < 1:
        raise LabcoatError(f"--min-n {min_n}: must be at least 1 (default 8)")
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    from labcoat.evals import scan_contamination, training_files

    fields = ("input", "target") if target else ("input",)
    err = Console(stderr=True)
    files = training_files(train)
    # Compressed files advance the bar by decompressed bytes: no total for them.
    total = None if any(f.suffix == ".gz" for f in files) else sum(f.stat().st_size
                                                                    for f in files)
    with Progress("scanning", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=err, transient=True, disable=as_json or not err.is_terminal) as bar:
        task = bar.add_task("scan", total=total)
        report = scan_contamination(train, eval_suite, n=n, min_n=min_n, fields=fields,
                                    text_field=text_field, scores=scores,
                                    progress=lambda b: bar.advance(task, b))
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
        return
    _print(report, Console())


def _print(report: ContaminationReport, console: Console) -> None:
    mb = report.bytes_scanned / 1e6
    console.print(f"scanned {len(report.files)} file(s), {mb:,.1f} MB of training text; "
                  f"n = {report.n} (short tasks down to {report.min_n})")
    tasks = Table(title="contamination by task")
    for column in ("task", "n", "items", "contaminated", "rate"):
        tasks.add_column(column, justify="left" if column == "task" else "right")
    for t in report.tasks:
        tasks.add_row(escape(t.task), str(t.n), str(t.items), str(t.contaminated),
                      f"{t.rate:.1%}")
    console.print(tasks)
    dirty = report.contaminated
    if dirty:
        items = Table(title="contaminated items")
        for column in ("task", "item", "n-grams found", "first match", "where"):
            items.add_column(column)
        for item in dirty:
            m = item.example
            where = f"{m.file}:{m.line}" if m.line is not None else f"{m.file} @ byte {m.offset}"
            text = m.text if len(m.text) <= 60 else m.text[:57] + "..."
            items.add_row(escape(item.task), escape(item.id),
                          f"{item.matched}/{item.ngrams} ({item.fraction:.0%})",
                          escape(text), escape(where))
        console.print(items)
    else:
        console.print("no eval item has an n-gram in the training text")
    if report.scores:
        table = Table(title="score: contaminated minus clean items (95% CI)")
        for column in ("task", "clean", "contaminated", "clean mean", "contaminated mean",
                       "difference"):
            table.add_column(column, justify="left" if column == "task" else "right")
        for s in report.scores:
            d = s.difference
            diff = ("-" if d is None else
                    f"{d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
            table.add_row(escape(s.task), str(s.clean), str(s.contaminated),
                          _fmt(s.clean_mean), _fmt(s.contaminated_mean), diff)
        console.print(table)
        if any(s.difference is None for s in report.scores):
            console.print("[dim]-: fewer than 2 scored items in a group, no interval[/]")


def _fmt(value: float) -> str:
    return "-" if value != value else f"{value:.3f}"
