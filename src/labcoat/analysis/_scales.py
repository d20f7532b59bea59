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
from sqlalchemy.orm import Session

from labcoat import spec, store
from labcoat.analysis._json import json_safe
from labcoat.analysis._textplot import loglog_plot
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
    data = json_safe(f.to_dict())
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
    out = json_safe(bt.summary())
    out["table"] = [json_safe({k: getattr(r, k) for k in (
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
