"""Verbs that run trials: run, import, demo."""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from labcoat.cli._common import console, labcoat_command
from labcoat.cli._design import example_design
from labcoat.cli._results import report
from labcoat.errors import LabcoatError
from labcoat.spec import LARGE_DESIGN


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
    yes: Annotated[bool, typer.Option(
        "--yes", help=f"start a design past its `budget: max_trials` or over "
        f"{LARGE_DESIGN:,} trials (without it, run refuses and says the size)")] = False,
) -> None:
    """Run every unfinished trial of DESIGN; run it again to resume after a stop."""
    from labcoat.monitor import run_until_decisive, standard_monitors
    from labcoat.runner import ExecutorConfig, parse_settings, run_design

    runs_on = ExecutorConfig(name=executor, address=address, partition=partition,
                             slurm=parse_settings(slurm or []))

    if not until_decisive and (max_seeds is not None or round_size is not None):
        flag = "--max-seeds" if max_seeds is not None else "--round-size"
        raise LabcoatError(f"{flag} sets how a sequential run adds seeds; it needs "
                           "--until-decisive (a plain run uses the design's `seeds:`)")
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
                         chaos=chaos, chaos_seed=chaos_seed, amend=amend, executor=runs_on,
                         monitors=standard_monitors(), allow_large=yes)
    _print_run_summary(summary)


def _print_run_summary(summary: Any) -> None:
    console.print(f"{len(summary.done)} trial(s) finished now, {len(summary.skipped)} earlier, "
                  f"{len(summary.failed)} failed")
    if summary.failed:
        console.print(f"[red]failed:[/] {escape(', '.join(summary.failed))}; "
                      f"`{escape(labcoat_command())} diagnose {escape(summary.experiment)}` "
                      "says why (cause, step, rank, evidence)", soft_wrap=True)
        raise typer.Exit(1)
    console.print(f"next: {escape(labcoat_command())} report {escape(summary.experiment)}",
                  soft_wrap=True)


def _with_home(home: Path, verb: str) -> str:
    """A command that reads the demo's home, runnable as printed (bash, zsh)."""
    return f"LABCOAT_HOME={shlex.quote(str(home))} {labcoat_command()} {verb}"


ITEM_SOURCES = ("lm-eval", "inspect", "items")


def import_command(
    paths: Annotated[list[str], typer.Argument(
        metavar="[SOURCE] PATH",
        help="SOURCE: mlflow, wandb or tensorboard (runs another tracker recorded: map them "
             "with --arm-by/--seed-by), or lm-eval, inspect, items (per-item results: "
             "--arm); without SOURCE, PATHs are per-item results (lm-eval-harness "
             "--log_samples output, Inspect AI .eval/.json logs, CSV/JSON/JSONL item scores)")],
    experiment: Annotated[str, typer.Option(help="experiment to import into (created if new)")],
    arm: Annotated[str | None, typer.Option(
        help="per-item results: the model or arm these results belong to")] = None,
    seed: Annotated[int | None, typer.Option(help="per-item results: the seed, if the arm has "
                                             "several")] = None,
    metric: Annotated[str | None, typer.Option(
        help="per-item results: score field (default: the only one; Inspect: scorer or "
             "scorer.key); runs: the hypothesis' metric (its last logged value per run)")] = None,
    filter_: Annotated[str | None, typer.Option("--filter", help="lm-eval-harness filter, "
                                                "when a file has several")] = None,
    replace: Annotated[bool, typer.Option(
        "--replace", help="replace what the same arm and seed already hold (without it, "
        "different results for them are refused)")] = False,
    arm_by: Annotated[str | None, typer.Option(
        help="runs: the key (param, tag, config, path part) whose value is each run's arm, "
             "e.g. params.optimizer")] = None,
    seed_by: Annotated[str | None, typer.Option(
        help="runs: the key whose value is each run's seed, e.g. config.seed")] = None,
    where: Annotated[list[str] | None, typer.Option(
        help="runs: import only runs with KEY=VALUE (repeatable), e.g. experiment=sweep3")
    ] = None,
    direction: Annotated[str | None, typer.Option(
        help="runs: increase or decrease, the way the variants should move --metric")] = None,
    control: Annotated[str | None, typer.Option(
        help="runs: the arm the others are compared with")] = None,
    smallest_effect: Annotated[float | None, typer.Option(
        help="runs: the smallest effect worth having, in the metric's units")] = None,
    claim: Annotated[str | None, typer.Option(help="runs: the claim in one sentence")] = None,
    design: Annotated[Path | None, typer.Option(
        help="runs: a short design file (hypothesis:, control:, secondary_metrics:, ...) "
             "instead of the hypothesis flags")] = None,
) -> None:
    """Store results computed elsewhere as EXPERIMENT so `labcoat report` puts error bars and
    a verdict on them: runs of MLflow, W&B or TensorBoard (labcoat import mlflow mlruns/
    --arm-by params.opt --seed-by params.seed --metric val_loss --direction decrease
    --control sgd), or per-item results as one arm (labcoat import results.json --arm A)."""
    from labcoat.runner import IMPORT_TOOLS

    if paths and paths[0] in IMPORT_TOOLS:
        item_flags = {"--arm": arm, "--seed": seed, "--filter": filter_}
        _refuse_flags(f"{paths[0]} runs", item_flags,
                      "map runs to arms and seeds with --arm-by and --seed-by")
        _import_runs(paths[0], paths[1:], experiment, arm_by=arm_by, seed_by=seed_by,
                     where=where, replace=replace, metric=metric, direction=direction,
                     control=control, smallest_effect=smallest_effect, claim=claim,
                     design=design)
        return
    if paths and paths[0] in ITEM_SOURCES:
        paths = paths[1:]
    run_flags = {"--arm-by": arm_by, "--seed-by": seed_by, "--where": where,
                 "--direction": direction, "--control": control,
                 "--smallest-effect": smallest_effect, "--claim": claim, "--design": design}
    _refuse_flags("per-item results", run_flags,
                  f"to import tracked runs, name their source first: labcoat import "
                  f"{'|'.join(IMPORT_TOOLS)} PATH ...")
    if arm is None:
        raise LabcoatError("--arm is missing: name the model or arm these results belong to "
                           f"(or start with a source, {', '.join(IMPORT_TOOLS)}, to import "
                           "tracked runs)")
    _import_items([Path(p) for p in paths], experiment, arm, seed, metric, filter_, replace)


def _refuse_flags(what: str, flags: dict[str, Any], hint: str) -> None:
    given = [flag for flag, value in flags.items() if value not in (None, [])]
    if given:
        verb = "does" if len(given) == 1 else "do"
        raise LabcoatError(f"{', '.join(given)} {verb} not apply to importing {what}; {hint}")


def _import_items(paths: list[Path], experiment: str, arm: str, seed: int | None,
                  metric: str | None, filter_: str | None, replace: bool) -> None:
    from labcoat.runner import import_results

    done = import_results(paths, experiment=experiment, arm=arm, seed=seed, metric=metric,
                          filter=filter_, replace=replace)
    tasks = ", ".join(f"{escape(t)} ({n})" for t, n in done.tasks.items())
    console.print(f"imported {sum(done.tasks.values())} item scores ({done.format}, metric "
                  f"{escape(done.metric)}) as {escape(done.experiment)}/{escape(done.trial)}: "
                  f"{tasks}", soft_wrap=True)
    _notes_and_next(done.notes, done.experiment)


def _notes_and_next(notes: list[str], experiment: str) -> None:
    """An import's notes, then the command that judges what it stored."""
    for note in notes:
        console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    console.print(f"next: {escape(labcoat_command())} report {escape(experiment)}",
                  soft_wrap=True)


def _import_runs(tool: str, paths: list[str], experiment: str, *, arm_by: str | None,
                 seed_by: str | None, where: list[str] | None, replace: bool,
                 **flags: Any) -> None:
    from labcoat.runner import ImportHypothesis, import_runs

    if flags["direction"] not in (None, "increase", "decrease"):
        raise LabcoatError(f"--direction {flags['direction']!r}: choose increase or decrease")
    done = import_runs(tool, paths, experiment=experiment, arm_by=arm_by, seed_by=seed_by,
                       where=where, replace=replace, hypothesis=ImportHypothesis(**flags))
    arms = ", ".join(f"{escape(a)} (seeds {', '.join(map(str, s))})" for a, s in done.arms.items())
    again = f", {done.outcomes['same']} again" if done.outcomes.get("same") else ""
    replaced = f", {done.outcomes['replaced']} replaced" if done.outcomes.get("replaced") else ""
    console.print(f"imported {sum(len(s) for s in done.arms.values())} {tool} runs "
                  f"({done.points:,} points{again}{replaced}) into "
                  f"{escape(done.experiment)}: {arms}", soft_wrap=True)
    _notes_and_next(done.notes, done.experiment)


def demo(
    steps: Annotated[int | None, typer.Option(help="override training steps (e.g. for a quick "
                                                   "smoke run)", min=1)] = None,
) -> None:
    """Run the example experiment in a temporary home and print its report."""
    from importlib.util import find_spec

    if find_spec("torch") is None:  # tinylm is a PyTorch model: say so before six trials fail
        raise LabcoatError("labcoat demo trains tinylm, a PyTorch model, and torch is not "
                           "installed here: pip install torch==2.13.0 (the CPU wheel), or "
                           "pip install 'labcoat[torch]', then run labcoat demo again")
    from labcoat.monitor import standard_monitors
    from labcoat.runner import run_design

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
    summary = run_design(design, console=console, monitors=standard_monitors())
    console.print(f"\n[dim]Results stay in {escape(str(home))}; explore them with "
                  f"{escape(_with_home(home, f'show {summary.experiment}'))} or "
                  f"{escape(_with_home(home, f'report {summary.experiment}'))}[/]\n",
                  soft_wrap=True)
    report(summary.experiment)  # last, so the verdict is the last line a user sees
    if summary.failed:
        raise typer.Exit(1)  # the example should never fail: a non-zero status says it did
