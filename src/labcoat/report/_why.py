"""The "why" section of the HTML report and the dashboard: what `labcoat inside` saved.

Components ranked by the share of the control-variant difference that patching them
restores, with intervals and verdicts (a forest plot and a table), then the eval items
that flipped between the arms with the training examples they lean on most, and the
training examples self-influence flags. The data is `analysis.Why`, read from the file
`labcoat inside` saved; nothing is computed here. Every string from the models' data
(component names, item ids, training examples) goes through `html.escape`.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from labcoat.analysis import ComponentRow, Why

TOP_COMPONENTS = 15  # rows of the table and the plot; the rest are counted


def why_html(why: Why | None, experiment: str, plot: Callable[[Any], str]) -> str:
    """The section's HTML; `plot` turns a Plotly figure into the page's div."""
    if why is None:
        return (f"<p class='note'>not computed: <code>labcoat inside {escape(experiment)} "
                "--control ARM --variant ARM</code> compares the two arms' models (which "
                "components carry the difference) and, with <code>--influence</code>, "
                "traces the items that flipped to the training examples they lean on.</p>")
    out = [f"<p class='note'>{escape(p)}</p>" for p in why.problems]
    out.append("<h3>Components that carry the difference</h3>")
    out.append(_components(why, plot) if why.patching else
               "<p class='note'>no patching saved yet (<code>labcoat inside</code>).</p>")
    out.append("<h3>Flipped eval items and the training examples they lean on</h3>")
    out.append(_influence(why.influence) if why.influence else
               "<p class='note'>no training-data attribution saved yet (<code>labcoat "
               "inside ... --influence</code>).</p>")
    out.append(f"<p class='muted'>saved in {escape(str(why.path))}</p>")
    return "".join(out)


def _components(why: Why, plot: Callable[[Any], str]) -> str:
    saved = why.patching or {}
    result = saved.get("result", {})
    patching = result.get("patching", {})
    rows = why.components()
    d = patching.get("difference") or {}
    head = (f"<p>{escape(str(saved.get('variant')))} vs {escape(str(saved.get('control')))}: "
            f"{escape(str(patching.get('metric', 'metric')))} differs by "
            f"{_num(d.get('estimate'))} [{_num(d.get('low'))}, {_num(d.get('high'))}] over "
            f"{patching.get('seeds', '?')} seed pair(s) and {patching.get('items', '?')} "
            f"items; verdicts {escape(str(patching.get('correction', '')))}-corrected over "
            f"{patching.get('family_size', '?')} components. Attribution patching agrees "
            f"with exact patching at Spearman {_num(patching.get('agreement_spearman'))}. "
            f"Saved {escape(str(saved.get('saved_at', '')))}.</p>")
    if not rows:
        return head + "<p class='note'>no component was patched.</p>"
    shown = rows[:TOP_COMPONENTS]
    table = ["<table><tr><th>rank</th><th class='text'>component</th><th class='text'>kind"
             "</th><th>share restored</th><th>interval</th><th>reverse</th><th>attribution"
             "</th><th class='text'>verdict</th></tr>"]
    for r in shown:
        verdict = ("<b class='sev-info' style='color:var(--ok)'>carries it</b>" if r.carries
                   else "<span class='muted'>not shown</span>")
        table.append(f"<tr><td>{r.rank}</td><td class='text'><code>{escape(r.name)}</code></td>"
                     f"<td class='text'>{escape(r.kind)}</td><td>{_num(r.share)}</td>"
                     f"<td>[{_num(r.low)}, {_num(r.high)}]</td><td>{_num(r.reverse)}</td>"
                     f"<td>{_num(r.attribution)}</td><td class='text'>{verdict}</td></tr>")
    table.append("</table>")
    more = (f"<p class='muted'>{len(rows) - len(shown)} more components not listed.</p>"
            if len(rows) > len(shown) else "")
    notes = "".join(f"<p class='note'>{escape(str(n))}</p>" for n in result.get("notes", []))
    return head + plot(_forest(shown)) + "".join(table) + more + notes


def _forest(rows: list[ComponentRow]) -> Any:
    """Forward shares with their intervals, rank 1 at the top; unverified rows show the
    attribution estimate as an open marker."""
    import plotly.graph_objects as go

    verified = [r for r in rows if r.share is not None]
    screened = [r for r in rows if r.share is None]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[r.share for r in verified], y=[r.name for r in verified], mode="markers",
        name="exact patching", marker={"color": "#1d2733"},
        error_x={"type": "data", "symmetric": False,
                 "array": [(r.high or r.share) - r.share for r in verified],
                 "arrayminus": [r.share - (r.low or r.share) for r in verified]}))
    if screened:
        fig.add_trace(go.Scatter(x=[r.attribution for r in screened],
                                 y=[r.name for r in screened], mode="markers",
                                 name="attribution (not verified)",
                                 marker={"symbol": "circle-open", "color": "#5b6775"}))
    fig.add_vline(x=0, line_dash="dot", line_color="#5b6775")
    fig.update_layout(height=120 + 24 * len(rows), margin={"l": 10, "r": 10, "t": 30, "b": 30},
                      xaxis_title="share of the difference restored",
                      yaxis={"autorange": "reversed"}, title="components by share")
    return fig


def _influence(saved: dict[str, Any]) -> str:
    result = saved.get("result", {})
    methods = result.get("methods", [])
    out = [f"<p>{result.get('flipped', 0)} eval item(s) flipped between "
           f"{escape(str(saved.get('control')))} and {escape(str(saved.get('variant')))}; "
           f"methods: {escape(', '.join(methods))}. Saved "
           f"{escape(str(saved.get('saved_at', '')))}.</p>"]
    out += [f"<p class='note'>{escape(str(n))}</p>" for n in result.get("notes", [])]
    for t in result.get("trials", []):
        steps = ", ".join(str(s) for s in t.get("checkpoints", []))
        out.append(f"<h4>{escape(str(t.get('role')))} trial {escape(str(t.get('trial')))} "
                   f"(arm {escape(str(t.get('arm')))}, seed {escape(str(t.get('seed')))})</h4>"
                   f"<p class='muted'>TracIn over checkpoints at steps {escape(steps)}; "
                   f"{t.get('pool')} of {t.get('training_size')} training examples scored."
                   "</p>")
        if t.get("items"):
            out.append(_items_table(t["items"], methods))
        flagged = t.get("flagged", [])
        if flagged:
            out.append("<p>Highest self-influence (likeliest mislabeled or duplicated; "
                       f"median over the scored examples {_num(t.get('self_influence_median'))}"
                       "):</p><table><tr><th>example</th><th>self-influence</th>"
                       "<th class='text'>content</th></tr>"
                       + "".join(f"<tr><td>#{e['index']}</td><td>{_num(e['score'])}</td>"
                                 f"<td class='text'><code>{escape(str(e['text']))}</code></td>"
                                 "</tr>" for e in flagged) + "</table>")
    return "".join(out)


def _items_table(items: list[dict[str, Any]], methods: list[str]) -> str:
    rows = ["<table><tr><th class='text'>item</th><th>control</th><th>variant</th>"
            "<th class='text'>method</th><th class='text'>top proponents (score)</th>"
            "<th class='text'>top opponents (score)</th></tr>"]
    for item in items:
        for k, method in enumerate(methods):
            first = (f"<td class='text' rowspan='{len(methods)}'><code>"
                     f"{escape(str(item['item']))}</code></td><td rowspan='{len(methods)}'>"
                     f"{_num(item['control'])}</td><td rowspan='{len(methods)}'>"
                     f"{_num(item['variant'])}</td>") if k == 0 else ""
            rows.append(f"<tr>{first}<td class='text'>{escape(method)}</td>"
                        f"<td class='text'>{_examples(item['proponents'].get(method, []))}</td>"
                        f"<td class='text'>{_examples(item['opponents'].get(method, []))}</td>"
                        "</tr>")
    rows.append("</table>")
    return "".join(rows)


def _examples(examples: list[dict[str, Any]]) -> str:
    return "<br>".join(f"#{e['index']} <code>{escape(str(e['text']))}</code> "
                       f"({_num(e['score'])})" for e in examples)


def _num(x: Any) -> str:
    if x is None:
        return "–"
    try:
        return f"{float(x):.3g}"
    except (TypeError, ValueError):
        return escape(str(x))
