"""Terminal output of `labcoat show EXP/TRIAL --provenance`, `labcoat rerun` and `replay`."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def print_provenance(ref: str, data: dict[str, Any], notes: list[str], console: Console,
                     *, diff: bool = False) -> None:
    """The recorded provenance of one trial (its last attempt), readable."""
    code = data.get("code") or {}
    console.print(f"[bold]provenance of {escape(ref)}[/]")
    if code.get("git"):
        state = "uncommitted changes recorded" if code.get("dirty") else "clean"
        console.print(f"code       {escape(code['root'])} @ {code['commit'][:12]} "
                      f"({escape(str(code.get('branch')))}; {state})")
        if code.get("untracked"):
            console.print(f"           untracked files in the diff: "
                          f"{escape(', '.join(code['untracked']))}")
        for skipped in code.get("skipped") or []:
            console.print(f"           [yellow]not recorded:[/] {escape(skipped['path'])} "
                          f"({escape(skipped['reason'])})")
    else:
        console.print(f"code       [yellow]{escape(code.get('note') or 'not recorded')}[/]")
    design = data.get("design") or {}
    console.print(f"design     {escape(str(design.get('path')))} (sha256 "
                  f"{str(design.get('hash'))[:12]})")
    console.print(f"command    {escape(' '.join(data.get('command') or []))}")
    console.print(f"cwd        {escape(str(data.get('cwd')))}")
    params = ", ".join(f"{k}={v}" for k, v in (data.get("params") or {}).items())
    console.print(f"params     {escape(params)}")
    seeds = data.get("seeds") or {}
    extra = ", ".join(f"{k}={v}" for k, v in (seeds.get("params") or {}).items())
    console.print(f"seeds      seed={seeds.get('seed')}" + (f" ({escape(extra)})" if extra else ""))
    environment = data.get("environment") or {}
    executable = escape(str(environment.get("executable")))
    console.print(f"python     {environment.get('python')} ({executable})")
    torch = environment.get("torch")
    if torch:
        build = f"CUDA {torch['cuda']}" if torch.get("cuda") else (
            f"ROCm {torch['hip']}" if torch.get("hip") else "CPU")
        console.print(f"torch      {torch.get('version')} ({build}, git "
                      f"{str(torch.get('git_version'))[:12]})")
    cpu = environment.get("cpu") or {}
    console.print(f"hardware   {escape(str(cpu.get('model')))} x{cpu.get('count')}; GPUs: "
                  f"{escape(', '.join(environment.get('gpus') or [])) or 'none'}")
    variables = environment.get("variables") or {}
    if variables:
        console.print("variables  " + escape(", ".join(f"{k}={v}" for k, v in variables.items())))
    console.print(f"packages   {len(environment.get('packages') or {})} installed "
                  "(--json lists them)")
    files = data.get("data") or []
    if files:
        table = Table("data file", "declared as", "bytes", "sha256")
        for entry in files:
            if entry.get("missing"):
                table.add_row(escape(entry["path"]), entry["declared_as"], "missing", "")
            else:
                table.add_row(escape(entry["path"]), entry["declared_as"], str(entry["bytes"]),
                              entry["sha256"][:16])
        console.print(table)
    else:
        console.print("data       none declared (design `data:` block, or params naming files)")
    for note in notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if diff and code.get("diff"):
        console.print("[bold]uncommitted diff[/]")
        console.print(escape(code["diff"].rstrip()), highlight=False)


def print_rerun(result: Any, console: Console) -> None:
    for note in result.notes:
        console.print(f"[dim]{escape(note)}[/]")
    for change in result.changed:
        console.print(f"[yellow]changed since the run:[/] {escape(change)}")
    if result.identical:
        console.print(f"[green]bit-identical[/]: {result.points} metric points over "
                      f"{result.steps} steps reproduced exactly ({result.seconds:.1f} s)")
    elif result.divergence is not None:
        console.print(f"[red]diverged[/] first at {escape(result.divergence.describe())}")
    else:
        console.print("[red]not reproduced[/]: the metrics that ran match, but the rerun failed")
    console.print(f"[dim]rerun output: {escape(result.run_dir)}[/]")


def print_replay(result: Any, console: Console) -> None:
    for note in result.notes:
        console.print(f"[dim]{escape(note)}[/]")
    spans = ", ".join(f"{s.start}-{s.end} from step {s.restore_step} ({s.seconds:.1f} s)"
                      for s in result.segments)
    console.print(f"replayed {escape(result.trial)} steps {result.start}-{result.end} in "
                  f"{len(result.segments)} segment(s): {spans}")
    console.print(f"[green]verified[/]: {result.verify} equals the recorded value bit for bit "
                  f"at all {result.verified_steps} re-executed steps")
    series: dict[tuple[str, str], dict[int, float]] = {}
    for record in result.records:
        for name, value in record["values"].items():
            series.setdefault((record["probe"], name), {})[record["step"]] = value
    table = Table(title="probe values (all steps in the JSONL file)")
    table.add_column("probe", overflow="fold")
    table.add_column("quantity", overflow="fold", ratio=3)
    for heading in (f"step {result.start}", f"step {result.end}", "min", "max"):
        table.add_column(heading, justify="right", ratio=1)
    for (probe, name), values in series.items():
        finite = [v for v in values.values() if math.isfinite(v)]
        table.add_row(escape(probe), escape(name), _num(values.get(result.start)),
                      _num(values.get(result.end)), _num(min(finite) if finite else None),
                      _num(max(finite) if finite else None))
    console.print(table)
    console.print(f"probe values: {escape(result.output)}")


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"
