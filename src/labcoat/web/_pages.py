"""Dashboard pages other than the experiment's report: the experiment list, a trial,
two experiments compared, and errors. Every user string passes `html.escape`."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from labcoat import report
from labcoat.report import verdict_word

PLOTLY_SRC = "/static/plotly.min.js"


def experiment_href(name: str) -> str:
    return f"/experiments/{quote(name, safe='')}"


def trial_href(experiment: str, key: str) -> str:
    return f"/trial?experiment={quote(experiment, safe='')}&key={quote(key, safe='')}"


def document(title: str, body: str, *, plots: bool = False, refresh: int | None = None) -> str:
    head = (f"<meta charset='utf-8'><link rel='icon' href='data:,'><title>{escape(title)}"
            f"</title><style>{report.CSS}</style>"
            + (f"<script src='{PLOTLY_SRC}'></script>" if plots else "")
            + (f"<meta http-equiv='refresh' content='{int(refresh)}'>" if refresh else ""))
    return f"<!DOCTYPE html><html lang='en'><head>{head}</head><body>{body}</body></html>"


def verdict_badges(verdicts: list[dict[str, str]]) -> str:
    if not verdicts:
        return "<span class='muted'>-</span>"
    return "<br>".join(
        f"<span class='verdict-{v['verdict']}'><b class='word'>{verdict_word(v['verdict'])}"
        "</b></span>"
        f" {escape(v['variant'])} vs {escape(v['control'])}" for v in verdicts)


def experiments_page(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return document("labcoat", "<header><h1>labcoat</h1></header><p>no experiments yet: "
                        "<code>labcoat run design.yaml</code></p>")
    body = "".join(
        f"<tr><td class='text'><a href='{experiment_href(r['name'])}'>{escape(r['name'])}</a>"
        f"</td><td class='text'>{escape(r['status'])}</td><td>{r['done']}/{r['trials']}</td>"
        f"<td>{r['failed']}</td><td class='text'>{verdict_badges(r['verdicts'])}</td>"
        f"<td class='text'>{escape(r['created_at'][:19])}</td></tr>" for r in rows)
    options = "".join(f"<option value='{escape(r['name'])}'>{escape(r['name'])}</option>"
                      for r in rows)
    compare = (f"<form method='get' action='/compare' class='noprint'><h2>Compare two "
               f"experiments</h2><select name='a'>{options}</select> with "
               f"<select name='b'>{options}</select> <button type='submit'>compare</button>"
               "</form>")
    table = ("<table id='experiments'><tr><th class='text'>experiment</th><th class='text'>"
             "status</th><th>done</th><th>failed</th><th class='text'>verdicts</th>"
             f"<th class='text'>created (UTC)</th></tr>{body}</table>")
    return document("labcoat: experiments", "<header><h1>Experiments</h1><p class='muted'>"
                    "labcoat dashboard (read-only); <a href='/ledger'>prediction ledger</a>; "
                    "<a href='/regression'>regression suites</a>"
                    "</p></header>" + table + compare)


def trial_page(experiment: str, trial: dict[str, Any], plots: list[str],
               checkpoints: list[dict[str, Any]], logs: list[str], refresh: int | None, *,
               phase_plot: str = "") -> str:
    """phase_plot: the trial's step time by phase (report.phase_plot's div), if timed."""
    back = (f"<p class='noprint'><a href='{experiment_href(experiment)}'>&larr; experiment "
            f"{escape(experiment)}</a></p>")
    params = ", ".join(f"{escape(str(k))}={escape(str(v))}" for k, v in trial["params"].items())
    head = (f"<header><h1>Trial {escape(trial['key'])}</h1><p class='muted'>arm "
            f"{escape(trial['arm'])}, seed {escape(str(trial['seed']))}, status "
            f"<b id='status'>{escape(trial['status'])}</b>, {trial['attempts']} attempt(s)"
            f"</p><p>params: {params or '-'}</p><p>command: <code>"
            f"{escape(trial['command_line'])}</code></p></header>")
    curves = "".join(plots) or "<p class='note'>no metric logged yet.</p>"
    attempts = "".join(
        f"<tr><td>{a['number']}</td><td class='text'>{escape(a['started_at'][:19])}</td>"
        f"<td>{'' if a['seconds'] is None else format(a['seconds'], '.1f')}</td>"
        f"<td>{_blank(a['reached_step'])}</td><td>{_blank(a['resumed_from'])}</td>"
        f"<td class='text'>{escape(a['cause'] or 'running')}</td>"
        f"<td class='text'>{escape(a['host'] or '')}</td></tr>" for a in trial["attempt_history"])
    alerts = "".join(
        f"<tr><td>{_blank(a['step'])}</td><td class='text sev-{escape(a['severity'])}'>"
        f"{escape(a['severity'])}</td><td class='text'>{escape(a['rule'])}</td>"
        f"<td class='text'>{escape(a['message'])}</td></tr>" for a in trial["alerts"])
    ckpts = "".join(
        f"<tr><td>{c['step']}</td><td>{_blank(c['bytes'])}</td><td class='text'>"
        f"{'yes' if c['verified'] else 'no'}</td><td class='text'>"
        f"{'deleted' if c['deleted'] else 'kept'}</td><td class='text'><code>"
        f"{escape(c['path'])}</code></td></tr>" for c in checkpoints)
    body = (back + head + "<h2>Curves</h2>" + curves
            + (f"<h2 id='phases'>Step time by phase</h2>{phase_plot}" if phase_plot else "")
            + "<h2>Alerts</h2>" + (f"<table><tr><th>step</th><th class='text'>severity</th>"
                                  f"<th class='text'>rule</th><th class='text'>message</th></tr>"
                                  f"{alerts}</table>" if alerts else "<p>no guard alerts.</p>")
            + "<h2>Attempts</h2><table><tr><th>#</th><th class='text'>started (UTC)</th>"
              "<th>seconds</th><th>reached step</th><th>resumed from</th><th class='text'>"
              f"cause</th><th class='text'>host</th></tr>{attempts}</table>"
            + "<h2>Checkpoints</h2>" + (
                "<table><tr><th>step</th><th>bytes</th><th class='text'>verified</th>"
                f"<th class='text'>retention</th><th class='text'>path</th></tr>{ckpts}</table>"
                if ckpts else "<p>no checkpoints recorded.</p>")
            + f"<h2>Logs</h2><p class='muted'>the last {len(logs)} line(s) the trial printed "
              "(<code>labcoat logs</code> filters them all)</p><pre id='logs'>"
            + escape("\n".join(logs)) + "</pre>")
    return document(f"labcoat: {experiment} / {trial['key']}", body, plots=True,
                    refresh=refresh)


def compare_page(sides: list[dict[str, Any]], plots: list[str]) -> str:
    """sides: per experiment {"name", "status", "verdicts", "arms": [(arm, interval text)]}."""
    cols = []
    for s in sides:
        arms = "".join(f"<tr><td>{escape(arm)}</td><td>{text}</td></tr>" for arm, text in
                       s["arms"])
        cols.append(f"<div class='side'><h2><a href='{experiment_href(s['name'])}'>"
                    f"{escape(s['name'])}</a></h2><p class='muted'>{escape(s['status'])}; "
                    f"primary metric {escape(s['metric'])}</p><p>{verdict_badges(s['verdicts'])}"
                    f"</p><table><tr><th>arm</th><th>mean [95% CI] across seeds</th></tr>{arms}"
                    "</table></div>")
    style = "<style>.sides{display:flex;gap:24px;flex-wrap:wrap}.side{flex:1 1 400px}</style>"
    names = " vs ".join(s["name"] for s in sides)
    body = (style + "<p class='noprint'><a href='/'>&larr; all experiments</a></p>"
            f"<header><h1>{escape(names)}</h1></header><div class='sides'>{''.join(cols)}</div>"
            "<h2>Curves (solid: first experiment, dashed: second)</h2>"
            + ("".join(plots) or "<p class='note'>no metric both experiments logged.</p>"))
    return document(f"labcoat: {names}", body, plots=True)


def error_page(status: int, message: str) -> str:
    return document(f"labcoat: {status}", f"<p><a href='/'>&larr; all experiments</a></p>"
                    f"<h1>{status}</h1><p id='error'>{escape(message)}</p>")


def _blank(value: Any) -> str:
    return "" if value is None else escape(str(value))
