"""The HTML report: one self-contained page per experiment (`labcoat report EXP --html`),
also the dashboard's experiment page.

It renders a `ReportPage` (report._page: the terminal report's Analysis plus
design, review, curves, timeline and commands) with the figures of
report._figures, in the order a reader asks: the verdicts and their forest plots,
then the curves (small multiples), then the details. plotly.js is in the page once,
packed (report._plotly), so the file opens without a network; the dashboard passes
a URL instead. Every string that comes from a user (names, claims, messages, commands)
goes through `html.escape`. Each section says when its capability has nothing to show.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from typing import Any

from labcoat.analysis import (
    AGGREGATES,
    MACRO,
    SEED_CAVEAT,
    Comparison,
    HypothesisResult,
    ReportPage,
    entries_of,
    verdict_word,
)
from labcoat.errors import LabcoatError
from labcoat.report._evals import difference_cells, evaluations_title, interval_text
from labcoat.report._plotly import figure_div, head_scripts, packed_plotly_js, tail_scripts
from labcoat.report._plotly import plotly_js as plotly_js  # report.plotly_js (the dashboard)
from labcoat.report._status import alert_groups, goodput_line
from labcoat.report._terminal import (
    _interval,  # one wording of an interval in both reports
    trials_line,
    verdict_statements,
)
from labcoat.stats import Adjusted, Difference

CSS = """
:root { --ink: #1d2733; --muted: #5b6775; --line: #d8dee6; --bg: #f6f8fa;
  --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; }
* { box-sizing: border-box; }
body { font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  margin: 0 auto; max-width: 1100px; padding: 0 20px 40px; }
header { border-bottom: 2px solid var(--ink); margin-bottom: 12px; padding: 16px 0 8px; }
h1 { margin: 0; font-size: 24px; } h2 { border-bottom: 1px solid var(--line); margin-top: 32px;
  padding-bottom: 4px; font-size: 19px; } h3 { font-size: 15px; margin-bottom: 4px; }
.muted, .note { color: var(--muted); } .note { font-style: italic; }
nav a { margin-right: 12px; color: var(--muted); } a { color: #0969da; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 10px; text-align: right;
  vertical-align: top; } th:first-child, td:first-child { text-align: left; }
td.text, th.text { text-align: left; } th { background: var(--bg); }
pre, code { font: 12px/1.4 ui-monospace, Menlo, Consolas, monospace; }
pre { background: var(--bg); padding: 10px; overflow-x: auto; border: 1px solid var(--line); }
.verdict { border: 1px solid var(--line); border-left: 6px solid var(--warn); padding: 8px 12px;
  margin: 8px 0; background: #fff; }
.verdict b.word { letter-spacing: .04em; }
.verdict-supported { border-left-color: var(--ok); } .verdict-supported b.word { color: var(--ok); }
.verdict-refuted { border-left-color: var(--bad); } .verdict-refuted b.word { color: var(--bad); }
.verdict-inconclusive b.word, .verdict-negligible b.word, .verdict-aliased b.word {
  color: var(--warn); }
.verdict-no-effect { border-left-color: var(--ok); }
.sev-error, .sev-critical { color: var(--bad); font-weight: 600; }
.sev-warning { color: var(--warn); font-weight: 600; } .sev-info { color: var(--muted); }
.warning { color: var(--warn); } .figure { break-inside: avoid; page-break-inside: avoid; }
@media print {
  nav, .noprint { display: none; } body { max-width: none; padding: 0; font-size: 11px; }
  h2 { break-after: avoid; page-break-after: avoid; } section { break-inside: auto; }
  .verdict, table, pre { break-inside: avoid; page-break-inside: avoid; }
  a { color: inherit; text-decoration: none; } pre { white-space: pre-wrap; }
}
"""


def render_html(page: ReportPage, *, plotly_src: str | None = None, refresh: int | None = None,
                trial_href: Callable[[str], str] | None = None, back_href: str | None = None
                ) -> str:
    """The page as one HTML document.

    plotly_src: None inlines plotly.js (a self-contained file); else the URL of the bundle.
    refresh: seconds after which the browser reloads (a live dashboard page).
    trial_href: link target of each trial's key (the dashboard's trial pages).
    """
    renderer = _Renderer(page, trial_href)
    body = renderer.body()
    head = (f"<meta charset='utf-8'><meta name='viewport' content='width=device-width'>"
            "<link rel='icon' href='data:,'>"  # no favicon request (offline, no 404)
            f"<title>labcoat report: {escape(page.experiment['name'])}</title>"
            + (f"<meta http-equiv='refresh' content='{int(refresh)}'>" if refresh else "")
            + f"<style>{CSS}</style>{head_scripts(plotly_src)}")
    back = f"<p class='noprint'><a href='{escape(back_href)}'>&larr; all experiments</a></p>" \
        if back_href else ""
    return (f"<!DOCTYPE html><html lang='en'><head>{head}</head><body>{back}{body}"
            f"{tail_scripts(plotly_src)}</body></html>")


def figure_html(fig: Any, div_id: str) -> str:
    """A figure as a div and the inline script that draws it, for pages that load plotly.js
    with a plain <script src> first (the dashboard's trial and compare pages). Plotly's
    JSON escapes "</" so no label can close the script."""
    import plotly.io as pio

    return "<div class='figure'>" + pio.to_html(
        fig, full_html=False, include_plotlyjs=False, div_id=div_id,
        config={"displaylogo": False, "responsive": True}) + "</div>"


class _Renderer:
    """Builds the body section by section; figures get unique div ids."""

    def __init__(self, page: ReportPage, trial_href: Callable[[str], str] | None) -> None:
        from labcoat.report import _figures

        self.page, self.a, self.fig = page, page.analysis, _figures
        self.trial_href = trial_href
        arms = [arm.arm for r in self.a.results for arm in r.arms]
        arms += [arm for per in page.curves.values() for arm in per]
        arms += [t["arm"] for t in page.trials]
        self.palette = _figures.colors(list(dict.fromkeys(arms)))
        self.count = 0

    def plot(self, fig: Any) -> str:
        self.count += 1
        return figure_div(fig, f"fig{self.count}")

    def body(self) -> str:
        # what a reader asks first: the verdict and its effects, then how training went
        sections = [("verdicts", "Verdicts", self.verdicts()),
                    ("curves", "Training and eval curves", self.curves()),
                    ("phases", "Step time by phase", self.phases()),
                    ("hypotheses", "Hypotheses, effects and intervals", self.hypotheses()),
                    ("evaluations", "Eval items", self.evaluations()),
                    ("why", "Why: inside the models", self.why()),
                    ("design", "Design and pre-registration", self.design()),
                    ("review", "Design review", self.review()),
                    ("scaling", "Scaling", self.scaling()),
                    ("incidents", "Incidents, restarts and goodput", self.incidents()),
                    ("trials", "Trials and how to reproduce them", self.trials()),
                    ("changes", "What changed: prior -> result", self.changes())]
        e = self.page.experiment
        nav = "".join(f"<a href='#{sid}'>{title}</a>" for sid, title, html in sections
                      if html is not None)
        out = [f"<header><h1>Experiment {escape(e['name'])}</h1>"
               f"<p class='muted'>status <b id='status'>{escape(e['status'])}</b>; "
               f"{escape(trials_line(self.a))}; design "
               f"{escape((e['design_hash'] or '')[:12])}; generated "
               f"{escape(self.page.generated_at)} by labcoat</p></header><nav>{nav}</nav>"]
        out += [f"<section id='{sid}'><h2>{title}</h2>{html}</section>"
                for sid, title, html in sections if html is not None]
        return "".join(out)

    # --- sections ---------------------------------------------------------------------

    def changes(self) -> str:
        """Each hypothesis: the prior frozen before the first trial -> the verdict."""
        entries = entries_of(self.a)
        if not any(e.prior is not None or e.note for e in entries):
            return ("<p class='note'>no prediction stated: add <code>predict: {supported: "
                    "P}</code> under a hypothesis to see what the run changed.</p>")
        return "".join(f"<p class='{'warning' if e.edits else 'change'}'>{escape(e.change)}"
                       "</p>" for e in entries)

    def verdicts(self) -> str:
        a = self.a
        out = [f"<p class='note'>{escape(a.note)}</p>"] if a.note else []
        for result in a.results:
            prefix = f"{result.hypothesis.id}, " if len(a.results) > 1 else ""
            if not result.comparisons:
                out.append(f"<p class='note'>{escape(prefix)}no comparison to judge yet.</p>")
            for c in result.comparisons:
                reason, *more = verdict_statements(c)  # what the terminal says, no more
                out.append(
                    f"<div class='verdict verdict-{c.verdict}' data-verdict='{c.verdict}'>"
                    f"{escape(prefix)}<b>{escape(c.variant)}</b> vs <b>{escape(c.control)}</b>: "
                    f"<b class='word'>{verdict_word(c.verdict)}</b> &mdash; {escape(reason)}"
                    + "".join(f"<br><span class='muted'>{escape(line)}</span>" for line in more)
                    + "</div>")
        if a.family and sum(len(r.comparisons) for r in a.results) > 1:
            out.append(f"<p class='muted'>Family of the verdicts: {escape(a.family)}</p>")
        for message in a.warnings:
            out.append(f"<p class='warning'>warning: {escape(message)}</p>")
        for key, why in a.excluded:
            out.append(f"<p class='muted'>not counted: {escape(key)} - {escape(why)}</p>")
        out += [self.plot(self.fig.forest_plot(c, result)) for result in a.results
                for c in result.comparisons if c.seeds is not None]
        for variant, s in a.sequential.items():
            out.append(f"<p>sequential (anytime-valid, pre-registered): {escape(variant)} - "
                       f"{escape(str(s['decision']))} after {s['n']} seeds per arm, "
                       f"{100 * (1 - s['alpha']):.3g}% confidence sequence "
                       f"[{_num(s['low'], '+.4g')}, {_num(s['high'], '+.4g')}]</p>")
        return "".join(out) or "<p class='note'>no hypothesis to judge.</p>"

    def design(self) -> str:
        a, page = self.a, self.page
        if not page.design_yaml:
            return "<p class='note'>ad-hoc experiment: no design file, no pre-registration.</p>"
        out = []
        plan = a.registration
        if plan:
            out.append(f"<p>Pre-registered analysis plan <code>{escape(plan['hash'][:12])}"
                       f"</code>, frozen {escape(str(plan['frozen_at'])[:19])} UTC.</p>")
            for am in plan.get("amendments", []):
                out.append(f"<p class='warning'>amended {escape(str(am['at'])[:19])} "
                           f"({escape(', '.join(am['changed']))}): {escape(am['reason'])}</p>")
            for ed in plan.get("prediction_edits", []):
                when = "after trials started" if ed.get("after_trials") else "before any trial"
                out.append(f"<p class='warning prediction-edit'>prediction of "
                           f"{escape(ed['hypothesis'])} EDITED {when} "
                           f"{escape(str(ed['at'])[:19])}: {escape(str(ed['from']))} &rarr; "
                           f"{escape(str(ed['to']))} (the ledger scores the prediction stated "
                           "before the first trial)</p>")
        else:
            out.append("<p class='note'>no pre-registered plan recorded (the experiment "
                       "has not been run by `labcoat run`).</p>")
        if a.counts:
            rows = "".join(f"<tr><td>{escape(arm)}</td>"
                           + "".join(f"<td>{c.get(s, 0)}</td>" for s in _STATUSES) + "</tr>"
                           for arm, c in a.counts.items())
            out.append("<table><tr><th>arm</th>" + "".join(f"<th>{s}</th>" for s in _STATUSES)
                       + f"</tr>{rows}</table>")
        if a.late_trials:
            out.append(f"<p class='warning'>added after results were seen: "
                       f"{escape(', '.join(a.late_trials))}</p>")
        out.append(f"<h3>design.yaml</h3><pre>{escape(page.design_yaml.rstrip())}</pre>")
        return "".join(out)

    def review(self) -> str:
        findings = self.page.findings
        if findings is None:
            return "<p class='note'>ad-hoc experiment: no design to review.</p>"
        if not findings:
            return "<p>no findings: the design looks sound (`labcoat lint`).</p>"
        rows = "".join(
            f"<tr><td class='text'>{escape(f.where)}</td><td class='text sev-{f.severity}'>"
            f"{f.severity}</td><td class='text'>{escape(f.rule)}</td><td class='text'>"
            f"{escape(f.message)}" + (f"<br><span class='muted'>fix: {escape(f.fix)}</span>"
                                      if f.fix else "") + "</td></tr>"
            for f in findings)
        return ("<p class='muted'>`labcoat lint` on the design as it was frozen.</p><table>"
                "<tr><th>where</th><th class='text'>severity</th><th class='text'>rule</th>"
                f"<th class='text'>finding</th></tr>{rows}</table>")

    def hypotheses(self) -> str:
        out = []
        for result in self.a.results:
            out.append(self.hypothesis(result))
        if self.a.secondary:
            arms = list(dict.fromkeys(a for per in self.a.secondary.values() for a in per))
            rows = "".join(f"<tr><td>{escape(m)}</td>"
                           + "".join(f"<td>{_interval(per.get(arm))}</td>" for arm in arms)
                           + "</tr>" for m, per in self.a.secondary.items())
            out.append("<h3>Secondary metrics (last value; described, not judged)</h3><table>"
                       "<tr><th>metric</th>" + "".join(f"<th>{escape(a)}</th>" for a in arms)
                       + f"</tr>{rows}</table>")
        return "".join(out) or "<p class='note'>no hypothesis declared.</p>"

    def hypothesis(self, result: HypothesisResult) -> str:
        h = result.hypothesis
        source = ("per-item eval scores at each trial's last eval, macro-averaged over tasks"
                  if h.source == "items" else "last logged value")
        out = [f"<h3>{escape(h.id or 'H1')}: {escape(h.claim)}</h3>"
               f"<p class='muted'>primary metric {escape(h.metric)} ({source}); predicted "
               f"{escape(h.direction)} vs {escape(result.control or '?')}, "
               f"alpha={h.alpha:g}</p>"]
        arms = result.arms
        head = "".join(f"<th>{escape(arm.arm)} (n={len(arm.values)})</th>" for arm in arms)
        rows = [f"<tr><td><b>{MACRO if result.tasks else 'overall'}</b></td>"
                + "".join(f"<td>{_interval(arm.overall)}</td>" for arm in arms) + "</tr>"]
        rows += [f"<tr><td>{escape(task)}</td>"
                 + "".join(f"<td>{_interval(arm.per_task.get(task))}</td>" for arm in arms)
                 + "</tr>" for task in result.tasks]
        out.append(f"<table><caption class='muted'>mean and 95% CI across seeds. "
                   f"{escape(SEED_CAVEAT)}</caption>"
                   f"<tr><th>task</th>{head}</tr>{''.join(rows)}</table>")
        if any(arm.values for arm in arms):
            out.append(self.plot(self.fig.arms_plot(result, self.palette)))
        if any(arm.aggregates for arm in arms):
            agg = "".join(f"<tr><td>{n.replace('_', ' ')}</td>"
                          + "".join(f"<td>{_interval(arm.aggregates.get(n))}</td>" for arm in arms)
                          + "</tr>" for n in AGGREGATES)
            out.append("<h3>Aggregate intervals over runs x tasks</h3><p class='muted'>"
                       "stratified bootstrap, expanded 95% CIs (Agarwal et al. 2021)</p>"
                       "<table><tr><th>aggregate</th>"
                       + "".join(f"<th>{escape(arm.arm)}</th>" for arm in arms)
                       + f"</tr>{agg}</table>")
            out.append(self.plot(self.fig.aggregates_plot(result, self.palette)))
        for c in result.comparisons:
            out.append(self.comparison(c, result))
        return "".join(out)

    def evaluations(self) -> str:
        return self.item_scores() + self.prompts()

    def phases(self) -> str | None:
        """Step time by phase (report._phases); None, so no section, when no phase was
        timed."""
        if not self.a.phases:
            return None
        from labcoat.report._phases import phases_html

        return phases_html(self.a.phases, self.plot)

    def why(self) -> str:
        """What `labcoat inside` saved: components ranked, flipped items' training data."""
        from labcoat.report._why import why_html

        return why_html(self.page.why, self.page.experiment["name"], self.plot)

    def prompts(self) -> str:
        """Prompt-format sensitivity, as the terminal report's (report._evals.print_prompts)."""
        data = self.a.prompts
        if not data:
            return ""
        out = ["<h3>Prompt-format sensitivity</h3>"]
        if "note" in data:
            return out[0] + f"<p class='note'>{escape(data['note'])}</p>"
        arms = data["arms"]
        head = "".join(f"<th>{escape(a['arm'])}</th>" for a in arms)
        rows = [f"<tr><td>{escape(name)}</td>" + "".join(
            f"<td>{interval_text(a['templates'][name])}</td>" for a in arms) + "</tr>"
            for name in data["templates"]]
        rows.append("<tr><td>spread (max-min)</td>" + "".join(
            f"<td>{interval_text({'point': a['spread']['estimate'], **a['spread']})}</td>"
            for a in arms) + "</tr>")
        rows.append("<tr><td>p (no template effect)</td>" + "".join(
            f"<td>{_num(a['spread']['p_value'], '.2g')}</td>" for a in arms) + "</tr>")
        out.append(f"<table><caption class='muted'>{data['items']} items, paired over "
                   f"templates: mean [95% CI]</caption><tr><th>template</th>{head}</tr>"
                   f"{''.join(rows)}</table>")
        out += [f"<p>template check {escape(c['variant'])} vs {escape(c['control'])}: "
                f"<b>{escape(c['verdict'].upper())}</b> - {escape(c['reason'])}</p>"
                for c in data["comparisons"]]
        out += [f"<p class='warning'>warning: {escape(m)}</p>" for m in data.get("warnings", [])]
        return "".join(out)

    def item_scores(self) -> str:
        """The eval items no hypothesis judges, as their own metric: the terminal report's
        `evaluations` section (report._evals), never in a hypothesis's table or plot."""
        data = self.a.evaluations
        if not data:
            judged = any(r.hypothesis.source == "items" for r in self.a.results)
            return ("<p class='note'>the eval items are the hypothesis's metric: see above.</p>"
                    if judged else "<p class='note'>no eval items logged (run.log_items).</p>")
        judged = ", ".join(data.get("judged_by", []))
        out = [f"<p class='muted'>eval items (run.log_items), metric "
               f"{escape(data.get('metric', 'item score'))}"
               + (f"; not the hypothesis's metric ({escape(judged)}): described, not judged"
                  if judged else "") + "</p>"]
        if data.get("arms"):
            head = "".join(f"<th>{escape(a['arm'])} (n={a['trials']})</th>"
                           for a in data["arms"])
            rows = "".join(f"<tr><td>{escape(task)}</td>" + "".join(
                f"<td>{interval_text(a['tasks'].get(task))}</td>" for a in data["arms"])
                + "</tr>" for task in data["tasks"])
            out.append(f"<table><caption class='muted'>{escape(evaluations_title(data))}"
                       f"</caption><tr><th>task</th>{head}</tr>{rows}</table>")
        out += [f"<p class='warning'>warning: {escape(m)}</p>" for m in data.get("warnings", [])]
        if data["comparisons"]:
            out.append(f"<p>each arm minus {escape(data['control'])}, paired over shared items "
                       "(eval noise only)</p>")
        for c in data["comparisons"]:
            if "note" in c:
                out.append(f"<p class='note'>{escape(c['arm'])}: {escape(c['note'])}</p>")
                continue
            control = c["a"]["path"].rsplit("/", 1)[-1]
            rows = [(t["task"], str(t["items_a"]), f"{t['mean_a']:.3f}", f"{t['mean_b']:.3f}",
                     *difference_cells(t["adjusted"] or t["difference"])) for t in c["tasks"]]
            if len(c["tasks"]) > 1:
                rows.append((MACRO, "", "", "", *difference_cells(c["overall"])))
            ci = "CI (Holm over tasks)" if any(t["adjusted"] for t in c["tasks"]) else "95% CI"
            head = "".join(f"<th>{escape(h)}</th>" for h in
                           ("task", "items", control, c["arm"], "diff", ci, "p"))
            body = "".join("<tr>" + "".join(f"<td>{escape(x)}</td>" for x in r) + "</tr>"
                           for r in rows)
            out.append(f"<h3>{escape(c['arm'])} - {escape(control)} "
                       f"({'paired' if c['paired'] else 'UNPAIRED'})</h3>"
                       f"<table><tr>{head}</tr>{body}</table>")
        return "".join(out)

    def comparison(self, c: Comparison, result: HypothesisResult) -> str:
        title = f"<h3>{escape(c.variant)} - {escape(c.control)}</h3>"
        if c.seeds is None:
            return title + f"<p class='note'>{escape(c.reason or 'not estimable yet')}</p>"
        rows = [(f"<b>{MACRO if result.tasks else 'overall'}</b>", c.seeds, c.items)]
        rows += [(escape(task), *c.per_task.get(task, (None, None))) for task in result.tasks
                 if c.per_task]
        body = "".join(
            f"<tr><td>{label}</td><td>{_diff_estimate(s, i)}</td>{_ci_cells(s)}"
            + (_ci_cells(i) if result.tasks else "") + "</tr>" for label, s, i in rows)
        items_head = "<th>items: paired CI</th><th>p</th>" if result.tasks else ""
        caption = ("per-task CIs and p are Holm-adjusted over the tasks; seed CIs include "
                   "training noise, paired item CIs eval noise only" if result.tasks
                   else "seed CIs include training noise")
        out = [title, f"<table><caption class='muted'>{caption}"
               f"</caption><tr><th>task</th><th>diff</th><th>seeds: CI</th><th>p</th>"
               f"{items_head}</tr>{body}</table>"]
        if c.improvement is not None:
            i = c.improvement
            out.append(f"<p>P({escape(c.variant)} run beats {escape(c.control)} run on a task)"
                       f" = {i.point:.2f} [{i.low:.2f}, {i.high:.2f}] (0.5 = no difference)</p>")
        if c.generalization is not None:
            out.append(f"<p>Across tasks: {escape(c.generalization.summary)}</p>")
        return "".join(out)

    def curves(self) -> str:
        if not self.page.curves:
            return "<p class='note'>no metric logged yet.</p>"
        results = self.a.results
        main, per_task, not_drawn = self.fig.curve_panels(
            self.page.curves, list(dict.fromkeys(r.hypothesis.metric for r in results)),
            list(dict.fromkeys(t for r in results for t in r.tasks)))
        out = ["<p class='muted'>line: mean over the arm's trials at up to 200 steps (chosen "
               "by LTTB on its longest trial); band: lowest to highest trial. A trial's page "
               "shows all its points, thinned by LTTB.</p>"]
        if main:
            out.append(self.plot(self.fig.curves_grid(main, self.palette)))
        for metric, tasks in per_task.items():
            out.append(self.plot(self.fig.curves_grid(
                tasks, self.palette, columns=5, shared_y=True,
                title=f"{metric} per task over steps: mean over seeds, band = lowest to "
                      "highest seed")))
        if not_drawn:
            out.append("<p class='muted'>not drawn (the same in every trial at every step): "
                       + "; ".join(f"{escape(m)} = {_num(v, '.6g')}" if v is not None
                                   else f"{escape(m)}: no finite value"
                                   for m, v in not_drawn.items()) + "</p>")
        return "".join(out)

    def scaling(self) -> str:
        data = self.a.scales
        if not self.page.design_yaml:
            return "<p class='note'>ad-hoc experiment: no design, so no scales to fit.</p>"
        if not data:
            return "<p class='note'>no scales in this design: no scaling law to fit.</p>"
        var, metric = str(data.get("variable") or "-"), str(data.get("metric") or "-")
        out = [f"<p>{escape(metric)} against {escape(var)}, one power law per arm.</p>"]
        if data.get("note"):
            out.append(f"<p class='note'>{escape(data['note'])}</p>")
        for row in data.get("arms", []):
            scales = ", ".join(f"{s:g}" for s in row["scales"]) or "-"
            out.append(f"<h3>arm {escape(row['arm'])}</h3><p class='muted'>{row['points']} "
                       f"finished trial(s) at {escape(var)} = {scales}</p>")
            if row.get("fit"):
                out.append(_fit_table(row["fit"]))
            if row.get("band"):
                out.append(self.plot(self.fig.scaling_plot(row, var, metric, self.palette)))
            if row.get("backtest"):
                out.append(_backtest_table(row["backtest"], var))
            out += [f"<p class='note'>{escape(n)}</p>" for n in row.get("notes", [])]
            out += [f"<p class='warning'>warning: {escape(w)}</p>"
                    for w in row.get("warnings", [])]
        out += [f"<p class='warning'>warning: {escape(w)}</p>" for w in data.get("warnings", [])]
        return "".join(out)

    def incidents(self) -> str:
        a, out = self.a, []
        fig = self.fig.timeline_plot(self.page.timeline)
        out.append(self.plot(fig) if fig is not None
                   else "<p class='note'>no attempt has run yet.</p>")
        alerts = [(k, x) for k, rows in a.alerts.items() for x in rows]
        groups = dict(alert_groups(alerts))
        for heading, rows in groups.items():
            if heading == "slow steps" and a.phases:
                out.append(f"<p>{len(rows)} slow-step alarm(s): see <a href='#phases'>step time "
                           "by phase</a>.</p>")
                continue
            body = "".join(f"<tr><td>{escape(k)}</td><td>{x['step']}</td><td class='text "
                           f"sev-{escape(str(x['severity']))}'>{escape(str(x['severity']))}</td>"
                           f"<td class='text'>{escape(x['rule'])}</td><td class='text'>"
                           f"{escape(x['message'])}</td></tr>" for k, x in rows)
            out.append(f"<h3>{heading.capitalize()}</h3><table><tr><th>trial</th><th>step</th>"
                       "<th class='text'>severity</th><th class='text'>rule</th>"
                       f"<th class='text'>message</th></tr>{body}</table>")
        if "guard alerts" not in groups:
            out.append("<p>no guard alerts.</p>")
        if a.restarts:
            out.append("<h3>Restarts</h3><ul>" + "".join(
                f"<li>{escape(k)}: {escape(', '.join(c))}</li>" for k, c in a.restarts.items())
                + "</ul>")
        else:
            out.append("<p>no restarts.</p>")
        if a.goodput:
            out.append(f"<p>{escape(goodput_line(a.goodput))}</p>")
        return "".join(out)

    def trials(self) -> str:
        if not self.page.trials:
            return "<p class='note'>no trials.</p>"
        rows = []
        for t in self.page.trials:
            key = escape(t["key"])
            if self.trial_href is not None:
                key = f"<a href='{escape(self.trial_href(t['key']))}'>{key}</a>"
            rows.append(f"<tr><td>{key}</td><td class='text'>{escape(t['arm'])}</td>"
                        f"<td>{_blank(t['seed'])}</td><td class='text'>{escape(t['status'])}</td>"
                        f"<td>{t['attempts']}</td><td>{_blank(t['last_step'])}</td>"
                        f"<td class='text'><code>{escape(t['command'])}</code></td></tr>")
        return ("<p class='muted'>Each command reproduces its trial (run it in the trial's "
                "environment; `labcoat run` adds the LABCOAT_* variables).</p><table><tr>"
                "<th>trial</th><th class='text'>arm</th><th>seed</th><th class='text'>status"
                "</th><th>attempts</th><th>step</th><th class='text'>command</th></tr>"
                + "".join(rows) + "</table>")


_STATUSES = ("pending", "running", "done", "failed")


def _fit_table(summary: dict[str, Any]) -> str:
    level = f"{100 * summary['ci']:.3g}%"
    rows = "".join(f"<tr><td>{escape(name)}</td><td>{_num(iv['point'], '.4g')}</td>"
                   f"<td>[{_num(iv['low'], '.4g')}, {_num(iv['high'], '.4g')}]</td></tr>"
                   for name, iv in summary["params"].items())
    preds = "".join(f"<tr><td>{_num(p['N'], '.4g')} ({p['extrapolation']:.3g}x)</td>"
                    f"<td>{_num(p['point'], '.4g')}</td><td>[{_num(p['low'], '.4g')}, "
                    f"{_num(p['high'], '.4g')}]</td></tr>"
                    for p in summary["derived"].get("predictions", []))
    out = (f"<table><caption class='muted'>estimate and {level} bootstrap CI "
           f"({summary['bootstrap']} replicates)</caption><tr><th>parameter</th>"
           f"<th>estimate</th><th>{level} CI</th></tr>{rows}</table>")
    if preds:
        out += (f"<table><caption class='muted'>predictions ({level} prediction intervals)"
                f"</caption><tr><th>at</th><th>predicted</th><th>interval</th></tr>{preds}"
                "</table>")
    return out


def _backtest_table(bt: dict[str, Any], variable: str) -> str:
    rows = "".join(f"<tr><td>{_num(r['N'], '.4g')}</td><td>{_num(r['observed'], '.4g')}</td>"
                   f"<td>{_num(r['predicted'], '.4g')}</td><td>[{_num(r['low'], '.4g')}, "
                   f"{_num(r['high'], '.4g')}]</td><td>{'yes' if r['covered'] else 'NO'}</td>"
                   "</tr>" for r in bt["table"])
    return (f"<table><caption class='muted'>backtest ({escape(bt['scheme'])}): fit without the "
            f"largest {escape(variable)}, predict it; coverage {100 * bt['coverage']:.0f}%, mean "
            f"|error| {100 * bt['mean_abs_error']:.2g}%</caption><tr><th>{escape(variable)}</th>"
            f"<th>observed</th><th>predicted</th><th>95% PI</th><th>in PI</th></tr>{rows}"
            "</table>")


def _diff_estimate(seeds: Any, items: Any) -> str:
    d = seeds or items
    if isinstance(d, Adjusted):
        d = d.difference
    return "-" if d is None else f"{d.estimate:+.3f}"


def _ci_cells(d: Difference | Adjusted | None) -> str:
    if d is None:
        return "<td>-</td><td>-</td>"
    if isinstance(d, Adjusted):
        d = d.difference
    return f"<td>[{d.low:+.3f}, {d.high:+.3f}]</td><td>{d.p_value:.2g}</td>"


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, fmt)


def _blank(value: Any) -> str:
    return "" if value is None else escape(str(value))


def write_html_report(session: Any, experiment: Any, path: Any) -> int:
    """Render `experiment` into the file `path` (written whole, then renamed into place);
    returns its size in bytes. Checks plotly and the target directory before computing."""
    import os
    from pathlib import Path

    from labcoat.analysis import report_page

    target = Path(path)
    if target.is_dir():
        raise LabcoatError(f"--html {target} is a directory; give a file name, e.g. "
                           f"{target / (experiment.name + '.html')}")
    if not target.parent.is_dir():
        raise LabcoatError(f"--html {target}: directory {target.parent} does not exist; "
                           "create it or choose another path")
    packed_plotly_js()  # inlined by render_html; first, so a missing plotly fails fast
    text = render_html(report_page(session, experiment), plotly_src=None)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise LabcoatError(f"cannot write --html {target}: {e.strerror}") from None
    return len(text.encode("utf-8"))
