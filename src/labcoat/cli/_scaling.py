"""`labcoat scaling ...`: scaling-law fits on numbers from a CSV file.

These verbs parse flags and the file, call `labcoat.scaling`, and print with
`labcoat.report` (which owns rendering).
Every problem with the input ends in one LabcoatError naming the file, row or
column and the fix (the CLI prints it and exits with status 2).
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from labcoat.errors import LabcoatError

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Scaling laws: fit L(N) or L(N, D) with bootstrap intervals and a backtest.",
)


class FormChoice(StrEnum):
    power = "power"
    chinchilla = "chinchilla"


class ByChoice(StrEnum):
    N = "N"
    compute = "compute"


@app.command("fit")
def fit_command(
    file: Annotated[Path, typer.Argument(help="CSV file with a header row, one run per row")],
    n: Annotated[str, typer.Option("--n", help="column with model size N (parameters)")],
    loss: Annotated[str, typer.Option("--loss", help="column with the loss to fit")],
    d: Annotated[str | None, typer.Option("--d", help="column with training tokens D "
                                          "(needed for --form chinchilla)")] = None,
    c: Annotated[str | None, typer.Option("--c", help="column with training compute C "
                                          "(FLOPs), instead of --d: D = C / (6 N)")] = None,
    form: Annotated[FormChoice | None, typer.Option(
        help="power: L = E + A/N^alpha; chinchilla: L = E + A/N^alpha + B/D^beta "
             "(default: chinchilla with --d, else power)")] = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="bootstrap replicates for the "
                                           "intervals (0: none; Besiroglu et al. used 4000)")
                         ] = 1000,
    seed: Annotated[int, typer.Option(min=0, help="seed of the bootstrap")] = 0,
    ci: Annotated[float, typer.Option(min=0.5, max=0.999, help="interval level")] = 0.95,
    huber_delta: Annotated[float, typer.Option(help="Huber threshold on log residuals "
                                               "(Hoffmann et al. 2022: 1e-3)")] = 1e-3,
    holdout: Annotated[int, typer.Option(min=1, help="largest scales the backtest holds out")
                       ] = 1,
    by: Annotated[ByChoice, typer.Option(help="what a scale is in the backtest: N, or compute "
                                         "6 N D")] = ByChoice.N,
    compute: Annotated[list[float] | None, typer.Option(
        help="compute budget (FLOPs) for the compute-optimal allocation, repeatable "
             "(chinchilla form; default: the largest in the file and 10x it)")] = None,
    target: Annotated[list[float] | None, typer.Option(
        help="N to predict at, repeatable (power form; default: the largest N and 10x it)")
                      ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print machine-readable JSON")
                       ] = False,
) -> None:
    """Fit a scaling law to FILE: parameters with bootstrap intervals, derived quantities,
    a leave-largest-out backtest, and warnings about the range of the data."""
    chosen = None if form is None else form.value
    if c is not None and d is not None:
        raise LabcoatError("give either --d (tokens) or --c (compute, D = C / 6N), not both")
    if chosen == "chinchilla" and d is None and c is None:
        raise LabcoatError("--form chinchilla fits L(N, D) and needs --d COLUMN (training "
                           "tokens) or --c COLUMN (compute); add one or use --form power")
    if chosen == "power" and (d is not None or c is not None):
        raise LabcoatError("--form power fits L(N) and takes no --d or --c; drop it or use "
                           "--form chinchilla")
    if by is ByChoice.compute and d is None and c is None:
        raise LabcoatError("--by compute needs --d or --c COLUMN (compute is 6 N D); add one "
                           "or use --by N")
    if huber_delta <= 0 or not math.isfinite(huber_delta):
        raise LabcoatError(f"--huber-delta {huber_delta:g} must be > 0, e.g. 1e-3")
    columns = {"--n": n, "--loss": loss} | ({"--d": d} if d is not None else {}) | (
        {"--c": c} if c is not None else {})
    data = read_columns(file, columns)
    N, L = data["--n"], data["--loss"]
    D = data.get("--d")
    if c is not None:  # Hoffmann et al. 2022: C = 6 N D
        D = [flops / (6 * size) for flops, size in zip(data["--c"], N, strict=True)]
    chosen = chosen or ("chinchilla" if D is not None else "power")
    needed = 4 if chosen == "power" else 6
    if len(N) < needed:
        raise LabcoatError(f"{file}: {len(N)} data row(s); --form {chosen} has {needed - 1} "
                           f"parameters and needs at least {needed} rows (and 5 or more "
                           "distinct sizes to trust the fit); add rows")
    # Heavy imports (scipy, the report) only once the input is known to be good.
    from labcoat import scaling
    from labcoat.report import fit_summary, print_backtest, print_fit, run_backtest

    try:
        f = scaling.fit(N=N, D=D, loss=L, form=chosen, huber_delta=huber_delta,
                        bootstrap=bootstrap, seed=seed, ci=ci, warn=False)
        summary = fit_summary(f, compute=compute, targets=target)
    except ValueError as e:
        raise LabcoatError(f"{file}: {e}") from None
    bt, note, bt_warnings = run_backtest(
        N, D, L, form=chosen, holdout=holdout, by=by.value, huber_delta=huber_delta,
        bootstrap=max(bootstrap, 200), seed=seed, ci=ci)
    found = [str(w) for w in f.warnings] + bt_warnings
    if as_json:
        out = {"file": str(file), "columns": {"N": n, "D": d, "C": c, "loss": loss}, **summary,
               "backtest": bt, "backtest_note": note or None,
               "warnings": [{"kind": w.kind, "message": str(w)} for w in f.warnings]
               + [{"kind": "backtest-miss", "message": m} for m in bt_warnings]}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    console = Console()
    law = "E + A/N^alpha" + (" + B/D^beta" if chosen == "chinchilla" else "")
    console.print(f"[bold]{escape(str(file))}[/]: {len(N)} points, {escape(loss)} = {law} "
                  f"(N: {escape(n)}" + (f", D: {escape(d)}" if d else "")
                  + (f", D = C / 6N with C: {escape(c)}" if c else "") + ")",
                  soft_wrap=True)
    print_fit(summary, console, title=f"{chosen} fit")
    if bt is not None:
        print_backtest(bt, console, variable="N" if by is ByChoice.N else "6ND")
    else:
        console.print(f"[dim]{escape(note)}[/]", soft_wrap=True)
    for message in dict.fromkeys(found):
        console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)


def read_columns(path: Path, columns: dict[str, str]) -> dict[str, list[float]]:
    """Read the named columns of a CSV as positive floats: flag -> values (one per row).

    Raises LabcoatError naming the file, row (line number) and column for a missing
    file, a missing column, an empty, non-numeric or non-positive value.
    """
    if not path.exists():
        raise LabcoatError(f"{path} not found; give the path to a CSV file with a header row "
                           "(e.g. N,D,loss)")
    if path.is_dir():
        raise LabcoatError(f"{path} is a directory; give a CSV file")
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            sample = handle.read(4096)
            handle.seek(0)
            delimiter = _delimiter(sample)
            reader = csv.DictReader(handle, delimiter=delimiter)
            header = reader.fieldnames
            if not header:
                raise LabcoatError(f"{path} is empty; it needs a header row naming the "
                                   "columns and one row per run")
            names = [h.strip() for h in header]
            for flag, col in columns.items():
                if col not in names:
                    raise LabcoatError(f"{path} has no column {col!r} (given by {flag}); its "
                                       f"columns are: {', '.join(names)}; pass {flag} with one "
                                       "of them")
            out: dict[str, list[float]] = {flag: [] for flag in columns}
            for row in reader:
                line = reader.line_num
                clean = {(k or "").strip(): v for k, v in row.items()}
                if all((v or "").strip() == "" for v in clean.values()
                       if isinstance(v, str)):
                    continue  # blank line
                for flag, col in columns.items():
                    out[flag].append(_positive(path, line, col, clean.get(col)))
    except UnicodeDecodeError:
        raise LabcoatError(f"{path} is not a UTF-8 text file; export it as CSV") from None
    except csv.Error as e:
        raise LabcoatError(f"{path}: not a readable CSV ({e}); check quoting and "
                           "delimiters") from None
    return out


def _delimiter(sample: str) -> str:
    """The header row's separator: ',' unless the header has none and uses ';', a tab or
    '|' instead (a spreadsheet saved as CSV where the decimal mark is a comma writes ';').
    Only the header is sniffed: decimal commas in the rows would look like separators."""
    header = sample.splitlines()[0] if sample.strip() else ""
    try:
        return csv.Sniffer().sniff(header, delimiters=",;\t|").delimiter
    except csv.Error:  # one column, or nothing to go by
        return ","


def _positive(path: Path, line: int, column: str, raw: str | None) -> float:
    text = (raw or "").strip()
    if not text:
        raise LabcoatError(f"{path} line {line}: column {column!r} is empty; fill it in or "
                           "remove the row")
    try:
        value = float(text)
    except ValueError:
        comma = re.fullmatch(r"[-+]?\d+,\d*(?:[eE][-+]?\d+)?", text)
        hint = f" (a decimal comma? write {text.replace(',', '.')})" if comma else ""
        raise LabcoatError(f"{path} line {line}: column {column!r} has {text!r}, which is not "
                           f"a number{hint}; fix it or remove the row") from None
    if not math.isfinite(value) or value <= 0:
        raise LabcoatError(f"{path} line {line}: column {column!r} has {text}, but scaling laws "
                           "are fitted in log space, so every value must be a finite number "
                           "> 0; fix it or remove the row")
    return value
