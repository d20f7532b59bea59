"""Scaling-law sections: a fit's parameters with intervals, derived quantities, its
backtest and range warnings, for `labcoat scaling fit` and for designs with `scales:`.

Everything is computed into JSON-ready dicts first (`fit_summary`,
`backtest_summary`, `scales_data`) and printed from them, so `--json` and the
terminal show the same numbers.

For a design with `scales:`, the scale variable is the numeric scale parameter
whose value differs between scales (e.g. `width`); with several, the first
declared one (the others are named in a note). The fitted quantity is the
primary metric when it should decrease (a loss), else the logged metric `loss`.
Each arm gets its own power-law fit, L = E + A / x^alpha in the scale variable x,
over every finished trial (seeds are separate points), and a leave-largest-out
backtest when there are at least 4 scales.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# Report fits are small (one point per finished trial): 1,000 replicates take well
# under a second and give stable 95% percentiles.
REPORT_BOOTSTRAP = 1000
MIN_SCALES_FIT = 3  # distinct scales below which no law is fitted
MIN_SCALES_BACKTEST = 4  # fit on >= 3 scales, predict the largest


# --- summaries (shared by the CLI and the report) -------------------------------------------


def print_scales(data: dict[str, Any], console: Console) -> None:
    """The report's scaling section (nothing when the design has no scales)."""
    if not data:
        return
    var = data["variable"]
    console.print(f"\n[bold]Scaling[/] ({escape(str(data['metric'] or '-'))} against "
                  f"{escape(str(var or '-'))})", soft_wrap=True)
    if data.get("note"):
        console.print(f"  {escape(data['note'])}", soft_wrap=True)
    for row in data["arms"]:
        scales = ", ".join(f"{s:g}" for s in row["scales"])
        console.print(f"  arm {escape(row['arm'])}: {row['points']} finished trial(s) at "
                      f"{escape(str(var))} = {scales or '-'}", soft_wrap=True)
        if row["fit"] is not None:
            print_fit(row["fit"], console, title=f"{row['arm']}: {data['metric']} = "
                      f"E + A / {var}^alpha", variable=str(var))
        if row.get("plot"):
            console.print(f"  [dim]o trials, * fit, : 95% band for a new run; log-log, "
                          f"{escape(str(var))} to 4x the largest[/]")
            for line in row["plot"]:
                console.print("  " + escape(line), highlight=False, soft_wrap=True)
        if row["backtest"] is not None:
            print_backtest(row["backtest"], console, variable=str(var))
        for note in row["notes"]:
            console.print(f"  [dim]{escape(note)}[/]", soft_wrap=True)
        for w in row["warnings"]:
            console.print(f"  [yellow]warning:[/] {escape(w)}", soft_wrap=True)


def print_fit(summary: dict[str, Any], console: Console, *, title: str,
              variable: str = "N") -> None:
    """Parameters with intervals, then derived quantities, from `fit_summary`."""
    level = f"{100 * summary['ci']:.3g}%"
    table = Table(title=f"{title}: estimate and {level} bootstrap CI "
                        f"({summary['bootstrap']} replicates)",
                  title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("parameter")
    table.add_column("estimate", justify="right")
    table.add_column(f"{level} CI", justify="right")
    for name, iv in summary["params"].items():
        table.add_row(name, _g(iv["point"]), _ci(iv))
    derived = summary["derived"]
    for key in ("a", "b"):
        if key in derived:
            table.add_row(f"{key}: {escape(derived[key]['what'])}", _g(derived[key]["point"]),
                          _ci(derived[key]))
    console.print(table)
    if "allocation" in derived:
        alloc = Table(title="compute-optimal allocation (C = 6 N D; Hoffmann et al. 2022 eq. 4)",
                      title_justify="left", box=box.SIMPLE_HEAD)
        for col in ("C (FLOPs)", "N_opt", "D_opt", "tokens / parameter", "loss"):
            alloc.add_column(col, justify="right")
        for row in derived["allocation"]:
            alloc.add_row(_g(row["C"]), *[f"{_g(row[k]['point'])} {_ci(row[k])}"
                                          for k in ("N", "D", "tokens_per_parameter", "loss")])
        console.print(alloc)
    if "predictions" in derived:
        preds = Table(title=f"predicted {escape('loss')} (prediction interval: a new run should "
                            f"land inside with probability {level})",
                      title_justify="left", box=box.SIMPLE_HEAD)
        preds.add_column(variable, justify="right")
        preds.add_column("x largest fitted", justify="right")
        preds.add_column("predicted", justify="right")
        preds.add_column(f"{level} interval", justify="right")
        for row in derived["predictions"]:
            preds.add_row(_g(row["N"]), f"{row['extrapolation']:.3g}", _g(row["point"]),
                          _ci(row))
        console.print(preds)
    d = summary["diagnostics"]
    console.print(f"  {summary['n_points']} points, residual scale {summary['residual_scale']:.3g}"
                  f" (log loss); {d['starts_evaluated']} grid starts, {d['starts_optimized']} "
                  f"optimized, {d['starts_at_best']} reached the best objective; converged: "
                  f"{'yes' if d['converged'] else 'NO'}", soft_wrap=True)


def print_backtest(summary: dict[str, Any], console: Console, *, variable: str = "N") -> None:
    """The leave-largest-out table from `backtest_summary`."""
    level = f"{100 * summary['ci']:.3g}%"
    table = Table(title=f"backtest ({summary['scheme']}): fit without the largest "
                        f"{variable}, predict it", title_justify="left", box=box.SIMPLE_HEAD,
                  caption=f"coverage {100 * summary['coverage']:.0f}% of {summary['rows']} "
                          f"held-out point(s) by their {level} prediction intervals (PI); "
                          f"mean |error| "
                          f"{100 * summary['mean_abs_error']:.2g}%",
                  caption_justify="left")
    table.add_column(variable, justify="right")
    if any(r["D"] is not None for r in summary["table"]):
        table.add_column("D", justify="right")
    for col in ("x fitted", "observed", "predicted", f"{level} PI", "error", "in PI"):
        table.add_column(col, justify="right")
    for r in summary["table"]:
        cells = [_g(r["N"])] + ([_g(r["D"])] if r["D"] is not None else [])
        covered = "yes" if r["covered"] else "[red]NO[/]"
        table.add_row(*cells, f"{r['extrapolation']:.3g}", f"{r['observed']:.4g}",
                      f"{r['predicted']:.4g}", f"[{r['low']:.4g}, {r['high']:.4g}]",
                      f"{100 * r['error']:+.2g}%", covered)
    console.print(table)


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _ci(iv: dict[str, Any]) -> str:
    if iv.get("low") is None or iv.get("high") is None:
        return "-"
    return f"[{iv['low']:.4g}, {iv['high']:.4g}]"
