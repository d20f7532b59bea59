"""Verbs that reproduce a trial: show --provenance, rerun, replay."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from labcoat.cli._common import JsonFlag, console, print_json, store_session


def show_provenance(ref: str, *, as_json: bool, diff: bool) -> None:
    from labcoat import report as reports
    from labcoat.reproduce import find_trial, trial_provenance

    with store_session() as session:
        _, trial = find_trial(session, ref, "show --provenance")
        data, notes = trial_provenance(session, trial, ref)
    if as_json:
        print_json({"trial": ref, "provenance": data, "notes": notes})
    else:
        reports.print_provenance(ref, data, notes, console, diff=diff)


def rerun(
    trial: Annotated[str, typer.Argument(metavar="EXP/TRIAL", help="the trial to recreate")],
    as_json: JsonFlag = False,
) -> None:
    """Recreate a trial from its provenance (recorded code in a temporary git worktree, same
    command, params and seeds) and compare its metrics with the recorded ones, bit for bit.

    Exit status: 0 if bit-identical, 1 if it diverged (the first step and metric are named).
    """
    from labcoat import report as reports
    from labcoat.reproduce import rerun_trial

    result = rerun_trial(trial, console=Console(stderr=True))
    if as_json:
        print_json(result.as_dict())
    else:
        reports.print_rerun(result, console)
    if not result.identical:
        raise typer.Exit(1)


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
    from labcoat.reproduce import replay_trial

    result = replay_trial(trial, start=start, end=end, probes=probe, segments=segments,
                          parallel=parallel, verify=verify, console=Console(stderr=True))
    if as_json:
        print_json(result.as_dict())
    else:
        reports.print_replay(result, console)
