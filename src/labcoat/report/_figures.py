"""Plotly figures of the report: forest plots, aggregate intervals, curves with seed
bands, scaling fits with prediction bands, and the incident timeline.

Every figure takes data the report already computed (Analysis, report._curves,
report._scales) and draws it; nothing is estimated here. Labels that come from
users (arm, task, trial names) are HTML-escaped before they reach Plotly, which
renders a subset of HTML in text. One palette and template for every figure, so
an arm has the same colour everywhere and the page prints legibly in grey.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from labcoat.analysis import AGGREGATES, MACRO, ArmResult, Comparison, HypothesisResult

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22")
SEVERITY_COLOR = {"critical": "#7f0000", "error": "#d62728", "warning": "#ff7f0e"}
LAYOUT = {"template": "plotly_white", "font": {"family": "system-ui, sans-serif", "size": 12},
          "margin": {"l": 60, "r": 44, "t": 96, "b": 50}, "height": 380,
          # Plotly's toolbar, upright in the right margin: across the top it covered the
          # legend (and, on a narrow page, the title)
          "modebar": {"orientation": "v"}}
# The top margin, in bands: the title (at the top left), then the legend (two rows fit
# before the plot); see `_title` and `legend`.
TITLE_TOP, LEGEND_TOP = 6, 34

MEAN_OFFSET = 0.12  # per-arm plot: the mean's x left of its arm's tick
SEED_SPREAD = (0.0, 0.3)  # and its seeds' x range right of the mean
# small multiples, in pixels: margins (LAYOUT's), then per row a panel and the gap below it
GRID_TOP, PANEL_HEIGHT, PANEL_GAP = 166, 230, 70


def colors(arms: list[str]) -> dict[str, str]:
    """One colour per arm, in the design's order."""
    return {arm: PALETTE[i % len(PALETTE)] for i, arm in enumerate(arms)}


def legend(height: int) -> dict[str, Any]:
    """The legend of a figure `height` px tall: at the top right, above the plot (below
    it, it would cover the x-axis title), below the title's band (beside it, a long title
    runs into it on a narrow page). Its top is pinned in pixels: rows it wraps into grow
    down, into the margin kept for them, not up into the title."""
    return {"orientation": "h", "yref": "container", "y": 1 - LEGEND_TOP / height,
            "yanchor": "top", "x": 1, "xanchor": "right"}


def _title(text: str, height: int) -> dict[str, Any]:
    """The title of a figure `height` px tall, at the top left, above the legend."""
    return {"text": escape(text), "x": 0, "yref": "container", "y": 1 - TITLE_TOP / height,
            "yanchor": "top"}


def _figure(text: str, **layout: Any) -> go.Figure:
    fig = go.Figure()
    settings = {**LAYOUT, **layout}
    fig.update_layout(**settings, legend=legend(settings["height"]),
                      title=_title(text, settings["height"]))
    return fig


def forest_plot(c: Comparison, result: HypothesisResult) -> go.Figure:
    """Variant - control per task: seed-level (Welch) and item-level (paired) differences
    with their family-adjusted CIs, the macro comparison and the pooled effect below."""
    rows: list[tuple[str, Any, Any]] = []
    for task in result.tasks:
        seeds, items = c.per_task.get(task, (None, None))
        rows.append((task, seeds.difference if seeds else None,
                     items.difference if items else None))
    rows.append((f"{MACRO if result.tasks else 'overall'} (verdict)", c.seeds, c.items))
    pooled = c.generalization.pooled if c.generalization else None
    labels = [escape(r[0]) for r in rows]
    fig = _figure(f"{c.variant} - {c.control}: difference per task (adjusted CIs)",
                  height=max(260, 34 * (len(rows) + 1) + 120))
    test = {"welch": "Welch", "paired-t": "paired t"}.get(getattr(c.seeds, "method", ""), "OLS")
    for index, name, color in ((1, f"seeds ({test}, training noise)", PALETTE[0]),
                               (2, "items (paired, eval noise only)", PALETTE[4])):
        kept = [(label, r[index]) for label, r in zip(labels, rows, strict=True)
                if r[index] is not None and math.isfinite(r[index].estimate)]
        if not kept:
            continue
        fig.add_trace(go.Scatter(
            x=[d.estimate for _, d in kept], y=[label for label, _ in kept], mode="markers",
            name=name, marker={"color": color, "size": 9, "symbol": "square" if index == 1
                               else "diamond"},
            error_x={"type": "data", "symmetric": False,
                     "array": [_finite(d.high - d.estimate) for _, d in kept],
                     "arrayminus": [_finite(d.estimate - d.low) for _, d in kept]}))
    if pooled is not None and math.isfinite(pooled.estimate):
        fig.add_trace(go.Scatter(
            x=[pooled.estimate], y=["pooled over tasks (random effects)"], mode="markers",
            name="pooled (random effects, HKSJ)", marker={"color": "black", "size": 11,
                                                      "symbol": "diamond-wide"},
            error_x={"type": "data", "symmetric": False,
                     "array": [_finite(pooled.high - pooled.estimate)],
                     "arrayminus": [_finite(pooled.estimate - pooled.low)]}))
    fig.add_vline(x=0, line={"color": "#555", "dash": "dash", "width": 1})
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title=f"difference in {escape(result.hypothesis.metric)}", zeroline=False)
    return fig


def aggregates_plot(result: HypothesisResult, palette: dict[str, str]) -> go.Figure:
    """Mean, median, IQM and optimality gap per arm with stratified-bootstrap CIs."""
    fig = _figure(f"{result.hypothesis.metric}: aggregates over runs x tasks (95% CI)")
    for arm in result.arms:
        kept = [(name.replace("_", " "), arm.aggregates[name]) for name in AGGREGATES
                if name in arm.aggregates]
        if not kept:
            continue
        fig.add_trace(go.Scatter(
            x=[i.point for _, i in kept], y=[name for name, _ in kept], mode="markers",
            name=escape(arm.arm), marker={"color": palette.get(arm.arm), "size": 9},
            error_x={"type": "data", "symmetric": False,
                     "array": [_finite(i.high - i.point) for _, i in kept],
                     "arrayminus": [_finite(i.point - i.low) for _, i in kept]}))
    fig.update_yaxes(autorange="reversed", type="category")
    return fig


def arms_plot(result: HypothesisResult, palette: dict[str, str]) -> go.Figure:
    """The primary metric per arm: the mean with its t CI, and each seed as a dot beside
    it (arm i at x = i: the mean just left of i, the seeds spread to its right, so no dot
    hides behind the error bar and equal values stay apart)."""
    fig = _figure(f"{result.hypothesis.metric} per arm: seeds and mean with 95% CI")
    for index, arm in enumerate(result.arms):
        _arm_trace(fig, index, arm, palette)
    fig.update_xaxes(tickvals=list(range(len(result.arms))), zeroline=False, showgrid=False,
                     ticktext=[escape(arm.arm) for arm in result.arms],
                     range=[-0.5, len(result.arms) - 0.5])
    fig.update_yaxes(title=escape(result.hypothesis.metric))
    return fig


def _arm_trace(fig: go.Figure, index: int, arm: ArmResult, palette: dict[str, str]) -> None:
    """The mean and its CI, then the seeds (drawn last, so on top, outlined)."""
    label = escape(arm.arm)
    if arm.overall is not None and math.isfinite(arm.overall.low):
        i = arm.overall
        fig.add_trace(go.Scatter(
            x=[index - MEAN_OFFSET], y=[i.point], mode="markers", name=label,
            marker={"color": palette.get(arm.arm), "size": 14, "symbol": "line-ew-open",
                    "line": {"width": 3}},
            hovertemplate=f"{label}: mean %{{y:.4g}}<extra></extra>",
            error_y={"type": "data", "symmetric": False, "array": [i.high - i.point],
                     "arrayminus": [i.point - i.low], "thickness": 2, "width": 8}))
    n = len(arm.values)
    fig.add_trace(go.Scatter(
        x=[index + SEED_SPREAD[0] + (SEED_SPREAD[1] - SEED_SPREAD[0]) * (k + 0.5) / n
           for k in range(n)], y=arm.values, mode="markers", name=f"{label} seeds",
        showlegend=False, text=[escape(key) for key in arm.trials],
        hovertemplate="%{text}: %{y:.4g}<extra></extra>",
        marker={"color": palette.get(arm.arm), "opacity": 0.8, "size": 8,
                "line": {"color": "white", "width": 1}}))


def curves_grid(curves: dict[str, dict[str, dict[str, Any]]], palette: dict[str, str], *,
                title: str | None = None, columns: int = 3, shared_y: bool = False
                ) -> go.Figure:
    """Small multiples, one panel per metric (curves: metric -> arm -> report._curves
    arm curve): per arm the mean over trials and a band from the lowest to the highest
    trial. One legend entry per arm, which toggles the arm in every panel."""
    names = list(curves)
    columns = max(1, min(columns, len(names)))
    rows = math.ceil(len(names) / columns)
    height = GRID_TOP + rows * PANEL_HEIGHT
    fig = make_subplots(rows=rows, cols=columns, shared_yaxes=shared_y,
                        subplot_titles=[escape(n) for n in names],
                        horizontal_spacing=0.06 if shared_y else 0.08,
                        vertical_spacing=PANEL_GAP / (rows * PANEL_HEIGHT))
    if title is None:
        title = (f"{names[0]} over steps" if len(names) == 1 else "over steps") + \
            ": mean over seeds, band = lowest to highest seed"
    # the legend in the top margin (at y=1 of the plot area it would cover panel titles),
    # below the toolbar
    margin = {**LAYOUT["margin"], "t": LAYOUT["margin"]["t"] + 20}  # and the panel titles
    fig.update_layout(**{**LAYOUT, "height": height, "legend": legend(height),
                         "margin": margin}, title=_title(title, height))
    shown: set[str] = set()
    for k, (metric, per_arm) in enumerate(curves.items()):
        row, col = divmod(k, columns)
        for arm, c in per_arm.items():
            _curve_traces(fig, metric, arm, c, palette, row + 1, col + 1, arm not in shown)
            shown.add(arm)
        if k + columns >= len(names):  # the lowest panel of its column
            fig.update_xaxes(title="step", row=row + 1, col=col + 1)
    for annotation, domain in zip(fig.layout.annotations, _x_domains(fig, len(names)),
                                  strict=True):  # panel titles flush left, like the page's
        annotation.update(x=domain[0], xanchor="left", font={"size": 12})
    return fig


def _curve_traces(fig: go.Figure, metric: str, arm: str, c: dict[str, Any],
                  palette: dict[str, str], row: int, col: int, legend: bool) -> None:
    color = palette.get(arm, PALETTE[0])
    label = escape(arm)
    fig.add_trace(go.Scatter(
        x=c["step"] + c["step"][::-1], y=c["high"] + c["low"][::-1], fill="toself",
        fillcolor=_alpha(color, 0.18), line={"width": 0}, hoverinfo="skip",
        name=f"{label} seed range", legendgroup=label, showlegend=False), row=row, col=col)
    fig.add_trace(go.Scatter(
        x=c["step"], y=c["mean"], mode="lines", legendgroup=label, showlegend=legend,
        name=f"{label} (n={c['trials']})", line={"color": color, "width": 1.5},
        hovertemplate=f"{label}, {escape(metric)}<br>step %{{x}}: %{{y:.4g}}<extra></extra>"),
        row=row, col=col)


def _x_domains(fig: go.Figure, panels: int) -> list[tuple[float, float]]:
    """The x domain of each of the first `panels` subplots, in subplot order."""
    layout = fig.layout
    return [layout[f"xaxis{'' if k == 0 else k + 1}"].domain for k in range(panels)]


def constant_value(per_arm: dict[str, dict[str, Any]]) -> float | None:
    """The value of a metric that every trial logged the same at every drawn step (e.g.
    `eval/items`), else None: such a metric is a fact to state, not a curve."""
    values = {v for c in per_arm.values() for key in ("low", "high") for v in c[key]}
    return values.pop() if len(values) == 1 else None


def overlay_plot(metric: str, runs: list[tuple[str, dict[str, dict[str, Any]]]]
                 ) -> go.Figure:
    """Several experiments' per-arm mean curves of one metric on one plot: runs are
    (experiment name, arm_curves); the first experiment solid, the next dashed."""
    fig = _figure(f"{metric}: mean over seeds per arm")
    color = 0
    for (name, per_arm), dash in zip(runs, ("solid", "dash", "dot", "dashdot"), strict=False):
        for arm, c in per_arm.items():
            fig.add_trace(go.Scatter(x=c["step"], y=c["mean"], mode="lines",
                                     name=escape(f"{name}: {arm} (n={c['trials']})"),
                                     line={"color": PALETTE[color % len(PALETTE)],
                                           "dash": dash}))
            color += 1
    fig.update_xaxes(title="step")
    return fig


def trial_curve_plot(metric: str, curve: dict[str, list[Any]]) -> go.Figure:
    fig = _figure(f"{metric} (LTTB, {len(curve['step'])} points)")
    fig.add_trace(go.Scatter(x=curve["step"], y=curve["value"], mode="lines",
                             name=escape(metric), line={"color": PALETTE[0]}))
    fig.update_xaxes(title="step")
    return fig


def scaling_plot(row: dict[str, Any], variable: str, metric: str,
                 palette: dict[str, str]) -> go.Figure:
    """One arm's trials, its fitted law and the 95% prediction band to 4x the largest
    scale (log-log), and the backtest's held-out predictions when there is one."""
    band = row["band"]
    color = palette.get(row["arm"], PALETTE[0])
    fig = _figure(f"{row['arm']}: {metric} = E + A / {variable}^alpha, 95% prediction band")
    fig.add_trace(go.Scatter(x=band["grid"] + band["grid"][::-1],
                             y=band["high"] + band["low"][::-1], fill="toself",
                             fillcolor=_alpha(color, 0.18), line={"width": 0},
                             name="95% band for a new run", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=band["grid"], y=band["fit"], mode="lines", name="fit",
                             line={"color": color}))
    fig.add_trace(go.Scatter(x=band["x"], y=band["y"], mode="markers", name="trials",
                             marker={"color": color, "size": 8, "line": {"color": "white",
                                                                         "width": 1}}))
    bt = row.get("backtest")
    if bt:
        held = bt["table"]
        fig.add_trace(go.Scatter(
            x=[r["N"] for r in held], y=[r["predicted"] for r in held], mode="markers",
            name="backtest: predicted without it", marker={"symbol": "x", "size": 10,
                                                           "color": "black"},
            error_y={"type": "data", "symmetric": False,
                     "array": [_finite(r["high"] - r["predicted"]) for r in held],
                     "arrayminus": [_finite(r["predicted"] - r["low"]) for r in held]}))
    fig.update_xaxes(type="log", title=escape(variable))
    fig.update_yaxes(type="log", title=escape(metric))
    return fig


def timeline_plot(rows: list[dict[str, Any]]) -> go.Figure | None:
    """Attempts as bars per trial (red when the attempt was restarted or failed) and guard
    alerts as marks, on the wall clock; None when nothing has run."""
    attempts = [r for r in rows if r["kind"] == "attempt"]
    if not attempts:
        return None
    trials = list(dict.fromkeys(r["trial"] for r in attempts))
    fig = _figure("timeline: attempts and guard alerts (UTC)",
                  height=max(240, 26 * len(trials) + 140))
    for ok, name, color in ((True, "attempt", PALETTE[0]),
                            (False, "attempt that crashed / was restarted", PALETTE[1])):
        xs: list[Any] = []
        ys: list[Any] = []
        texts: list[Any] = []
        for r in attempts:
            good = r["cause"] in ("exit 0", "running") and not r["restarted"]
            if good != ok:
                continue
            end = r["end"] or r["start"]
            xs += [r["start"], end, None]
            ys += [escape(r["trial"])] * 2 + [None]
            text = escape(f"attempt {r['attempt']}: {r['cause']}")
            texts += [text, text, None]
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, text=texts, mode="lines+markers", name=name,
                                     hoverinfo="text+x", line={"color": color, "width": 8},
                                     marker={"size": 4, "color": color}))
    for severity, color in SEVERITY_COLOR.items():
        marks = [r for r in rows if r["kind"] == "alert" and r["severity"] == severity
                 and r["time"]]
        if marks:
            fig.add_trace(go.Scatter(
                x=[r["time"] for r in marks], y=[escape(r["trial"]) for r in marks],
                mode="markers", name=f"alert: {severity}",
                text=[escape(f"step {r['step']}: {r['rule']} - {r['message']}") for r in marks],
                hoverinfo="text+x", marker={"symbol": "triangle-down", "size": 12,
                                            "color": color}))
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def _alpha(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def curve_panels(curves: dict[str, dict[str, dict[str, Any]]], primary: list[str],
                 tasks: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]],
                                            dict[str, float | None]]:
    """Which curves to draw, in reading order: (main, per_task, not_drawn).

    main: metric -> arm curves, the primary metrics first, then the rest alphabetically;
    per_task: primary metric -> {task: arm curves} for its `<metric>/<task>` curves (a
    grid of their own); not_drawn: metric -> its constant value (None: no finite value).
    """
    constants = {m: constant_value(per) for m, per in curves.items()}
    not_drawn = {m: v for m, v in constants.items() if not curves[m] or v is not None}
    drawn = [m for m in curves if m not in not_drawn]
    per_task = {}
    for metric in primary:
        found = {t: curves[f"{metric}/{t}"] for t in tasks if f"{metric}/{t}" in drawn}
        if len(found) > 1:
            per_task[metric] = found
    taken = {f"{m}/{t}" for m, found in per_task.items() for t in found}
    order = sorted((m for m in drawn if m not in taken),
                   key=lambda m: (primary.index(m) if m in primary else len(primary), m))
    return {m: curves[m] for m in order}, per_task, dict(sorted(not_drawn.items()))
