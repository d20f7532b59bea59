"""The ledger in the terminal and as an HTML page (`labcoat ledger --html`, the dashboard)."""

from __future__ import annotations

from html import escape
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape as rich_escape
from rich.table import Table

from labcoat.analysis import Ledger, Score
from labcoat.report._plotly import figure_div, head_scripts, tail_scripts
from labcoat.report._status import print_wide

EMPTY = ("no hypothesis in the store carries a prediction yet: add `predict: {supported: "
         "0.6}` under a hypothesis (docs/ledger.md) and run it")


def _num(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def _entry_rows(found: Ledger) -> list[list[str]]:
    rows = []
    for e in found.entries:
        status = ("EDITED after trials started" if e.edits else e.note or "frozen "
                  + e.frozen_at[:19])
        rows.append([e.experiment, e.hypothesis, e.author, e.tag or "", _num(e.prior, ".2f"),
                     e.outcome, ", ".join(e.verdicts), _num(e.surprise, ".2f"),
                     _num(e.crps, ".3g"), status])
    return rows


HEADERS = ["experiment", "hypothesis", "author", "tag", "prior", "outcome", "verdict",
           "surprise (bits)", "CRPS (effect)", "prediction"]
SCORE_HEADERS = ["who", "n", "Brier", "reliability", "resolution", "uncertainty",
                 "log score (bits)", "CRPS", "Brier, 3 outcomes", "calibration"]


def _score_row(s: Score) -> list[str]:
    b = s.brier
    return [s.group, str(s.n), _num(b and b.brier), _num(b and b.reliability),
            _num(b and b.resolution), _num(b and b.uncertainty), _num(s.log_score),
            f"{_num(s.crps, '.3g')} ({s.crps_n})" if s.crps_n else "-",
            f"{_num(s.brier3)} ({s.brier3_n})" if s.brier3_n else "-",
            s.calibration_words if s.n else "nothing resolved yet"]


def print_ledger(found: Ledger, console: Console) -> None:
    if not found.entries:
        console.print(EMPTY, soft_wrap=True)
        return
    table = Table(*HEADERS, box=box.SIMPLE, title="Predictions")
    for row in _entry_rows(found):
        table.add_row(*(rich_escape(c) for c in row))
    print_wide(table, console)
    scores = Table(*SCORE_HEADERS, box=box.SIMPLE, title="Forecasters")
    for s in found.scores:
        scores.add_row(*(rich_escape(c) for c in _score_row(s)))
    print_wide(scores, console)
    for s in found.scores:
        for level in s.levels:
            console.print(f"{rich_escape(s.group)}: {rich_escape(level.words)}", soft_wrap=True)
    for e in found.entries:
        console.print(f"What changed: {rich_escape(e.experiment)} {rich_escape(e.change)}",
                      soft_wrap=True)


def reliability_figure(s: Score) -> Any:
    """Observed frequency against forecast per bin, Wilson 95% intervals, the diagonal;
    laid out as the report's figures are (title, legend, toolbar kept apart)."""
    import plotly.graph_objects as go

    from labcoat.report._figures import _figure

    fig = _figure(f"Reliability: {s.group} (95% Wilson intervals)")
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="calibrated",
                             line={"dash": "dash", "color": "gray"}))
    fig.add_trace(go.Scatter(
        x=[b.mean_forecast for b in s.bins], y=[b.observed for b in s.bins],
        mode="markers+lines", name=escape(s.group), text=[f"n={b.n}" for b in s.bins],
        error_y={"type": "data", "symmetric": False,
                 "array": [b.ci_high - b.observed for b in s.bins],
                 "arrayminus": [b.observed - b.ci_low for b in s.bins]}))
    fig.update_layout(xaxis={"title": {"text": "forecast P(supported)"}, "range": [0, 1]},
                      yaxis={"title": {"text": "observed frequency"}, "range": [0, 1]})
    return fig


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def ledger_body(found: Ledger) -> str:
    """The page's content: predictions, scores, reliability diagrams, plain words."""
    if not found.entries:
        return f"<h1>Prediction ledger</h1><p class='note'>{escape(EMPTY)}</p>"
    out = ["<h1>Prediction ledger</h1><h2>Predictions</h2>",
           _table(HEADERS, _entry_rows(found)), "<h2>Forecasters</h2>",
           _table(SCORE_HEADERS, [_score_row(s) for s in found.scores])]
    words = [f"<li>{escape(s.group)}: {escape(lv.words)}</li>" for s in found.scores
             for lv in s.levels]
    if words:
        out.append(f"<ul class='levels'>{''.join(words)}</ul>")
    for i, s in enumerate(s for s in found.scores if s.bins):
        out.append(figure_div(reliability_figure(s), f"reliability-{i}"))
    out.append("<h2>What changed: prior -&gt; result</h2>" + "".join(
        f"<p class='{'warning' if e.edits else 'change'}'>{escape(e.experiment)} "
        f"{escape(e.change)}</p>" for e in found.entries))
    return "".join(out)


def ledger_html(found: Ledger, *, plotly_src: str | None = None,
                back_href: str | None = None) -> str:
    """A self-contained page (plotly.js inlined) or, with plotly_src, one that loads it."""
    from labcoat.report._html import CSS

    back = (f"<p class='noprint'><a href='{escape(back_href)}'>&larr; all experiments</a></p>"
            if back_href else "")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width'><link rel='icon' href='data:,'>"
            f"<title>labcoat ledger</title><style>{CSS}</style>{head_scripts(plotly_src)}"
            f"</head><body>{back}{ledger_body(found)}{tail_scripts(plotly_src)}</body></html>")
