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

from labcoat.analysis import AGGREGATES, MACRO, ArmResult, Comparison, HypothesisResult

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22")
SEVERITY_COLOR = {"critical": "#7f0000", "error": "#d62728", "warning": "#ff7f0e"}
LAYOUT = {"template": "plotly_white", "font": {"family": "system-ui, sans-serif", "size": 12},
          "margin": {"l": 60, "r": 20, "t": 80, "b": 50}, "height": 380,
          # legend above the plot: below it, it would cover the x-axis title
          "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 1,
                     "xanchor": "right"}}


def colors(arms: list[str]) -> dict[str, str]:
    """One colour per arm, in the design's order."""
    return {arm: PALETTE[i % len(PALETTE)] for i, arm in enumerate(arms)}


def _figure(title: str, **layout: Any) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(**{**LAYOUT, **layout}, title={"text": escape(title), "x": 0})
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
    for index, name, color in ((1, "seeds (Welch, training noise)", PALETTE[0]),
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
            name="pooled (DerSimonian-Laird)", marker={"color": "black", "size": 11,
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
    """The primary metric per arm: each seed as a dot, the mean with its t CI."""
    fig = _figure(f"{result.hypothesis.metric} per arm: seeds and mean with 95% CI")
    for arm in result.arms:
        _arm_trace(fig, arm, palette)
    fig.update_yaxes(title=escape(result.hypothesis.metric))
    return fig


def _arm_trace(fig: go.Figure, arm: ArmResult, palette: dict[str, str]) -> None:
    """The mean and its CI, then the seeds over them (drawn last, outlined): drawn first, a
    dot on the error bar's line would be hidden behind it."""
    label = escape(arm.arm)
    if arm.overall is not None and math.isfinite(arm.overall.low):
        i = arm.overall
        fig.add_trace(go.Scatter(
            x=[label], y=[i.point], mode="markers", name=label,
            marker={"color": palette.get(arm.arm), "size": 12, "symbol": "line-ew-open",
                    "line": {"width": 3}},
            error_y={"type": "data", "symmetric": False, "array": [i.high - i.point],
                     "arrayminus": [i.point - i.low]}))
    fig.add_trace(go.Scatter(x=[label] * len(arm.values), y=arm.values, mode="markers",
                             name=f"{label} seeds", showlegend=False, marker={
                                 "color": palette.get(arm.arm), "opacity": 0.7, "size": 7,
                                 "line": {"color": "white", "width": 1}}))


def curves_plot(metric: str, curves: dict[str, dict[str, Any]],
                palette: dict[str, str]) -> go.Figure:
    """One metric over steps: per arm, the mean over trials and a band from the lowest to
    the highest trial (at the steps report._curves chose)."""
    fig = _figure(f"{metric} over steps: mean over seeds, band = lowest to highest seed")
    for arm, c in curves.items():
        color = palette.get(arm, PALETTE[0])
        label = escape(arm)
        fig.add_trace(go.Scatter(
            x=c["step"] + c["step"][::-1], y=c["high"] + c["low"][::-1], fill="toself",
            fillcolor=_alpha(color, 0.18), line={"width": 0}, hoverinfo="skip",
            name=f"{label} seed range", legendgroup=label, showlegend=False))
        fig.add_trace(go.Scatter(x=c["step"], y=c["mean"], mode="lines", legendgroup=label,
                                 name=f"{label} (n={c['trials']})", line={"color": color}))
    fig.update_xaxes(title="step")
    fig.update_yaxes(title=escape(metric))
    return fig


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
