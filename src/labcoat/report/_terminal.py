"""The terminal report: tables of per-arm intervals, comparisons, and the verdict line."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.analysis import (
    AGGREGATES,
    MACRO,
    SEED_CAVEAT,
    Analysis,
    Comparison,
    HypothesisResult,
    entries_of,
    json_safe,
    verdict_word,
)
from labcoat.journal import Events
from labcoat.report._evals import print_evaluations, print_prompts
from labcoat.report._phases import print_phases
from labcoat.report._scales import print_scales
from labcoat.report._status import goodput_line, print_alerts, print_wide
from labcoat.stats import Adjusted, Difference, Interval

VERDICT_STYLE = {"supported": "bold green", "refuted": "bold red", "inconclusive": "bold yellow",
                 "no-effect": "bold cyan", "negligible": "bold yellow", "aliased": "bold yellow"}


def print_report(analysis: Analysis, console: Console) -> None:
    console.print(f"[bold]Experiment {escape(analysis.experiment)}[/] - {analysis.status} "
                  f"({escape(trials_line(analysis))})", soft_wrap=True)
    if analysis.note:
        console.print(escape(analysis.note), soft_wrap=True)
    for result in analysis.results:
        _print_hypothesis(result, analysis, console)
    if analysis.secondary:
        print_wide(_secondary_table(analysis), console)
    print_scales(analysis.scales, console)
    print_evaluations(analysis.evaluations, console)
    print_prompts(analysis.prompts, console)
    for message in analysis.warnings:
        console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)
    _print_registration(analysis, console)
    for variant, s in analysis.sequential.items():
        console.print(f"sequential (anytime-valid, pre-registered): {escape(variant)} - "
                      f"{s['decision']} after {s['n']} seeds per arm, {100 * (1 - s['alpha']):.3g}%"
                      f" confidence sequence [{s['low']:+.4g}, {s['high']:+.4g}]",
                      soft_wrap=True)
    if analysis.restarts:
        causes = "; ".join(f"{escape(k)}: {escape(', '.join(c))}"
                           for k, c in analysis.restarts.items())
        console.print(f"restarts: {causes}", soft_wrap=True)
    if analysis.goodput:
        console.print(goodput_line(analysis.goodput), soft_wrap=True)
    print_phases(analysis.phases, console)  # with the slow-step alarms under its table
    skip = {Events.PHASE_SLOW} if analysis.phases else set()
    print_alerts([{"key": k, "alerts": [a for a in v if a["rule"] not in skip]}
                  for k, v in analysis.alerts.items()], console)
    for key, why in analysis.excluded:
        console.print(f"[dim]not counted: {escape(key)} - {escape(why)}[/]", soft_wrap=True)
    if analysis.family and len(analysis.results) + sum(
            len(r.comparisons) for r in analysis.results) > 2:
        console.print(f"Family of the verdicts: {escape(analysis.family)}", soft_wrap=True)
    for result in analysis.results:
        for c in result.comparisons:
            style = VERDICT_STYLE[c.verdict]
            prefix = f"{result.hypothesis.id}, " if len(analysis.results) > 1 else ""
            reason, *more = verdict_statements(c)
            console.print(f"Verdict for {prefix}{escape(c.variant)} vs {escape(c.control)}: "
                          f"[{style}]{verdict_word(c.verdict)}[/] - {escape(reason)}",
                          soft_wrap=True)
            for line in more:
                console.print(f"[dim]  {escape(line)}[/]", soft_wrap=True)
    print_changes(analysis, console)


def print_changes(analysis: Analysis, console: Console) -> None:
    """The last lines: what changed, prior -> result, for each hypothesis, once any of them
    states a prediction (`predict:`); reports without one end as before."""
    entries = entries_of(analysis)
    if not any(e.prior is not None or e.note for e in entries):
        return
    for entry in entries:
        style = "yellow" if entry.edits else "bold"
        console.print(f"[{style}]What changed:[/] {escape(entry.change)}", soft_wrap=True)


def verdict_statements(c: Comparison) -> list[str]:
    """What both reports say of one verdict after its word, in order: why; the power to see
    the smallest effect (unless the reason says it already); for a sequential experiment,
    the fixed-n verdict for reference. The terminal prints and the HTML box shows these."""
    out = [c.reason]
    if c.power_note and c.power_note not in c.reason:
        out.append(c.power_note)
    if c.fixed_n:
        out.append("for reference only, not a verdict (seeds were added until the sequential "
                   f"test was decisive, which biases a fixed-n test): {c.fixed_n}")
    return out


def trials_line(analysis: Analysis) -> str:
    """Every trial of the experiment by status, as both reports' headers say it: "10/10
    trials finished", "1 ad-hoc run, finished", "3 ad-hoc runs: 2 finished, 1 failed"."""
    totals = dict.fromkeys(("done", "failed", "running", "pending"), 0)
    for per_arm in analysis.counts.values():
        for status, n in per_arm.items():
            totals[status] = totals.get(status, 0) + n
    total = sum(totals.values())
    words = {"done": "finished"}
    if analysis.kind == "designed":
        rest = ", ".join(f"{n} {s}" for s, n in totals.items() if n and s != "done")
        return f"{totals['done']}/{total} trials finished" + (f", {rest}" if rest else "")
    noun = f"{analysis.kind} run" + ("" if total == 1 else "s")
    states = [(words.get(s, s), n) for s, n in totals.items() if n]
    if len(states) == 1:
        return f"{total} {noun}, " + ("" if total == 1 else "all ") + states[0][0]
    return f"{total} {noun}: " + ", ".join(f"{n} {word}" for word, n in states)


def _print_registration(analysis: Analysis, console: Console) -> None:
    """The frozen plan, its amendments, every trial counted, and seeds added late."""
    plan = analysis.registration
    if plan:
        console.print(f"pre-registered analysis plan {plan['hash'][:12]}, frozen "
                      f"{plan['frozen_at'][:19]}", soft_wrap=True)
        for a in plan.get("amendments", []):
            console.print(f"[yellow]amended[/] {a['at'][:19]} ({', '.join(a['changed'])}): "
                          f"{escape(a['reason'])}", soft_wrap=True)
        for e in plan.get("prediction_edits", []):
            when = "after trials started" if e.get("after_trials") else "before any trial"
            console.print(f"[yellow]prediction of {escape(e['hypothesis'])} EDITED {when}[/] "
                          f"{e['at'][:19]}: {escape(str(e['from']))} -> {escape(str(e['to']))}"
                          " (the ledger scores the prediction stated before the first trial)",
                          soft_wrap=True)
    counts = "; ".join(f"{escape(arm)}: " + ", ".join(f"{n} {s}" for s, n in c.items() if n)
                       for arm, c in analysis.counts.items())
    if counts:
        console.print(f"trials: {counts}", soft_wrap=True)
    if analysis.late_trials:
        console.print(f"[yellow]added after results were seen:[/] "
                      f"{escape(', '.join(analysis.late_trials))}", soft_wrap=True)


def _print_hypothesis(result: HypothesisResult, analysis: Analysis, console: Console) -> None:
    h = result.hypothesis
    source = ("per-item eval scores at each trial's last eval, macro-averaged over tasks"
              if h.source == "items" else "last logged value")
    console.print(f"\n[bold]{escape(h.id or 'H1')}[/]: {escape(h.claim)}", soft_wrap=True)
    console.print(f"  primary metric: {escape(h.metric)} ({source})", soft_wrap=True)
    console.print(f"  predicted: {h.direction} vs {escape(analysis.control or '?')}, "
                  f"alpha={h.alpha:g}\n", soft_wrap=True)
    print_wide(_arms_table(result), console)
    if any(arm.aggregates for arm in result.arms):
        print_wide(_aggregates_table(result), console)
    for comparison in result.comparisons:
        if comparison.seeds is not None:
            print_wide(_comparison_table(comparison, result), console)
    for comparison in result.comparisons:
        poi = comparison.improvement
        if poi is not None:
            console.print(f"P({escape(comparison.variant)} run beats {escape(comparison.control)}"
                          f" run on a task) = {poi.point:.2f} [{poi.low:.2f}, {poi.high:.2f}] "
                          "(Mann-Whitney, averaged over tasks; 0.5 = no difference)",
                          soft_wrap=True)
        g = comparison.generalization
        if g is not None:
            console.print(f"Across tasks, {escape(comparison.variant)} vs "
                          f"{escape(comparison.control)}: {escape(g.summary)}", soft_wrap=True)


def _arms_table(analysis: HypothesisResult) -> Table:
    table = Table(title=f"{analysis.hypothesis.metric} by arm: mean and 95% CI across seeds",
                  title_justify="left", box=box.SIMPLE_HEAD, caption=SEED_CAVEAT,
                  caption_justify="left")
    table.add_column("task")
    for arm in analysis.arms:
        marker = " [control]" if arm.arm == analysis.control and arm.arm != "control" else ""
        table.add_column(escape(f"{arm.arm}{marker} (n={len(arm.values)})"), justify="right")
    table.add_row(f"[bold]{MACRO if analysis.tasks else 'overall'}[/]",
                  *[_interval(arm.overall) for arm in analysis.arms])
    for task in analysis.tasks:
        table.add_row(escape(task), *[_interval(arm.per_task.get(task)) for arm in analysis.arms])
    return table


def _secondary_table(analysis: Analysis) -> Table:
    arms = list(dict.fromkeys(a for per_arm in analysis.secondary.values() for a in per_arm))
    table = Table(title="secondary metrics (last value; described, not judged): mean and 95% "
                        "CI across seeds", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("metric")
    for arm in arms:
        table.add_column(escape(arm), justify="right")
    for metric, per_arm in analysis.secondary.items():
        table.add_row(escape(metric), *[_interval(per_arm.get(arm)) for arm in arms])
    return table


def _aggregates_table(analysis: HypothesisResult) -> Table:
    table = Table(title="aggregates over runs x tasks (Agarwal et al. 2021): stratified bootstrap,"
                        " expanded 95% CI", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("aggregate")
    for arm in analysis.arms:
        table.add_column(escape(arm.arm), justify="right")
    for name in AGGREGATES:
        label = name.replace("_", " ")
        table.add_row(label, *[_interval(arm.aggregates.get(name)) for arm in analysis.arms])
    return table


def _comparison_table(c: Comparison, analysis: HypothesisResult) -> Table:
    family = ""
    sizes = [_family_size(c, i) for i in (0, 1)]
    example = next((a for pair in c.per_task.values() for a in pair if a is not None), None)
    if example is not None:
        family = (f"Per-task CIs and p are Holm-adjusted over the tasks (seeds: {sizes[0]}, "
                  f"items: {sizes[1]} comparisons); CIs at {100 * example.ci_level:.3g}% "
                  f"(Bonferroni) for a {100 * example.family_ci:.3g}% family level.")
    table = Table(title=f"{c.variant} - {c.control}: difference with CI and p",
                  title_justify="left", box=box.SIMPLE_HEAD, caption_justify="left",
                  caption="Seed CIs include training noise; paired item CIs hold the trained "
                          f"models fixed (eval noise only). {family}" if analysis.tasks
                  else "Seed CIs include training noise.")
    table.add_column("task")
    table.add_column("diff", justify="right")
    test = {"paired-t": "paired t", "welch": "Welch"}.get(c.seeds.method, "OLS")
    table.add_column(f"seeds: {test} CI", justify="right")
    table.add_column("p", justify="right")
    if analysis.tasks:
        table.add_column("items: paired CI", justify="right")
        table.add_column("p", justify="right")
    rows = [(f"[bold]{MACRO if analysis.tasks else 'overall'}[/]", c.seeds, c.items)]
    if c.per_task:
        rows += [(escape(task), *c.per_task.get(task, (None, None))) for task in analysis.tasks]
    for label, seeds, items in rows:
        estimate = seeds.estimate if seeds else (items.estimate if items else None)
        cells = [label, "-" if estimate is None else f"{estimate:+.3f}", *_ci_cells(seeds)]
        table.add_row(*cells, *(_ci_cells(items) if analysis.tasks else []))
    return table


def _family_size(c: Comparison, index: int) -> int:
    return next((pair[index].family_size for pair in c.per_task.values()
                 if pair[index] is not None), 0)


def _interval(i: Interval | None) -> str:
    if i is None:
        return "-"
    if not math.isfinite(i.low):
        return f"{i.point:.3f} (1 seed: no CI)"
    return f"{i.point:.3f} [{i.low:.3f}, {i.high:.3f}]"


def _ci_cells(d: Difference | Adjusted | None) -> list[str]:
    if d is None:
        return ["-", "-"]
    if isinstance(d, Adjusted):
        d = d.difference  # adjusted interval and p-value
    return [f"[{d.low:+.3f}, {d.high:+.3f}]", f"{d.p_value:.2g}"]


def analysis_dict(analysis: Analysis) -> dict[str, Any]:
    """The analysis as plain JSON-able data (for `labcoat report --json`)."""
    data = dataclasses.asdict(analysis)
    for result, raw in zip(analysis.results, data["results"], strict=True):
        raw["hypothesis"] = result.hypothesis.model_dump()
        for c, raw_c in zip(result.comparisons, raw["comparisons"], strict=True):
            raw_c["statements"] = verdict_statements(c)  # what both reports say of it
    data["trials_line"] = trials_line(analysis)
    for trial in data["phases"].get("trials", []):
        trial.pop("series", None)  # the charts' binned points: the HTML report draws them
    return json_safe(data)
