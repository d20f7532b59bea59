"""The "step time by phase" section: where each trial's step time went, per rank.

Terminal: one table, a row per trial and rank, a column per phase (median ms per step and
the phase's share of the step time), then the slow-step alarms with each one's medians
before and from its step. HTML report and dashboard: the same table and alarms, and per
trial a stacked area chart of the phases over the steps (one rank at a time, chosen in a
menu when there are several), the alarms marked at their step. The data is
`Analysis.phases` (analysis._phases); nothing is estimated here. An experiment that timed
no phase has no section. Names from users (trial keys, `run.phase` names) are escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape as rich_escape
from rich.table import Table

from labcoat.journal import CPU_WAIT

ROWS = 40  # terminal table rows (trial x rank) shown, trials with alarms first; HTML: all
CHARTS = 12  # trials charted; trials with alarms first
SPARSE = 0.5  # a phase timed in fewer than this share of a rank's steps is footnoted
# One colour per phase everywhere (a user's `run.phase` names take the rest in turn).
PHASE_COLORS = {"data": "#1f77b4", "forward": "#2ca02c", "backward": "#98df8a",
                "optimizer": "#ff7f0e", "comm": "#d62728", "eval": "#9467bd",
                "checkpoint": "#8c564b", "other": "#c7c7c7"}
EXTRA_COLORS = ("#17becf", "#e377c2", "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78")
TITLE = "Step time by phase"
NOTE = ("median ms per step over the whole run, and the phase's share of the summed step "
        "time; the medians of the phases need not add up to the median step (total)")


def ordered_trials(phases: dict[str, Any]) -> list[dict[str, Any]]:
    """The section's trials, those with a slow-step alarm first (else in design order)."""
    trials = phases.get("trials", [])
    return sorted(trials, key=lambda t: not t["alarms"])


def rows(phases: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(trial, rank summary) rows in reading order."""
    return [(t, r) for t in ordered_trials(phases) for r in t["ranks"]]


def sparse_phases(phases: dict[str, Any]) -> list[str]:
    """Phases not timed in most steps (eval, checkpoint): their median is over the steps
    that ran them."""
    return [p for p in phases.get("phases", []) if any(
        r["timed_steps"].get(p, 0) < SPARSE * r["steps"] for t in phases["trials"]
        for r in t["ranks"] if p in r["timed_steps"])]


def alarm_change(alarm: dict[str, Any]) -> str:
    """e.g. 'rank 1 median before -> from step 300: data 0.26 -> 15.5 ms, total 7.1 -> 22 ms'."""
    rank = alarm["rank"]
    before, after = alarm["before_ms"].get(rank), alarm["after_ms"].get(rank)
    if rank is None or before is None or after is None:
        return ""
    parts = [f"{name} {_ms(before.get(name))} -> {_ms(after.get(name))} ms"
             for name in dict.fromkeys([alarm["phase"], "total", CPU_WAIT]) if name in before]
    return f"rank {rank} median before -> from step {alarm['step']}: " + ", ".join(parts)


# --- terminal -----------------------------------------------------------------------------

def print_phases(phases: dict[str, Any], console: Console) -> None:
    """The table and, under it, the slow-step alarms; nothing when no phase was timed."""
    if not phases:
        return
    from labcoat.report._status import print_wide

    names = phases["phases"]
    table = Table("trial", "rank", "steps", *map(rich_escape, names), "total", box=box.SIMPLE_HEAD,
                  title=f"{TITLE} (median ms per step, share of the step time)",
                  title_justify="left")
    shown = rows(phases)
    for t, r in shown[:ROWS]:
        cells = [_cell(r["median_ms"].get(p), r["share"].get(p)) for p in names]
        table.add_row(rich_escape(t["key"]), str(r["rank"]), str(r["steps"]), *cells,
                      _ms(r["total_ms"]))
    print_wide(table, console)
    if len(shown) > ROWS:
        console.print(f"  ... {len(shown) - ROWS} more rows (labcoat report EXP --json)")
    sparse = sparse_phases(phases)
    console.print(f"[dim]{NOTE}" + (f"; {rich_escape(', '.join(sparse))}: not timed in every "
                                    "step, the median is over the steps that ran them"
                                    if sparse else "") + "[/]", soft_wrap=True)
    alarms = [(t, a) for t in ordered_trials(phases) for a in t["alarms"]]
    if alarms:
        console.print(f"[bold]slow steps[/] ({len(alarms)}):")
    for t, a in alarms:
        style = "yellow" if a["severity"] == "warning" else "dim"
        console.print(f"  {rich_escape(t['key'])} step {a['step']}: [{style}]{a['severity']}[/] "
                      f"{rich_escape(a['message'])}", soft_wrap=True)
        change = alarm_change(a)
        if change:
            console.print(f"    [dim]{rich_escape(change)}[/]", soft_wrap=True)


def _cell(ms: float | None, share: float | None) -> str:
    if ms is None:
        return ""
    return _ms(ms) + ("" if share is None else f" [dim]{_percent(share)}[/]")


def _percent(share: float) -> str:
    return "<1%" if 0 < share < 0.005 else f"{100 * share:.0f}%"


def _ms(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.3g}"


# --- HTML ---------------------------------------------------------------------------------

def phases_html(phases: dict[str, Any], plot: Callable[[Any], str]) -> str:
    """The section's HTML (its table, alarms and charts); `plot` turns a Plotly figure
    into the page's div."""
    names = phases["phases"]
    head = "".join(f"<th>{escape(p)}</th>" for p in names)
    body = []
    for t, r in rows(phases):
        cells = "".join(f"<td>{_ms(r['median_ms'].get(p)) if p in r['median_ms'] else ''}"
                        + (f" <span class='muted'>{escape(_percent(r['share'][p]))}</span>"
                           if r["share"].get(p) is not None else "") + "</td>" for p in names)
        body.append(f"<tr><td>{escape(t['key'])}</td><td>{r['rank']}</td><td>{r['steps']}</td>"
                    f"{cells}<td>{_ms(r['total_ms'])}</td></tr>")
    out = [f"<p class='muted'>{escape(NOTE)}. Phases are timed by "
           "<code>labcoat.torch.time_phases</code> (docs/phases.md).</p>"
           f"<table id='phase-table'><tr><th>trial</th><th>rank</th><th>steps</th>{head}"
           f"<th>total</th></tr>{''.join(body)}</table>"]
    sparse = sparse_phases(phases)
    if sparse:
        out.append(f"<p class='muted'>{escape(', '.join(sparse))}: not timed in every step; "
                   "the median is over the steps that ran them.</p>")
    alarms = [(t, a) for t in ordered_trials(phases) for a in t["alarms"]]
    if alarms:
        out.append("<h3>Slow steps</h3><table id='slow-steps'><tr><th>trial</th><th>step</th>"
                   "<th class='text'>severity</th><th class='text'>alarm</th><th class='text'>"
                   "median before &rarr; from its step</th></tr>" + "".join(
                       f"<tr><td>{escape(t['key'])}</td><td>{a['step']}</td><td class='text "
                       f"sev-{escape(a['severity'])}'>{escape(a['severity'])}</td><td class="
                       f"'text'>{escape(a['message'])}</td><td class='text'>"
                       f"{escape(alarm_change(a))}</td></tr>" for t, a in alarms) + "</table>")
    else:
        out.append("<p>no slow-step alarm.</p>")
    charted = ordered_trials(phases)
    out += [plot(phase_plot(t, names)) for t in charted[:CHARTS]]
    if len(charted) > CHARTS:
        out.append(f"<p class='muted'>charts for {CHARTS} of {len(charted)} trials (those with "
                   "alarms first); the table lists them all.</p>")
    return "".join(out)


def phase_plot(trial: dict[str, Any], names: list[str]) -> Any:
    """One trial's phases stacked over the steps (ms per step, median per bin of steps),
    the step's median wall time as a dotted line, alarms as vertical marks at their step.
    Several ranks: one at a time, picked in a menu; first the rank of the first alarm
    that names a cause (not a wait), else rank 0."""
    import plotly.graph_objects as go

    from labcoat.report._figures import _figure

    ranks = sorted(trial["series"])
    causes = [a["rank"] for a in trial["alarms"] if a["severity"] == "warning"
              and a["rank"] in trial["series"]]
    shown = causes[0] if causes else ranks[0] if ranks else None
    fig = _figure(f"{trial['key']}: step time by phase (ms per step)", height=380)
    visible: list[list[bool]] = []
    colors = _colors(names)
    for rank in ranks:
        series = trial["series"][rank]
        start = len(fig.data)  # this rank's traces follow the earlier ranks'
        count = 0
        for name in names:
            if name not in series:
                continue
            fig.add_trace(go.Scatter(
                x=series["step"], y=series[name], name=escape(name), stackgroup=f"rank{rank}",
                mode="lines", line={"width": 0.5, "color": colors[name]},
                legendgroup=escape(name), visible=rank == shown,
                hovertemplate=f"{escape(name)} %{{y:.3g}} ms<extra>rank {rank}</extra>"))
            count += 1
        if "total" in series:
            fig.add_trace(go.Scatter(
                x=series["step"], y=series["total"], name="step (total)", mode="lines",
                line={"color": "#1d2733", "dash": "dot", "width": 1}, visible=rank == shown,
                hovertemplate=f"step %{{y:.3g}} ms<extra>rank {rank}</extra>"))
            count += 1
        visible.append([False] * start + [True] * count)
    width = len(fig.data)
    marks = {rank: _alarm_marks(trial["alarms"], rank, trial["series"][rank]["step"])
             for rank in ranks}
    first = marks[shown] if shown is not None else ([], [])
    fig.update_layout(shapes=first[0], annotations=first[1], hovermode="x unified")
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="ms per step (median per bin of steps)", rangemode="tozero")
    if len(ranks) > 1:
        buttons = [{"label": f"rank {rank}", "method": "update",
                    "args": [{"visible": v + [False] * (width - len(v))},
                             {"shapes": marks[rank][0], "annotations": marks[rank][1]}]}
                   for rank, v in zip(ranks, visible, strict=True)]
        fig.update_layout(updatemenus=[{"buttons": buttons, "direction": "down", "x": 0,
                                        "xanchor": "left", "y": 1, "yanchor": "bottom",
                                        "showactive": True,
                                        "active": ranks.index(shown)}])
    return fig


def _alarm_marks(alarms: list[dict[str, Any]], rank: int, steps: list[Any]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Vertical lines and labels of the alarms on `rank` (an alarm naming no rank: all);
    a label runs left of its line in the right half of the steps, else right of it, and
    labels step down so that alarms close together stay legible."""
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    known = [x for x in steps if x is not None]
    middle = (known[0] + known[-1]) / 2 if known else 0
    for a in alarms:
        if a["rank"] is not None and a["rank"] != rank or a["step"] is None:
            continue
        color = "#cf222e" if a["severity"] == "warning" else "#5b6775"
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": a["step"],
                       "x1": a["step"], "y0": 0, "y1": 1,
                       "line": {"color": color, "dash": "dash", "width": 1.5}})
        notes.append({"x": a["step"], "xref": "x", "y": 0.98 - 0.08 * (len(notes) % 5),
                      "yref": "paper", "yanchor": "top",
                      "text": escape(a["message"].split(" (", 1)[0]), "showarrow": False,
                      "font": {"color": color, "size": 11},
                      "xanchor": "right" if a["step"] > middle else "left",
                      "bgcolor": "rgba(255,255,255,0.8)"})
    return shapes, notes


def _colors(names: list[str]) -> dict[str, str]:
    extra = iter(EXTRA_COLORS * (1 + len(names) // len(EXTRA_COLORS)))
    return {n: PHASE_COLORS.get(n) or next(extra) for n in names}
