"""`labcoat evals harvest | regress | history`: regression suites harvested from failures,
and their verdicts over time (registered on the `evals` group by `cli._evals`).

These verbs parse flags, read the store or the logs and call `labcoat.evals`; every
problem ends in one LabcoatError naming the flag, file or trial and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.cli._common import print_json, store_session
from labcoat.cli._evals import JsonFlag, app
from labcoat.errors import LabcoatError

if TYPE_CHECKING:
    from labcoat.evals import Outcome

SourcesArg = Annotated[list[str], typer.Argument(
    help="experiments in the store (by name) and/or result files or directories: Inspect "
         "logs (.eval, .json), lm-eval-harness samples_<task>_<time>.jsonl, labcoat per-item "
         "results (.jsonl/.json/.csv)")]
TrialOpt = Annotated[list[str] | None, typer.Option(
    "--trial", help="only this trial of the experiment (repeat for several)")]
ArmOpt = Annotated[str | None, typer.Option("--arm", help="only trials of this arm")]
MetricOpt = Annotated[str | None, typer.Option(help="score field of result files / logs")]
FilterOpt = Annotated[str | None, typer.Option("--filter", help="lm-eval-harness filter")]


@app.command("harvest")
def harvest_command(
    sources: SourcesArg,
    name: Annotated[str | None, typer.Option(
        "--name", help="the suite, kept in $LABCOAT_HOME/suites/NAME.json (default: the "
        "first source's name); harvesting into an existing suite adds a revision")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="write the suite to this .json file instead")] = None,
    trial: TrialOpt = None,
    arm: ArmOpt = None,
    step: Annotated[list[int] | None, typer.Option(
        "--step", help="only item results at this step (repeat; default every step)")] = None,
    suite: Annotated[Path | None, typer.Option(
        "--suite", help="the eval suite the trials were scored on (.jsonl/.csv/lm-eval "
        "YAML), for the items' text (default: the design's eval.suite, if it is a file)")
    ] = None,
    recorded: Annotated[bool, typer.Option(
        "--recorded-inputs/--no-recorded-inputs",
        help="also harvest inputs recorded with crash events or guard alerts (an "
             "'input' field in the event's data)")] = True,
    pass_score: Annotated[float, typer.Option(
        "--pass-score", help="an item passes when its score is at least this")] = 1.0,
    near: Annotated[float, typer.Option(
        "--near", help="Jaccard similarity (character 5-grams) of near duplicates")] = 0.7,
    holdout: Annotated[float, typer.Option(
        "--holdout", help="share of new items kept out of tuning (by item hash)")] = 0.2,
    metric: MetricOpt = None,
    filter_: FilterOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Build or extend a versioned regression suite from failed items.

    Keeps each item's provenance, removes exact and near duplicates, splits tune/holdout
    by item hash and labels flaky items (pass@k vs pass^k across seeds or epochs).
    """
    from labcoat import evals

    config = evals.HarvestConfig(pass_score=pass_score, near=near, holdout=holdout)
    outcomes, texts, notes = _collect(sources, trial, arm, step or [], suite, recorded, metric,
                                      filter_)
    path = out if out is not None else evals.suite_path(name or _default_name(sources[0]))
    regression = (evals.load_regression_suite(path) if path.exists()
                  else evals.RegressionSuite(name=name or path.stem))
    report = evals.harvest(outcomes, texts, regression, config, sources=list(sources))
    evals.save_regression_suite(regression, path)
    report.notes[:0] = notes
    if as_json:
        print_json({"suite": str(path), "name": regression.name, "items": len(regression.items),
                    **report.as_dict()})
        return
    console = Console()
    console.print(f"suite {escape(regression.name)} revision {report.revision}: "
                  f"{report.added} item(s) added ({report.holdout} held out), "
                  f"{len(regression.items)} in all -> {escape(str(path))}")
    table = Table("harvest", "count")
    for label, value in (("outcomes read", report.outcomes),
                         ("failed items", report.failed_items),
                         ("already in the suite", report.already_in_suite),
                         ("exact duplicates removed", report.exact_duplicates),
                         ("near duplicates removed", report.near_duplicates),
                         ("flaky (pass and fail at one checkpoint)", report.flaky),
                         ("inputs recorded with crashes/alerts", report.recorded_inputs)):
        table.add_row(label, str(value))
    console.print(table)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    shown = name if out is None and name else str(path)
    console.print(f"next: labcoat evals regress {escape(shown)} EXPERIMENT --step N (or a "
                  "later model's logs)")


@app.command("regress")
def regress_command(
    suite: Annotated[str, typer.Argument(help="a regression suite: NAME or a .json path")],
    sources: SourcesArg,
    trial: TrialOpt = None,
    arm: ArmOpt = None,
    step: Annotated[list[int] | None, typer.Option(
        "--step", help="score the checkpoint at this step (repeat: one entry per step, in "
        "order; default each trial's last step)")] = None,
    label: Annotated[str | None, typer.Option(
        "--label", help="name of this entry in the history (default: the model)")] = None,
    split: Annotated[str, typer.Option(
        "--split", help="all, tune or holdout items")] = "all",
    ci: Annotated[float, typer.Option("--ci", help="interval level")] = 0.95,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="print the verdict without recording it")] = False,
    metric: MetricOpt = None,
    filter_: FilterOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Score a checkpoint or model on a regression suite, with a verdict against the last.

    pass@k per item and per suite with intervals, and a paired verdict against the
    previous entry; recorded in the suite's history (the dashboard's /regression page).
    """
    from labcoat import evals

    path = evals.suite_path(suite)
    regression = evals.load_regression_suite(path)
    groups = _regress_groups(sources, trial, arm, step or [], metric, filter_)
    entries = []
    for group_label, outcomes in groups:
        entry = evals.score_entry(regression, outcomes, label=label or group_label,
                                  split=split, ci=ci, source=list(sources))
        evals.record_entry(regression, entry)
        entries.append(entry)
    if not dry_run:
        evals.save_regression_suite(regression, path)
    if as_json:
        print_json({"suite": str(path), "recorded": not dry_run, "entries": entries})
        return
    console = Console()
    for entry in entries:
        _print_entry(console, entry)
    if not dry_run:
        console.print(f"recorded {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} in "
                      f"{escape(str(path))}; `labcoat evals history {escape(str(suite))}` or "
                      "the dashboard's /regression page show the history")


@app.command("history")
def history_command(
    suite: Annotated[str, typer.Argument(help="a regression suite: NAME or a .json path")],
    as_json: JsonFlag = False,
) -> None:
    """A regression suite's scored entries: pass@1, verdicts, regressed items."""
    from labcoat import evals

    regression = evals.load_regression_suite(suite)
    if as_json:
        print_json({"name": regression.name, "revision": regression.revision,
                    "items": len(regression.items), "history": regression.history})
        return
    console = Console()
    console.print(f"suite {escape(regression.name)}: {len(regression.items)} items "
                  f"(revision {regression.revision}), {len(regression.history)} entries")
    table = Table("entry", "split", "items", "pass@1 [95% CI]", "vs previous", "verdict",
                  "regressed items")
    for entry in regression.history:
        versus = entry.get("versus") or {}
        table.add_row(escape(entry["label"]), entry["split"], str(len(entry["items"])),
                      _interval_text(entry["pass_at"].get("1")), _difference_text(versus),
                      versus.get("decision", "-"),
                      str(len(versus.get("regressed_items", []))) if versus else "-")
    console.print(table)


# --- reading sources ------------------------------------------------------------------


def _default_name(source: str) -> str:
    return Path(source).stem if Path(source).exists() else source.replace("/", "-")


def _collect(sources: list[str], trials: list[str] | None, arm: str | None, steps: list[int],
             suite: Path | None, recorded: bool, metric: str | None, filter_: str | None
             ) -> tuple[list[Outcome], dict, list[str]]:
    from labcoat import evals

    outcomes: list[Outcome] = []
    texts: dict = {}
    notes: list[str] = []
    files = [s for s in sources if Path(s).exists()]
    names = [s for s in sources if s not in files]
    if (trials or arm or steps) and not names:
        raise LabcoatError("--trial, --arm and --step choose trials of an experiment; give "
                           "an experiment name among the sources")
    for file in files:
        more, found = evals.log_outcomes(file, metric=metric, filter=filter_)
        outcomes += more
        texts.update(found)
    if names:
        with store_session() as session:
            from labcoat import store

            for name in names:
                exp = store.find_experiment(session, name)
                chosen = evals.select_trials(exp, trials=trials or [], arm=arm)
                outcomes += evals.store_outcomes(session, exp, chosen, steps=steps)
                if recorded:
                    more, found = evals.recorded_inputs(session, exp, chosen)
                    outcomes += more
                    texts.update(found)
                items = _suite_items(suite, exp)
                if items is None:
                    notes.append(f"experiment {name!r}: no eval suite file (--suite, or the "
                                 "design's eval.suite), so its items have no text")
                else:
                    texts.update({(i.task, i.id): i for i in items})
    return outcomes, texts, notes


def _suite_items(suite: Path | None, exp: Any) -> list | None:
    from labcoat.evals import load_suite

    if suite is not None:
        return list(load_suite(suite).items)
    import yaml

    try:
        declared = ((yaml.safe_load(exp.design_yaml) or {}).get("eval") or {}).get("suite")
    except (yaml.YAMLError, AttributeError):
        return None
    if not isinstance(declared, str):
        return None
    path = Path(declared)
    if not path.is_absolute() and exp.design_path:
        path = Path(exp.design_path).parent / path
    return list(load_suite(path).items) if path.exists() else None


def _regress_groups(sources: list[str], trials: list[str] | None, arm: str | None,
                    steps: list[int], metric: str | None, filter_: str | None
                    ) -> list[tuple[str, list[Outcome]]]:
    """One (label, outcomes) per model to score: each step of an experiment's chosen
    trials (their seeds are its answers), or all the files together (one model)."""
    from labcoat import evals

    files = [s for s in sources if Path(s).exists()]
    names = [s for s in sources if s not in files]
    if files and names:
        raise LabcoatError("regress scores one model at a time: give an experiment "
                           "(with --arm/--step) or result files of one model, not both")
    if len(names) > 1:
        raise LabcoatError(f"regress scores one experiment at a time, got {', '.join(names)}")
    if files:
        if trials or arm or steps:
            raise LabcoatError("--trial, --arm and --step choose trials of an experiment; "
                               "result files are scored as they are")
        outcomes = []
        for file in files:
            outcomes += evals.log_outcomes(file, metric=metric, filter=filter_)[0]
        models = sorted({o.model for o in outcomes})
        return [(", ".join(models[:3]) + (" ..." if len(models) > 3 else ""), outcomes)]
    from labcoat import store

    with store_session() as session:
        exp = store.find_experiment(session, names[0])
        chosen = evals.select_trials(exp, trials=trials or [], arm=arm)
        arms = sorted({t.arm for t in chosen})
        if len(arms) > 1:
            raise LabcoatError(f"experiment {exp.name!r}: the chosen trials are of arms "
                               f"{', '.join(arms)}; one model at a time: choose one with --arm")
        outcomes = evals.store_outcomes(session, exp, chosen, steps=steps, last=not steps)
    by_step: dict[int | None, list[Outcome]] = {}
    for o in outcomes:
        by_step.setdefault(o.step, []).append(o)
    if not steps and len(by_step) > 1:
        found = ", ".join(str(s) for s in sorted(by_step, key=lambda s: s or 0))
        raise LabcoatError(f"experiment {exp.name!r}: the trials' last eval steps differ "
                           f"({found}); choose the checkpoint with --step")
    return [(f"{exp.name}/{arms[0]}@{s}", by_step[s]) for s in (steps or list(by_step))]


# --- printing -----------------------------------------------------------------------------


def _interval_text(interval: dict | None) -> str:
    if not interval:
        return "-"
    if interval["low"] is None:
        return f"{interval['point']:.3f}"
    return f"{interval['point']:.3f} [{interval['low']:.3f}, {interval['high']:.3f}]"


def _difference_text(versus: dict) -> str:
    if not versus or "estimate" not in versus:
        return "-"
    return (f"{versus['estimate']:+.3f} [{versus['low']:+.3f}, {versus['high']:+.3f}] "
            f"p={versus['p_value']:.3g}")


def _print_entry(console: Console, entry: dict) -> None:
    answers = max(n for _, _, n, _ in entry["items"])
    console.print(f"[bold]{escape(entry['label'])}[/]: {len(entry['items'])} items scored "
                  f"({entry['missing']} missing), up to {answers} answer(s) each, "
                  f"{entry['flaky']} flaky")
    table = Table("k", "pass@k [CI]", "pass^k [CI]")
    for k, interval in entry["pass_at"].items():
        table.add_row(k, _interval_text(interval), _interval_text(entry["pass_hat"][k]))
    console.print(table)
    for note in entry.get("notes", []):
        console.print(f"[yellow]note:[/] {escape(note)}")
    versus = entry.get("versus")
    if not versus:
        console.print("first entry of this split: nothing to compare with yet")
        return
    if "estimate" not in versus:
        console.print(f"vs {escape(versus['label'])}: {versus.get('note', 'no comparison')}")
        return
    console.print(f"vs {escape(versus['label'])} on {versus['items']} shared items: pass@1 "
                  f"{_difference_text(versus)} ({versus['method']}): "
                  f"[bold]{versus['decision']}[/]")
    if versus["regressed_items"]:
        shown = ", ".join(f"{t}/{i}" for t, i in versus["regressed_items"][:10])
        console.print(f"regressed items ({len(versus['regressed_items'])}): {escape(shown)}")
    if versus["fixed_items"]:
        console.print(f"fixed items: {len(versus['fixed_items'])}")
