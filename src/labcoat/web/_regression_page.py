"""The dashboard's regression pages: the suites in the suites directory, and one suite's
history (pass@k of each scored checkpoint with its interval, the paired verdict against
the entry before, the items that regressed). Suites are files (`labcoat evals harvest`),
read on each request; every user string passes `html.escape`."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from labcoat import evals, report
from labcoat.web._pages import document


def suite_href(name: str) -> str:
    return f"/regression/{quote(name, safe='')}"


def suite_rows(directory: Path) -> list[dict[str, Any]]:
    """One row per suite file: name, items, revision, entries, the last verdict."""
    rows = []
    for path in evals.list_suites(directory):
        suite = evals.load_regression_suite(path)
        last = suite.history[-1] if suite.history else None
        rows.append({"name": path.stem, "suite": suite.name, "items": len(suite.items),
                     "revision": suite.revision, "entries": len(suite.history),
                     "last": last["label"] if last else None,
                     "decision": (last.get("versus") or {}).get("decision") if last else None})
    return rows


def suite_data(suite: evals.RegressionSuite) -> dict[str, Any]:
    """The JSON of /api/regression/NAME: the suite's summary and its history."""
    splits = {s: sum(i["split"] == s for i in suite.items) for s in ("tune", "holdout")}
    return {"name": suite.name, "revision": suite.revision, "items": len(suite.items),
            "splits": splits, "flaky": sum(bool(i.get("flaky")) for i in suite.items),
            "duplicates_removed": len(suite.duplicates), "harvests": suite.harvests,
            "history": suite.history}


def list_page(rows: list[dict[str, Any]], directory: Path) -> str:
    back = "<p class='noprint'><a href='/'>&larr; all experiments</a></p>"
    if not rows:
        return document("labcoat: regression suites", back + "<h1>Regression suites</h1>"
                        f"<p>no regression suite in <code>{escape(str(directory))}</code> yet: "
                        "<code>labcoat evals harvest EXPERIMENT --name NAME</code></p>")
    body = "".join(
        f"<tr><td class='text'><a href='{suite_href(r['name'])}'>{escape(r['name'])}</a></td>"
        f"<td>{r['items']}</td><td>{r['revision']}</td><td>{r['entries']}</td>"
        f"<td class='text'>{escape(r['last'] or '-')}</td>"
        f"<td class='text'>{escape(r['decision'] or '-')}</td></tr>" for r in rows)
    return document("labcoat: regression suites", back + "<h1>Regression suites</h1>"
                    "<table id='suites'><tr><th class='text'>suite</th><th>items</th>"
                    "<th>revision</th><th>entries</th><th class='text'>last scored</th>"
                    f"<th class='text'>verdict</th></tr>{body}</table>")


def suite_page(data: dict[str, Any]) -> str:
    history = data["history"]
    rows = []
    for entry in history:
        versus = entry.get("versus") or {}
        regressed = ", ".join(f"{t}/{i}" for t, i in versus.get("regressed_items", [])[:8])
        more = len(versus.get("regressed_items", [])) - 8
        rows.append(
            f"<tr><td class='text'>{escape(entry['label'])}</td>"
            f"<td class='text'>{escape(entry['time'][:19])}</td>"
            f"<td class='text'>{escape(entry['split'])}</td><td>{len(entry['items'])}</td>"
            f"<td>{_interval(entry['pass_at'].get('1'))}</td>"
            f"<td>{_interval(entry['pass_at'].get(_top(entry)))} (k={_top(entry)})</td>"
            f"<td>{_difference(versus)}</td>"
            f"<td class='text decision'>{escape(versus.get('decision', '-'))}</td>"
            f"<td class='text'>{escape(regressed)}{f' +{more}' if more > 0 else ''}</td></tr>")
    table = ("<table id='history'><tr><th class='text'>entry</th><th class='text'>scored "
             "(UTC)</th><th class='text'>split</th><th>items</th><th>pass@1 [95% CI]</th>"
             "<th>pass@k, largest k</th><th>vs previous: pass@1 difference [CI]</th>"
             "<th class='text'>verdict</th><th class='text'>regressed items</th></tr>"
             + "".join(rows) + "</table>") if rows else (
        "<p>nothing scored yet: <code>labcoat evals regress "
        f"{escape(data['name'])} EXPERIMENT --step N</code></p>")
    plot = report.figure_html(_figure(history), "history-plot") if history else ""
    head = (f"<header><h1>Regression suite {escape(data['name'])}</h1><p class='muted'>"
            f"{data['items']} items (revision {data['revision']}): {data['splits']['tune']} "
            f"tune, {data['splits']['holdout']} holdout; {data['flaky']} flaky when harvested; "
            f"{data['duplicates_removed']} duplicates removed; <a href='/api/regression/"
            f"{quote(data['name'], safe='')}'>JSON</a></p></header>")
    back = "<p class='noprint'><a href='/regression'>&larr; all regression suites</a></p>"
    return document(f"labcoat: regression suite {data['name']}",
                    back + head + plot + "<h2>History</h2>" + table, plots=bool(history))


def _top(entry: dict[str, Any]) -> str:
    return max(entry["pass_at"], key=int) if entry["pass_at"] else "1"


def _interval(interval: dict[str, Any] | None) -> str:
    if not interval:
        return "-"
    if interval["low"] is None:
        return f"{interval['point']:.3f}"
    return f"{interval['point']:.3f} [{interval['low']:.3f}, {interval['high']:.3f}]"


def _difference(versus: dict[str, Any]) -> str:
    if "estimate" not in versus:
        return escape(versus.get("note", "-")) if versus else "-"
    return (f"{versus['estimate']:+.3f} [{versus['low']:+.3f}, {versus['high']:+.3f}] "
            f"p={versus['p_value']:.3g}")


def _figure(history: list[dict[str, Any]]) -> Any:
    """pass@k of each entry (k = 1 and the largest k every entry has), with intervals."""
    import plotly.graph_objects as go

    labels = [f"{i + 1}. {e['label']}" for i, e in enumerate(history)]
    common = set.intersection(*(set(e["pass_at"]) for e in history)) or {"1"}
    fig = go.Figure()
    for k in sorted({"1", max(common, key=int)}, key=int):
        points = [e["pass_at"].get(k) or {} for e in history]
        y = [p.get("point") for p in points]
        up = [None if p.get("high") is None else p["high"] - p["point"] for p in points]
        down = [None if p.get("low") is None else p["point"] - p["low"] for p in points]
        fig.add_trace(go.Scatter(x=labels, y=y, mode="lines+markers", name=f"pass@{k}",
                                 error_y={"type": "data", "array": up, "arrayminus": down}))
    fig.update_layout(title="pass@k on the suite, 95% CI over items", yaxis_title="pass@k",
                      yaxis_range=[0, 1.05], height=360, margin={"t": 50, "b": 40})
    return fig
