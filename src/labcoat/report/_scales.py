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

import math
import warnings
from collections import defaultdict
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy.orm import Session

from labcoat import spec, store
from labcoat.report._textplot import loglog_plot
from labcoat.scaling import Backtest, ScalingFit, ScalingWarning, backtest, fit
from labcoat.store import Experiment

# Report fits are small (one point per finished trial): 1,000 replicates take well
# under a second and give stable 95% percentiles.
REPORT_BOOTSTRAP = 1000
MIN_SCALES_FIT = 3  # distinct scales below which no law is fitted
MIN_SCALES_BACKTEST = 4  # fit on >= 3 scales, predict the largest


# --- summaries (shared by the CLI and the report) -------------------------------------------


def fit_summary(f: ScalingFit, *, compute: list[float] | None = None,
                targets: list[float] | None = None) -> dict[str, Any]:
    """JSON-ready summary of a fit: parameters with intervals and derived quantities.

    compute: budgets (FLOPs, 6 N D) for the compute-optimal allocation (chinchilla form;
    default: the largest budget in the data and 10x it). targets: N at which to predict
    (power form; default: the largest fitted N and 10x it). Predictions are prediction
    intervals (bootstrap plus residual noise): where a new run should land.
    """
    data = _json_safe(f.to_dict())
    params = {name: _interval_dict(f.intervals.get(name), f.params[name]) for name in f.params}
    derived: dict[str, Any] = {}
    if f.form == "chinchilla":
        for key, what in (("a", "N_opt ~ C^a (beta / (alpha + beta))"),
                          ("b", "D_opt ~ C^b (alpha / (alpha + beta))")):
            iv = f.intervals.get(key)
            derived[key] = _interval_dict(iv, _exponent(f, key)) | {"what": what}
        budgets = compute or _default_budgets(f)
        alloc = []
        for c in budgets:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                found = f.allocation(c)
            alloc.append({"C": c, **{k: _interval_dict(v, v.point) for k, v in found.items()}})
        derived["allocation"] = alloc
    else:
        preds = []
        for n in targets or [float(f.N.max()), 10 * float(f.N.max())]:
            preds.append(_prediction(f, n))
        derived["predictions"] = preds
    data["params"] = params
    data["derived"] = derived
    return data


def backtest_summary(bt: Backtest) -> dict[str, Any]:
    """JSON-ready backtest: coverage, errors and one row per held-out point."""
    out = _json_safe(bt.summary())
    out["table"] = [_json_safe({k: getattr(r, k) for k in (
        "fold", "N", "D", "observed", "predicted", "low", "high", "covered", "error",
        "extrapolation")}) for r in bt.rows]
    return out


def run_backtest(N: np.ndarray, D: np.ndarray | None, loss: np.ndarray, **options: Any
                 ) -> tuple[dict[str, Any] | None, str, list[str]]:
    """Leave-largest-out backtest -> (summary or None, note if not possible, warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScalingWarning)
        try:
            bt = backtest(N, D, loss, scheme="leave-largest-out", **options)
        except ValueError as e:
            return None, f"no backtest: {e}", []
    return backtest_summary(bt), "", [str(w.message) for w in caught
                                      if issubclass(w.category, ScalingWarning)
                                      and getattr(w.message, "kind", "") == "backtest-miss"]


# --- designs with scales: -------------------------------------------------------------------


def scales_data(session: Session, experiment: Experiment) -> dict[str, Any]:
    """The scaling section of `labcoat report` ({} when the design declares no scales)."""
    if not experiment.design_yaml:
        return {}
    design = spec.parse_design(experiment.design_yaml, f"design of {experiment.name}")
    if not design.scales:
        return {}
    variable, note = spec.scale_variable(design)
    out: dict[str, Any] = {"variable": variable, "note": note, "metric": None, "arms": [],
                           "warnings": []}
    if variable is None:
        return out
    metric = spec.fitted_metric(design)
    out["metric"] = metric
    done = [t for t in experiment.trials if t.status == "done" and t.scale]
    values = store.last_values(session, [t.id for t in done], metric)
    by_arm: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for t in done:
        x = _number(t.params.get(variable))
        if t.id in values and x is not None:
            by_arm[t.arm].append((x, values[t.id]))
    for arm in [a.name for a in spec.arm_specs(design)]:
        out["arms"].append(_arm_fit(arm, by_arm.get(arm, []), variable, metric))
    return out


def _arm_fit(arm: str, points: list[tuple[float, float]], variable: str, metric: str
             ) -> dict[str, Any]:
    row: dict[str, Any] = {"arm": arm, "points": len(points), "scales": [], "fit": None,
                           "backtest": None, "notes": [], "warnings": []}
    if not points:
        row["notes"].append(f"no finished trial logged {metric!r}")
        return row
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    levels = sorted(set(x.tolist()))
    row["scales"] = levels
    bad = ~(np.isfinite(y) & (y > 0)) | ~(x > 0)
    if bad.any():
        row["notes"].append(f"{int(bad.sum())} point(s) with non-positive {metric} or "
                            f"{variable} left out (a power law is fitted in log space)")
        x, y = x[~bad], y[~bad]
        levels = sorted(set(x.tolist()))
    if len(levels) < MIN_SCALES_FIT or y.size <= 3:
        row["warnings"].append(
            f"only {len(levels)} distinct {variable} value(s) with results: too few to fit a "
            f"scaling law (needs {MIN_SCALES_FIT}, and 5 or more to trust it); add scales")
        return row
    f = fit(N=x, loss=y, form="power", bootstrap=REPORT_BOOTSTRAP, seed=0, warn=False)
    row["fit"] = fit_summary(f)
    row["band"] = _band(f, x, y)
    row["plot"] = loglog_plot(x, y, *(np.array(row["band"][k]) for k in ("grid", "fit", "low",
                                                                          "high")))
    row["warnings"] += [str(w) for w in f.warnings]
    if len(levels) >= MIN_SCALES_BACKTEST:
        bt, note, found = run_backtest(x, None, y, form="power", bootstrap=REPORT_BOOTSTRAP,
                                       seed=0)
        row["backtest"] = bt
        if note:
            row["notes"].append(note)
        row["warnings"] += found
    else:
        row["notes"].append(f"no backtest: it needs {MIN_SCALES_BACKTEST} scales (fit on the "
                            f"smaller ones, predict the largest); have {len(levels)}")
    row["warnings"] = list(dict.fromkeys(row["warnings"]))
    return row


def _band(f: ScalingFit, x: np.ndarray, y: np.ndarray) -> dict[str, list[float]]:
    """The points, the fit and its 95% prediction band on a grid extrapolated to 4x the
    largest scale (the text plot and the HTML report draw the same numbers)."""
    grid = np.geomspace(x.min(), 4 * x.max(), 60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScalingWarning)  # the plot's own extrapolation
        curve, low, high = f.predict_interval(grid)
    return {"x": x.tolist(), "y": y.tolist(), "grid": grid.tolist(),
            "fit": np.asarray(curve, dtype=float).tolist(),
            "low": np.asarray(low, dtype=float).tolist(),
            "high": np.asarray(high, dtype=float).tolist()}


# --- printing ---------------------------------------------------------------------------------


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


# --- helpers ----------------------------------------------------------------------------------


def _prediction(f: ScalingFit, n: float) -> dict[str, Any]:
    if f.samples.shape[0] == 0:  # bootstrap=0: the curve only
        return {"N": n, "extrapolation": n / float(f.N.max()), "point": float(f.predict(n)),
                "low": None, "high": None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScalingWarning)
        point, low, high = f.predict_interval(n)
    return {"N": n, "extrapolation": n / float(f.N.max()), "point": float(point),
            "low": float(low), "high": float(high)}


def _default_budgets(f: ScalingFit) -> list[float]:
    assert f.D is not None
    largest = float((6 * f.N * f.D).max())
    return [largest, 10 * largest]


def _exponent(f: ScalingFit, key: str) -> float:
    num = f.params["beta"] if key == "a" else f.params["alpha"]
    return num / (f.params["alpha"] + f.params["beta"])


def _interval_dict(iv: Any, point: float) -> dict[str, Any]:
    if iv is None:
        return {"point": _finite(point), "low": None, "high": None}
    return {"point": _finite(iv.point), "low": _finite(iv.low), "high": _finite(iv.high)}


def _finite(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _ci(iv: dict[str, Any]) -> str:
    if iv.get("low") is None or iv.get("high") is None:
        return "-"
    return f"[{iv['low']:.4g}, {iv['high']:.4g}]"


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
