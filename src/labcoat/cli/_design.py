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
    if target.exists():
        raise LabcoatError(f"{target} already exists; choose another directory or remove it")
    directory.mkdir(parents=True, exist_ok=True)
    target.write_text(example_design(), encoding="utf-8")
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
        print_json(reports.plan_dict(found))
    else:
        reports.print_plan(found, console)
