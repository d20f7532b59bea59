"""Verbs on what trials printed and why they failed: logs, diagnose."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from labcoat.cli._common import (
    JsonFlag,
    console,
    find_experiment,
    known_experiment,
    print_json,
    store_session,
)
from labcoat.errors import LabcoatError


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
    with store_session() as session:
        if experiment == "templates":
            _templates_needs_experiment(session)
        exp = find_experiment(session, experiment, "logs")
        trials = list(exp.trials) if trial is None else [store.find_trial(exp, trial)]
        events = store.log_lines(session, [t.id for t in trials])
        if rank is not None:  # the capture's rank, else the one the line names ([rank3]:)
            events = _at_rank(events, rank, exp.name if trial is None else
                              f"{exp.name}/{trial}")
        keys = {t.id: t.key for t in trials}
        attempts = {a.id: a.number for t in trials for a in t.attempts}
        lines = reports.select_lines(events, keys, attempts, level=level, grep=grep,
                                     noise=show_all)
    if as_json:
        print_json(reports.lines_json(lines))
    else:
        reports.print_lines(lines, console)


def _at_rank(events: list[Any], rank: int, where: str) -> list[Any]:
    """The lines rank `rank` printed; a rank no line names is an error listing those that
    do (else a typo'd or single-process --rank shows "no lines match")."""
    from labcoat.diagnose import rank_of

    ranks = [e.rank if e.rank is not None else rank_of(e.message) for e in events]
    if rank not in ranks:
        seen = sorted({r for r in ranks if r is not None})
        known = f"ranks that printed: {', '.join(map(str, seen))}" if seen else \
            "no line names a rank: its trials ran as one process"
        raise LabcoatError(f"--rank {rank}: no line of {where} was printed by rank {rank} "
                           f"({known})")
    return [e for e, r in zip(events, ranks, strict=True) if r == rank]


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

    with store_session() as session:
        exp = find_experiment(session, experiment, "logs templates")
        rows = diagnosis.experiment_templates(session, exp, trial=trial, rank=rank,
                                              level=level, grep=grep, noise=noise)
        name = exp.name
    if as_json:
        print_json({"experiment": name, "templates": [r.to_dict() for r in rows]})
    else:
        reports.print_templates(name, rows, console)


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
        if not experiment or not trial:
            raise LabcoatError(f"{target!r} names no trial: give EXP/TRIAL, e.g. labcoat "
                               "diagnose warmup/better-s1 (or EXP for every failed trial)")
    if attempt is not None and trial is None:
        raise LabcoatError("--attempt needs one trial: labcoat diagnose EXP/TRIAL --attempt N")
    with store_session() as session:
        if experiment != target and attempt is None and known_experiment(session, target):
            experiment, trial = target, None  # an experiment named "team/exp1"
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
        print_json(data)
    else:
        reports.print_diagnoses(data, console)


def _diverged(session: Any, experiment: Any) -> list[Any]:
    """Finished trials whose metrics went NaN/inf: done is not healthy."""
    from labcoat import store

    done = [t for t in experiment.trials if t.status == "done"]
    bad = store.first_non_finite(session, [t.id for t in done], None)
    return [t for t in done if t.id in bad]
