"""Verbs before a run: init, lint, plan."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from labcoat.cli._common import JsonFlag, console, labcoat_command, print_json
from labcoat.errors import LabcoatError

EXAMPLE = "warmup.yaml"


def example_design() -> str:
    return resources.files("labcoat").joinpath("examples", EXAMPLE).read_text(encoding="utf-8")


def init(directory: Annotated[Path, typer.Argument(help="where to write design.yaml")]) -> None:
    """Write the example design (and nothing else) into DIRECTORY."""
    target = directory / "design.yaml"
    if directory.exists() and not directory.is_dir():
        raise LabcoatError(f"{directory} is a file, not a directory; `labcoat init DIRECTORY` "
                           "writes design.yaml inside DIRECTORY: give a new or existing "
                           "directory")
    if target.exists():
        raise LabcoatError(f"{target} already exists; choose another directory or remove it")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(target, "x", encoding="utf-8") as out:
            out.write(example_design())
    except OSError as e:  # a parent that is a file, no permission, a read-only disk
        raise LabcoatError(f"cannot write {target}: {e.strerror or e} ({e.filename or target})"
                           "; choose a directory you can write") from None
    console.print(f"wrote {escape(str(target))}; run it with: {escape(labcoat_command())} run "
                  f"{escape(str(target))}", soft_wrap=True)


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
        print_json([f.as_dict() for f in findings])
    else:
        reports.print_findings(findings, console)
    failing = {"error", "warning"} if strict else {"error"}
    if any(f.severity in failing for f in findings):
        raise typer.Exit(1)


def plan(
    designs: Annotated[list[Path], typer.Argument(
        help="the design file (YAML); several: rank them by expected information per unit "
        "of compute", metavar="DESIGN...")],
    pilot: Annotated[str | None, typer.Option(help="an earlier experiment in the store whose "
                                              "variances set the plan")] = None,
    candidates: Annotated[str | None, typer.Option(
        help="comma-separated interventions to test together in a fractional factorial")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Seeds per arm and items per task for 80% power, and what each would buy; the bits
    each hypothesis is expected to teach (from its `predict:` prior and power). Given several
    designs: they are ranked by expected information per unit of compute."""
    from labcoat import report as reports
    from labcoat import review, spec

    if len(designs) > 1:
        if candidates is not None:
            raise LabcoatError("--candidates plans a fractional factorial for one design; "
                               f"give one design with it, not {len(designs)}")
        ranked = review.rank([(str(d), spec.load_design(d), review.pilots_from_store(d, pilot))
                              for d in designs])
        if as_json:
            print_json(reports.ranking_dict(ranked))
        else:
            reports.print_ranking(ranked, console)
        return
    design = designs[0]
    names = _candidate_names(candidates)
    found = review.plan(spec.load_design(design), review.pilots_from_store(design, pilot),
                        candidates=names)
    failed = [n for n in found.notes if n.startswith("no fractional factorial suggested")]
    if names and failed:  # asked for explicitly: an answer, not a note
        raise LabcoatError(f"--candidates {candidates}: {failed[0]}")
    if as_json:
        print_json(reports.plan_dict(found))
    else:
        reports.print_plan(found, console)


def _candidate_names(candidates: str | None) -> list[str] | None:
    """--candidates a,b,c as names; the factorial suggestion needs three or more (fewer
    would be ignored without a word)."""
    if candidates is None:
        return None
    names = [name.strip() for name in candidates.split(",")]
    if any(not name for name in names):
        raise LabcoatError(f"--candidates {candidates!r} has an empty name; give names "
                           "separated by commas, e.g. --candidates warmup,dropout,ema")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise LabcoatError(f"--candidates {candidates!r} names {', '.join(twice)} twice; "
                           "give each intervention once")
    if len(names) < 3:
        raise LabcoatError(
            f"--candidates {candidates!r}: a fractional factorial tests three or more "
            f"interventions together, and this names {len(names)}; for two, run all four "
            "combinations as arms (control, each alone, both), or add a third candidate")
    return names
