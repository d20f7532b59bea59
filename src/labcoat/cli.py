"""The `labcoat` command: thin, it parses flags and calls the library.

Heavy modules (SQLAlchemy, scipy, torch) are imported inside the verbs so
`labcoat --help` starts fast.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.errors import Interrupted, LabcoatError
from labcoat.evals._cli import app as evals_app
from labcoat.evals._contamination_cli import contamination
from labcoat.scaling._cli import app as scaling_app

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="labcoat: design, run and analyze ML experiments with error bars.",
)
console = Console()
app.add_typer(scaling_app, name="scaling")
app.command("contamination")(contamination)
app.add_typer(evals_app, name="evals")
EXAMPLE = "warmup.yaml"

JsonFlag = Annotated[bool, typer.Option("--json", help="print machine-readable JSON")]
ExpArg = Annotated[str, typer.Argument(help="experiment name (or id)")]


def example_design() -> str:
    return resources.files("labcoat").joinpath("examples", EXAMPLE).read_text(encoding="utf-8")


@app.command()
def init(directory: Annotated[Path, typer.Argument(help="where to write design.yaml")]) -> None:
    """Write the example design (and nothing else) into DIRECTORY."""
    target = directory / "design.yaml"
    if target.exists():
        raise LabcoatError(f"{target} already exists; choose another directory or remove it")
    directory.mkdir(parents=True, exist_ok=True)
    target.write_text(example_design(), encoding="utf-8")
    console.print(f"wrote {escape(str(target))}; run it with: labcoat run {escape(str(target))}")


@app.command()
def lint(
    design: Annotated[Path, typer.Argument(help="the design file (YAML)")],
    pilot: Annotated[str | None, typer.Option(help="an earlier experiment in the store whose "
                                              "variances set the power checks")] = None,
    as_json: JsonFlag = False,
    strict: Annotated[bool, typer.Option(help="exit 1 on warnings too")] = False,
) -> None:
    """Review a design before it runs: weak or wrong designs, with the place and the fix.

    Exit status: 1 if there is an error (or, with --strict, a warning), else 0.
    """
    from labcoat import report as reports
    from labcoat import review

    findings = review.lint(design, pilots=review.pilots_from_store(design, pilot))
    if as_json:
        _print_json([f.as_dict() for f in findings])
    else:
        reports.print_findings(findings, console)
    failing = {"error", "warning"} if strict else {"error"}
    if any(f.severity in failing for f in findings):
        raise typer.Exit(1)


@app.command()
def plan(
    design: Annotated[Path, typer.Argument(help="the design file (YAML)")],
    pilot: Annotated[str | None, typer.Option(help="an earlier experiment in the store whose "
                                              "variances set the plan")] = None,
    candidates: Annotated[str | None, typer.Option(
        help="comma-separated interventions to test together in a fractional factorial")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Seeds per arm and items per task for 80% power, and what each would buy."""
    from labcoat import report as reports
    from labcoat import review, spec

    found = review.plan(spec.load_design(design), review.pilots_from_store(design, pilot),
                        candidates=candidates.split(",") if candidates else None)
    if as_json:
        _print_json(reports.plan_dict(found))
    else:
        reports.print_plan(found, console)


@app.command()
def run(
    design: Annotated[Path, typer.Argument(help="the design file (YAML)")],
    parallel: Annotated[int | None, typer.Option("--parallel", "-j", min=1,
                        help="trials at a time (default: design's parallelism, else CPUs)")] = None,
    plain: Annotated[bool, typer.Option(help="plain progress lines instead of a live table")
                     ] = False,
    chaos: Annotated[str | None, typer.Option(
        help="inject faults, e.g. 'kill@20s,corrupt@30s,kill-in-save@2,disk-full@3,"
             "torn-journal@50' (see README)")] = None,
    chaos_seed: Annotated[int, typer.Option(help="seed of the chaos schedule")] = 0,
    amend: Annotated[str | None, typer.Option(
        help="why the frozen analysis plan (hypotheses, metrics, correction) changes; the "
             "report shows it")] = None,
    until_decisive: Annotated[bool, typer.Option(
        "--until-decisive", help="add seeds in rounds until an anytime-valid test of the "
        "first hypothesis is decisive, or --max-seeds")] = False,
    max_seeds: Annotated[int | None, typer.Option(
        min=2, help="seeds per arm a sequential run may use (default: budget, else 50)")] = None,
    round_size: Annotated[int | None, typer.Option(
        min=1, help="seeds added per round (default: parallelism)")] = None,
    executor: Annotated[str, typer.Option(
        help="where trials run: local (default), ray or slurm (see README)")] = "local",
    address: Annotated[str | None, typer.Option(
        help="--executor ray: the Ray cluster's HOST:PORT")] = None,
    partition: Annotated[str | None, typer.Option(
        help="--executor slurm: the partition to submit to")] = None,
    slurm: Annotated[list[str] | None, typer.Option(
        help="--executor slurm: an sbatch setting KEY=VALUE, e.g. account=ml (repeatable); "
             "cluster=local runs the jobs with submitit's local executor")] = None,
) -> None:
    """Run every unfinished trial of DESIGN; run it again to resume after a stop."""
    from labcoat.runner import ExecutorConfig, parse_settings, run_design, run_until_decisive

    runs_on = ExecutorConfig(name=executor, address=address, partition=partition,
                             slurm=parse_settings(slurm or []))

    if until_decisive:
        if chaos:
            raise LabcoatError("--chaos and --until-decisive do not combine; run them apart")
        outcome = run_until_decisive(design, max_seeds=max_seeds, round_size=round_size,
                                     console=console, plain=plain or None, amend=amend,
                                     parallelism=parallel, executor=runs_on)
        for summary in outcome.summaries[-1:]:
            _print_run_summary(summary)
        return
    summary = run_design(design, parallelism=parallel, console=console, plain=plain or None,
                         chaos=chaos, chaos_seed=chaos_seed, amend=amend, executor=runs_on)
    _print_run_summary(summary)


def _print_run_summary(summary: Any) -> None:
    console.print(f"{len(summary.done)} trial(s) finished now, {len(summary.skipped)} earlier, "
                  f"{len(summary.failed)} failed")
    if summary.failed:
        console.print(f"[red]failed:[/] {escape(', '.join(summary.failed))}; "
                      f"`labcoat diagnose {escape(summary.experiment)}` says why (cause, step, "
                      "rank, evidence)")
        raise typer.Exit(1)
    console.print(f"next: labcoat report {escape(summary.experiment)}")


@app.command()
def status(
    experiment: Annotated[str | None, typer.Argument(help="experiment name (default: all)")
                          ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Where experiments stand: trials, restarts (attempts, work lost) and goodput."""
    from labcoat import report as reports
    from labcoat import store

    with _session() as session:
        if experiment is None:
            rows = [reports.experiment_summary(e) for e in store.list_experiments(session)]
            if as_json:
                _print_json(rows)
                return
            table = Table("experiment", "status", "done", "failed", "trials", "created")
            for r in rows:
                table.add_row(escape(r["name"]), r["status"], str(r["done"]), str(r["failed"]),
                              str(r["trials"]), r["created_at"][:19])
            console.print(table if rows else "no experiments yet: labcoat run design.yaml")
            return
        data = reports.status_data(session, store.find_experiment(session, experiment))
    if as_json:
        _print_json(data)
    else:
        reports.print_status(data, console)


@app.command()
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
    from labcoat import store

    if provenance:
        _show_provenance(experiment, as_json=as_json, diff=diff)
        return
    if "/" in experiment:
        raise LabcoatError(f"{experiment!r} names a trial; `labcoat show {experiment} "
                           "--provenance` shows what it ran with, `labcoat show "
                           f"{experiment.split('/')[0]}` the whole experiment")
    with _session() as session:
        exp = store.find_experiment(session, experiment)
        data = reports.status_data(session, exp)
        design = exp.design_yaml
    if as_json:
        _print_json(data)
        return
    if design:
        console.print(f"[bold]design[/] ({escape(data['experiment']['design_hash'][:12])}):")
        console.print(escape(design.rstrip()), highlight=False)
    reports.print_status(data, console)


@app.command()
def export(
    experiment: ExpArg,
    items: Annotated[bool, typer.Option("--items", help="eval item results instead of metrics")
                     ] = False,
) -> None:
    """Every metric point (or eval item) as JSON lines on stdout; a value that is not finite
    (a diverged loss) is null, so the lines stay strict JSON."""
    from labcoat import store

    with _session() as session:
        exp = store.find_experiment(session, experiment)
        trials = {t.id: t for t in exp.trials}
        out = sys.stdout
        if items:
            for row in store.eval_items(session, list(trials)):
                t = trials[row.trial_id]
                variant = {"variant": row.variant} if row.variant else {}  # e.g. a template
                out.write(json.dumps({"trial": t.key, "arm": t.arm, "seed": t.seed,
                                      "step": row.step, "task": row.task, "item": row.item,
                                      "score": _strict(row.score), **variant}) + "\n")
        else:
            for row in store.metric_points(session, list(trials)):
                t = trials[row.trial_id]
                out.write(json.dumps({"trial": t.key, "arm": t.arm, "seed": t.seed,
                                      "name": row.name, "step": row.step,
                                      "value": _strict(row.value)}) + "\n")


def _strict(value: float) -> float | None:
    """JSON has no NaN or infinity: null."""
    return value if math.isfinite(value) else None


@app.command()
def report(experiment: ExpArg, as_json: JsonFlag = False,
           html: Annotated[Path | None, typer.Option(
               "--html", help="also write a self-contained HTML report (plots, opens "
               "offline) to this file; needs labcoat[ui]")] = None) -> None:
    """Per-arm results with 95% CIs, variant-vs-control differences, and the verdict."""
    from labcoat import report as reports
    from labcoat import store

    if html is not None:  # the HTML report (issue 11): web-ready page, same analysis
        with _session() as session:
            size = reports.write_html_report(session, store.find_experiment(session, experiment),
                                             html)
        console.print(f"wrote {escape(str(html))} ({size / 1e6:.1f} MB, self-contained)")
        return
    with _session() as session:
        analysis = reports.analyze(session, store.find_experiment(session, experiment))
    if as_json:
        _print_json(reports.analysis_dict(analysis))
    else:
        reports.print_report(analysis, console)


@app.command()
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
        _print_json(reports.file_comparison_dict(result))
    else:
        reports.print_file_comparison(result, console)


def _stored_scores(experiment: str, a: str, b: str) -> tuple[Any, Any]:
    from labcoat import report as reports
    from labcoat import store

    with _session() as session:
        exp = store.find_experiment(session, experiment)
        return (reports.stored_item_scores(session, exp, a),
                reports.stored_item_scores(session, exp, b))


@app.command("import")
def import_command(
    paths: Annotated[list[Path], typer.Argument(
        help="result files or directories: lm-eval-harness --log_samples output, Inspect AI "
             ".eval/.json logs, or CSV/JSON/JSONL item scores")],
    experiment: Annotated[str, typer.Option(help="experiment to import into (created if new)")],
    arm: Annotated[str, typer.Option(help="the model or arm these results belong to")],
    seed: Annotated[int | None, typer.Option(help="the seed, if the arm has several")] = None,
    metric: Annotated[str | None, typer.Option(help="score field (default: the only one); "
                                               "Inspect: scorer or scorer.key")] = None,
    filter_: Annotated[str | None, typer.Option("--filter", help="lm-eval-harness filter, "
                                                "when a file has several")] = None,
) -> None:
    """Store per-item results computed elsewhere as arm ARM of EXPERIMENT, so `labcoat
    compare --experiment` and `labcoat report` put paired error bars on them."""
    from labcoat.runner import import_results

    done = import_results(paths, experiment=experiment, arm=arm, seed=seed, metric=metric,
                          filter=filter_)
    tasks = ", ".join(f"{escape(t)} ({n})" for t, n in done.tasks.items())
    console.print(f"imported {sum(done.tasks.values())} item scores ({done.format}, metric "
                  f"{escape(done.metric)}) as {escape(done.experiment)}/{escape(done.trial)}: "
                  f"{tasks}", soft_wrap=True)
    for note in done.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    console.print(f"next: labcoat report {escape(done.experiment)}", soft_wrap=True)


@app.command()
def logs(
    experiment: Annotated[str, typer.Argument(
        metavar="EXP|templates",
        help="experiment name (or id); or the word `templates` followed by the experiment")],
    templates_of: Annotated[str | None, typer.Argument(
        metavar="[EXP]", help="with `templates`: the experiment whose templates to show",
        show_default=False)] = None,
    trial: Annotated[str | None, typer.Option(help="only this trial (key, e.g. warmup-s1)")
                     ] = None,
    rank: Annotated[int | None, typer.Option(help="only this rank")] = None,
    level: Annotated[str | None, typer.Option(help="this level or worse: debug, info, warning, "
                                              "error, critical")] = None,
    grep: Annotated[str | None, typer.Option(help="a regular expression the line matches")
                    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="also show known noise (banners, "
                                           "progress bars)")] = False,
    as_json: JsonFlag = False,
) -> None:
    """What the trials printed (stdout and stderr, every attempt), filtered; lines repeated
    across ranks are shown once with a count.

    `labcoat logs templates EXP` shows the Drain3 templates of EXP's lines instead: count,
    trials, ranks, first step, and whether only failed attempts printed them (the
    filters select which lines are counted). An experiment named "templates" is
    `labcoat logs templates` alone, or its id.
    """
    from labcoat import report as reports
    from labcoat import store

    if templates_of is not None and experiment != "templates":
        raise LabcoatError(f"unexpected argument {templates_of!r}: `labcoat logs EXP` takes "
                           "one experiment (templates: `labcoat logs templates EXP`)")
    if templates_of is not None:
        _log_templates(templates_of, trial=trial, rank=rank, level=level, grep=grep,
                       noise=show_all, as_json=as_json)
        return
    with _session() as session:
        if experiment == "templates":
            _templates_needs_experiment(session)
        exp = store.find_experiment(session, experiment)
        trials = [t for t in exp.trials if trial is None or t.key == trial]
        if trial is not None and not trials:
            raise LabcoatError(f"experiment {exp.name!r} has no trial {trial!r} (trials: "
                               f"{', '.join(t.key for t in exp.trials[:10])})")
        events = store.log_lines(session, [t.id for t in trials])
        if rank is not None:  # the capture's rank, else the one the line names ([rank3]:)
            from labcoat.diagnose import rank_of

            events = [e for e in events
                      if (e.rank if e.rank is not None else rank_of(e.message)) == rank]
        keys = {t.id: t.key for t in trials}
        attempts = {a.id: a.number for t in trials for a in t.attempts}
        lines = reports.select_lines(events, keys, attempts, level=level, grep=grep,
                                     noise=show_all)
    if as_json:
        _print_json(reports.lines_json(lines))
    else:
        reports.print_lines(lines, console)


def _templates_needs_experiment(session: Any) -> None:
    """`labcoat logs templates` without EXP: fine if an experiment is named "templates"."""
    from labcoat import store

    names = [e.name for e in store.list_experiments(session)]
    if "templates" not in names:
        known = ", ".join(names[-10:]) if names else "none yet; run `labcoat run design.yaml`"
        raise LabcoatError("`labcoat logs templates` needs an experiment: labcoat logs "
                           f"templates EXP (experiments: {known})")


def _log_templates(experiment: str, *, trial: str | None, rank: int | None,
                   level: str | None, grep: str | None, noise: bool, as_json: bool) -> None:
    from labcoat import diagnose as diagnosis
    from labcoat import report as reports
    from labcoat import store

    with _session() as session:
        exp = store.find_experiment(session, experiment)
        rows = diagnosis.experiment_templates(session, exp, trial=trial, rank=rank,
                                              level=level, grep=grep, noise=noise)
        name = exp.name
    if as_json:
        _print_json({"experiment": name, "templates": [r.to_dict() for r in rows]})
    else:
        reports.print_templates(name, rows, console)


@app.command("diagnose")
def diagnose_command(
    target: Annotated[str, typer.Argument(
        metavar="EXP|EXP/TRIAL", help="an experiment (every failed trial) or one trial, "
        "e.g. warmup/better-s1")],
    trial: Annotated[str | None, typer.Option(help="only this trial, by key (the same as "
                                              "EXP/TRIAL)")] = None,
    attempt: Annotated[int | None, typer.Option(help="this attempt of the trial (default: "
                                                "its last failed one)", min=1)] = None,
    as_json: JsonFlag = False,
) -> None:
    """Why trials failed (or finished with a NaN/inf metric): the step and phase, the rank
    and host, what is new against successful trials (same design, else earlier
    experiments), the likely cause, and ranked suspect lines with their evidence."""
    from labcoat import diagnose as diagnosis
    from labcoat import report as reports
    from labcoat import store

    experiment = target
    if "/" in target:
        if trial is not None:
            raise LabcoatError(f"the trial is given twice ({target!r} and --trial {trial!r}); "
                               "use one: labcoat diagnose EXP/TRIAL")
        experiment, trial = target.rsplit("/", 1)
    if attempt is not None and trial is None:
        raise LabcoatError("--attempt needs one trial: labcoat diagnose EXP/TRIAL --attempt N")
    with _session() as session:
        exp = store.find_experiment(session, experiment)
        chosen = [diagnosis.find_trial(exp, trial)] if trial is not None else \
            diagnosis.failed_trials(exp) + _diverged(session, exp)
        entries = []
        for t in chosen:
            found = diagnosis.diagnose_trial(session, t, attempt=attempt)
            entries.append(reports.diagnosis_entry(
                t, diagnosis.attempt_to_diagnose(t, attempt), found))
        data = {"experiment": exp.name, "diagnoses": entries}
    if as_json:
        _print_json(data)
    else:
        reports.print_diagnoses(data, console)


def _diverged(session: Any, experiment: Any) -> list[Any]:
    """Finished trials whose metrics went NaN/inf: done is not healthy."""
    from labcoat import store

    done = [t for t in experiment.trials if t.status == "done"]
    bad = store.first_non_finite(session, [t.id for t in done], None)
    return [t for t in done if t.id in bad]


@app.command()
def demo(
    steps: Annotated[int | None, typer.Option(help="override training steps (e.g. for a quick "
                                                   "smoke run)", min=1)] = None,
) -> None:
    """Run the example experiment in a temporary home and print its report."""
    from importlib.util import find_spec

    from labcoat.runner import run_design

    if find_spec("torch") is None:  # tinylm is a PyTorch model: say so before six trials fail
        raise LabcoatError("labcoat demo trains tinylm, a PyTorch model, and torch is not "
                           "installed here: pip install torch==2.13.0 (the CPU wheel), or "
                           "pip install 'labcoat[torch]', then run labcoat demo again")
    home = Path(tempfile.mkdtemp(prefix="labcoat-demo-"))
    os.environ["LABCOAT_HOME"] = str(home)
    os.environ.pop("LABCOAT_DB", None)
    text = example_design()
    if steps is not None:  # shorter runs: warmup and eval cadence shrink in proportion
        text = re.sub(r"(?m)^  steps: \d+", f"  steps: {steps}", text)
        text = text.replace("{warmup: 500}", f"{{warmup: {max(1, steps // 6)}}}")
        text = text.replace("every: 300,", f"every: {max(1, steps // 10)},")
    design = home / "design.yaml"
    design.write_text(text, encoding="utf-8")
    console.print(f"labcoat demo: running {escape(str(design))} (home: {escape(str(home))})")
    summary = run_design(design, console=console)
    console.print()
    report(summary.experiment)
    console.print(f"\n[dim]Results stay in {escape(str(home))}; explore them with "
                  f"LABCOAT_HOME={escape(str(home))} labcoat show {summary.experiment}[/]")
    if summary.failed:
        raise typer.Exit(1)  # the example should never fail: a non-zero status says it did


# --- reproduce: provenance, rerun, replay (labcoat.runner._rerun / _replay) -----------------


def _show_provenance(ref: str, *, as_json: bool, diff: bool) -> None:
    from labcoat import report as reports
    from labcoat.runner._trial_ref import find_trial, trial_provenance

    with _session() as session:
        _, trial = find_trial(session, ref, "show --provenance")
        data, notes = trial_provenance(session, trial, ref)
    if as_json:
        _print_json({"trial": ref, "provenance": data, "notes": notes})
    else:
        reports.print_provenance(ref, data, notes, console, diff=diff)


@app.command()
def rerun(
    trial: Annotated[str, typer.Argument(metavar="EXP/TRIAL", help="the trial to recreate")],
    as_json: JsonFlag = False,
) -> None:
    """Recreate a trial from its provenance (recorded code in a temporary git worktree, same
    command, params and seeds) and compare its metrics with the recorded ones, bit for bit.

    Exit status: 0 if bit-identical, 1 if it diverged (the first step and metric are named).
    """
    from labcoat import report as reports
    from labcoat.runner import rerun_trial

    result = rerun_trial(trial, console=Console(stderr=True))
    if as_json:
        _print_json(result.as_dict())
    else:
        reports.print_rerun(result, console)
    if not result.identical:
        raise typer.Exit(1)


@app.command()
def replay(
    trial: Annotated[str, typer.Argument(metavar="EXP/TRIAL", help="the trial to replay")],
    start: Annotated[int, typer.Option("--from", help="first step to probe")],
    end: Annotated[int, typer.Option("--to", help="last step to probe")],
    probe: Annotated[list[str] | None, typer.Option(
        "--probe", help="activations, grad_norms, attention_entropy, update_ratios, or "
        "MODULE:FUNCTION (repeatable; default: the four built-ins)")] = None,
    segments: Annotated[int, typer.Option(min=1, help="split the steps into K disjoint "
                                          "segments replayed in parallel")] = 1,
    parallel: Annotated[int | None, typer.Option("--parallel", "-j", min=1,
                        help="segments at a time (default: CPUs)")] = None,
    verify: Annotated[str, typer.Option(help="the metric that must match the recorded one "
                                        "bit for bit at every replayed step")] = "loss",
    as_json: JsonFlag = False,
) -> None:
    """Hindsight logging: restore the checkpoint before --from, re-execute deterministically to
    --to with probes attached, and keep their values once the replayed loss matched the
    recorded loss at every step."""
    from labcoat import report as reports
    from labcoat.runner import replay_trial

    result = replay_trial(trial, start=start, end=end, probes=probe, segments=segments,
                          parallel=parallel, verify=verify, console=Console(stderr=True))
    if as_json:
        _print_json(result.as_dict())
    else:
        reports.print_replay(result, console)


@app.command()
def ui(
    host: Annotated[str, typer.Option(help="interface to listen on; anything but 127.0.0.1 "
                                      "requires a token")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    token: Annotated[str | None, typer.Option(
        help="secret every request must carry (generated and printed when --host is not "
             "loopback)")] = None,
) -> None:
    """The local dashboard (read-only): experiments, reports live while trials run, trials,
    and two experiments compared. Ctrl-C stops it."""
    from labcoat import web

    web.serve(web.UIConfig(host=host, port=port, token=token),
              say=lambda line: console.print(escape(line), soft_wrap=True))


def _session():
    from labcoat import store

    class _Scope:
        def __enter__(self):
            self.db = store.open_store()
            self.session = self.db.session()
            return self.session

        def __exit__(self, *exc):
            self.session.close()
            self.db.close()

    return _Scope()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def main() -> None:
    """Entry point: user errors become one message and exit code 2, never a traceback."""
    try:
        app()
    except Interrupted as e:
        Console(stderr=True, soft_wrap=True).print(f"[yellow]{escape(str(e))}[/]")
        sys.exit(130)
    except LabcoatError as e:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(str(e))}")
        sys.exit(2)
    except Exception as e:  # a store damaged after it was opened (a bad page, truncated)
        message = _damaged_store(e)
        if message is None:
            raise
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(message)}")
        sys.exit(2)


def _damaged_store(error: Exception) -> str | None:
    """The one line for SQLAlchemy's DatabaseError (not its programming errors), else None.
    SQLAlchemy is imported only if it raised: the CLI starts without it."""
    if not type(error).__module__.startswith("sqlalchemy"):
        return None
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DatabaseError, OperationalError

    from labcoat import environment, store

    if not isinstance(error, DatabaseError) or isinstance(error, OperationalError):
        return None
    where = make_url(environment.database_url()).render_as_string(hide_password=True)
    return store.unreadable(where, error)


if __name__ == "__main__":
    main()
