"""Verbs that read results: status, show, export, report, compare."""

from __future__ import annotations

import difflib
import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.cli._common import (
    ExpArg,
    JsonFlag,
    console,
    find_experiment,
    labcoat_command,
    print_json,
    store_location,
    store_session,
    strict,
)
from labcoat.cli._reproduce import show_provenance
from labcoat.errors import LabcoatError


def status(
    experiment: Annotated[str | None, typer.Argument(help="experiment name (default: all)")
                          ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Where experiments stand: trials, restarts (attempts, work lost) and goodput."""
    from labcoat import report as reports
    from labcoat import store

    with store_session() as session:
        if experiment is None:
            rows = [reports.summary_interrupted(reports.experiment_summary(e))
                    for e in store.list_experiments(session)]
            if as_json:
                print_json(rows)
                return
            table = Table("experiment", "status", "done", "failed", "trials", "created")
            for r in rows:
                table.add_row(escape(r["name"]), r["status"], str(r["done"]), str(r["failed"]),
                              str(r["trials"]), r["created_at"][:19])
            if rows:
                reports.print_wide(table, console)
            else:
                console.print(f"no experiments yet in {escape(store_location())}: "
                              f"{labcoat_command()} run design.yaml", soft_wrap=True)
            return
        data = reports.status_data(session, find_experiment(session, experiment, "status"))
    if as_json:
        print_json(reports.mark_interrupted(data, documented=True))
    else:
        reports.print_status(data, console)


def show(
    experiment: Annotated[str, typer.Argument(
        metavar="EXP|EXP/TRIAL", help="experiment name (or id); with --provenance, one trial")],
    as_json: JsonFlag = False,
    provenance: Annotated[bool, typer.Option(
        "--provenance", help="what the trial ran with: code commit and diff, design hash, "
        "command, params, seeds, environment, data fingerprints")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="with --provenance: print the recorded "
                                       "uncommitted diff")] = False,
) -> None:
    """One experiment: its design and every trial with status, attempts and params."""
    from labcoat import report as reports

    if provenance:
        show_provenance(experiment, as_json=as_json, diff=diff)
        return
    if diff:
        raise LabcoatError("--diff prints a trial's recorded uncommitted diff and needs "
                           f"--provenance: labcoat show {experiment} --provenance --diff")
    if "/" in experiment:
        raise LabcoatError(f"{experiment!r} names a trial; `labcoat show {experiment} "
                           "--provenance` shows what it ran with, `labcoat show "
                           f"{experiment.split('/')[0]}` the whole experiment")
    with store_session() as session:
        exp = find_experiment(session, experiment, "show")
        data = reports.status_data(session, exp)
        design = exp.design_yaml
    if as_json:
        print_json(reports.mark_interrupted(data, documented=True))
        return
    if design:
        console.print(f"[bold]design[/] ({escape(data['experiment']['design_hash'][:12])}):")
        # verbatim: wrapped at the terminal's width it would no longer parse as YAML
        console.print(escape(design.rstrip()), highlight=False, soft_wrap=True)
    reports.print_status(data, console)


def export(
    experiment: ExpArg,
    items: Annotated[bool, typer.Option("--items", help="eval item results instead of metrics")
                     ] = False,
    metric: Annotated[str | None, typer.Option(
        "--metric", help="only this metric's points (default: every metric)")] = None,
) -> None:
    """Every metric point (or eval item) as JSON lines on stdout; a value that is not finite
    (a diverged loss) is null, so the lines stay strict JSON."""
    from labcoat import store

    if items and metric is not None:
        raise LabcoatError("--metric selects metric points; with --items every eval item is "
                           "exported (leave out one of them)")
    with store_session() as session:
        exp = find_experiment(session, experiment, "export")
        trials = {t.id: t for t in exp.trials}
        out = sys.stdout
        if not items:
            _check_metric(exp.name, store.metric_names(session, list(trials)), metric)
            _export_points(session, trials, metric, out)
        else:
            rows = store.eval_items(session, list(trials))
            if not rows:
                _note(f"experiment {exp.name!r} has no eval items to export (its trials "
                      "logged none with run.log_items); its metric points: labcoat export "
                      f"{exp.name}")
            for row in rows:
                t = trials[row.trial_id]
                variant = {"variant": row.variant} if row.variant else {}  # e.g. a template
                out.write(json.dumps({"trial": t.key, "arm": t.arm, "seed": t.seed,
                                      "step": row.step, "task": row.task, "item": row.item,
                                      "score": strict(row.score), **variant}) + "\n")


def _check_metric(name: str, names: list[str], metric: str | None) -> None:
    """--metric must name a logged metric (a typo would export nothing, silently); no
    metric at all is said on stderr, so stdout stays JSON lines."""
    if not names:
        _note(f"experiment {name!r} has no metric points to export (no trial logged one yet)")
        return
    if metric is None or metric in names:
        return
    close = difflib.get_close_matches(metric, names, n=len(names), cutoff=0.0)
    hint = f"did you mean {close[0]!r}? " if difflib.get_close_matches(metric, names, n=1) \
        else ""
    raise LabcoatError(f"--metric {metric!r}: experiment {name!r} logged no such metric; "
                       f"{hint}its metrics: {', '.join(close)}")


def _note(message: str) -> None:
    Console(stderr=True).print(f"[dim]{escape(message)}[/]", soft_wrap=True, highlight=False)


def _export_points(session: Any, trials: dict[int, Any], metric: str | None, out: Any) -> None:
    """One JSON line per point, {"trial", "arm", "seed", "name", "step", "value"}, as
    json.dumps writes it; each trial's head and each name encoded once (~4x faster than
    a dict per line on a million points)."""
    from labcoat import store

    heads = {tid: json.dumps({"trial": t.key, "arm": t.arm, "seed": t.seed})[:-1]
             for tid, t in trials.items()}
    names: dict[str, str] = {}
    lines = []
    for tid, name, step, value in store.metric_rows(session, list(trials), metric):
        shown = names.get(name) or names.setdefault(name, json.dumps(name))
        number = repr(value) if math.isfinite(value) else "null"
        lines.append(f'{heads[tid]}, "name": {shown}, "step": {step}, "value": {number}}}\n')
        if len(lines) >= 10_000:
            out.writelines(lines)
            lines.clear()
    out.writelines(lines)


def report(experiment: ExpArg, as_json: JsonFlag = False,
           html: Annotated[Path | None, typer.Option(
               "--html", help="also write a self-contained HTML report (plots, opens "
               "offline) to this file; needs the ui extra")] = None) -> None:
    """Per-arm results with 95% CIs, variant-vs-control differences, and the verdict."""
    from labcoat import report as reports

    if html is not None and as_json:
        raise LabcoatError(f"--json and --html {html} print different things; use one: "
                           f"labcoat report {experiment} --json, or --html {html}")
    if html is not None:  # the HTML report (issue 11): web-ready page, same analysis
        with store_session() as session:
            size = reports.write_html_report(
                session, find_experiment(session, experiment, "report"), html)
        console.print(f"wrote {escape(str(html))} ({size / 1e6:.1f} MB, self-contained)")
        return
    with store_session() as session:
        analysis = reports.analyze(session, find_experiment(session, experiment, "report"))
    if as_json:
        print_json(reports.analysis_dict(analysis))
    else:
        reports.print_report(analysis, console)


def compare(
    a: Annotated[Path, typer.Argument(help="results of model A (per item)")],
    b: Annotated[Path, typer.Argument(help="results of model B on the same items")],
    metric: Annotated[str | None, typer.Option(help="score field (default: score, or the "
                                                    "file's only metric)")] = None,
    filter_: Annotated[str | None, typer.Option("--filter", help="lm-eval-harness filter, "
                                                "when a file has several")] = None,
    as_json: JsonFlag = False,
    experiment: Annotated[str | None, typer.Option(
        help="A and B are arms (or trials) of this experiment in the store, e.g. imported "
             "with `labcoat import`")] = None,
) -> None:
    """B minus A on the items both scored: paired difference with 95% CI, per task.

    Files: CSV/JSON/JSONL with item and score fields (task and cluster optional),
    lm-eval-harness --log_samples JSONL (or their directory), Inspect AI .eval/.json logs.
    """
    from labcoat import evals
    from labcoat import report as reports

    if experiment is not None:
        scores_a, scores_b = _stored_scores(experiment, str(a), str(b))
    else:
        scores_a = evals.load_item_scores(a, metric=metric, filter=filter_)
        scores_b = evals.load_item_scores(b, metric=metric, filter=filter_)
    try:
        result = evals.compare_item_scores(scores_a, scores_b)
    except ValueError as e:
        raise LabcoatError(str(e)) from None
    if as_json:
        print_json(reports.file_comparison_dict(result))
    else:
        reports.print_file_comparison(result, console)


def _stored_scores(experiment: str, a: str, b: str) -> tuple[Any, Any]:
    from labcoat import report as reports
    from labcoat import store

    with store_session() as session:
        exp = store.find_experiment(session, experiment)
        return (reports.stored_item_scores(session, exp, a),
                reports.stored_item_scores(session, exp, b))
