"""`labcoat diagnose` and `labcoat logs templates`: failure diagnoses and log templates,
as JSON-ready dicts and on the terminal."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

SHOWN_SUSPECTS = 8
SHOWN_NEW = 6


def diagnosis_entry(trial: Any, attempt: Any, diagnosis: Any) -> dict[str, Any]:
    """One diagnosed attempt: which trial and attempt, how the runner saw it end, and the
    diagnosis (`labcoat.diagnose.Diagnosis.to_dict`)."""
    return {"trial": trial.key, "arm": trial.arm, "seed": trial.seed, "status": trial.status,
            "attempt": attempt.number, "end": attempt.cause, "exit_code": attempt.exit_code,
            "attempt_host": attempt.host, "last_heartbeat": attempt.last_record_time,
            **diagnosis.to_dict()}


def print_diagnoses(data: dict[str, Any], console: Console) -> None:
    """Every diagnosed attempt of `data` (``{"experiment", "diagnoses": [...]}``)."""
    entries = data["diagnoses"]
    if not entries:
        console.print(f"experiment {escape(data['experiment'])} has no failed or diverged "
                      "trials: nothing "
                      "to diagnose (diagnose any trial with "
                      f"`labcoat diagnose {escape(data['experiment'])}/TRIAL`)", soft_wrap=True)
        return
    for i, entry in enumerate(entries):
        if i:
            console.print()
        _print_one(entry, console)


def _print_one(d: dict[str, Any], console: Console) -> None:
    end = f"{d['end']}" if d["end"] else "still running"
    console.print(f"[bold]{escape(d['trial'])}[/] attempt {d['attempt']} ({d['status']}; "
                  f"{escape(end)})", soft_wrap=True, highlight=False)
    cause = d["cause"] or "unknown"
    why = f" — {d['cause_text']}" if d["cause_text"] else ""
    console.print(f"  [red]cause[/]  {escape(cause)}{escape(why)}", soft_wrap=True,
                  highlight=False)
    if d.get("happened"):
        console.print(f"         [bold]{escape(d['happened'])}[/]", soft_wrap=True,
                      highlight=False)
    if d.get("fix"):
        console.print(f"  [green]fix[/]    {escape(d['fix'])}", soft_wrap=True, highlight=False)
    if d["exception"]:
        frame = d["user_frame"]
        at = f" at {frame['file']}:{frame['line']} in {frame['function']}" if frame else ""
        console.print(f"         {escape(d['exception'][:200])}{escape(at)}", soft_wrap=True,
                      highlight=False)
    when = "unknown step" if d["step"] is None else f"step {d['step']}"
    when += f" ({d['phase']})" if d["phase"] else ""
    signs = []
    if d["last_step"] is not None:
        beat = f"last heartbeat step {d['last_step']}"
        if d["last_heartbeat"]:
            beat += " at " + datetime.fromtimestamp(d["last_heartbeat"], UTC).strftime(
                "%H:%M:%S UTC")
        signs.append(beat)
    if d["first_new_step"] is not None:
        signs.append(f"first new template at step {d['first_new_step']}")
    if d["metric_jump"]:
        signs.append(f"{d['metric_jump'][0]} jumps at step {d['metric_jump'][1]}")
    console.print(f"  [yellow]when[/]   {when}" + (f"; {'; '.join(signs)}" if signs else ""),
                  soft_wrap=True, highlight=False)
    ranked = any(s["rank"] is not None for s in d["suspects"])
    where = f"rank {d['rank']}" if d["rank"] is not None else (
        "no rank stands out" if ranked else "the trial's process (no ranks reported)")
    host = d["host"] or d.get("attempt_host")
    where += f" on host {host}" if host else ""
    console.print(f"  [yellow]where[/]  {escape(where)}", highlight=False)
    for reason in d["evidence"]:
        console.print(f"         because {escape(reason)}", soft_wrap=True, highlight=False)
    _print_new(d, console)
    _print_suspects(d["suspects"], console)


def _print_new(d: dict[str, Any], console: Console) -> None:
    if not d["references"]:
        console.print("  [yellow]new[/]    no successful run to compare with (a done trial of "
                      "this experiment, or an earlier experiment)", soft_wrap=True)
        return
    refs = d["reference_trials"]
    against = f"{len(refs)} successful run(s): {', '.join(refs[:4])}" + (
        ", ..." if len(refs) > 4 else "") if refs else f"{d['references']} reference lines"
    new = d["new_templates"]
    console.print(f"  [yellow]new[/]    {len(new)} template(s) absent from "
                  f"{escape(against)}", soft_wrap=True, highlight=False)
    for t in new[:SHOWN_NEW]:
        ranks = f" ranks {_ranks(t['ranks'])}" if t["ranks"] else ""
        step = "" if t["first_step"] is None else f" from step {t['first_step']}"
        console.print(f"         x{t['count']}{ranks}{step}: {escape(t['example'].strip()[:160])}",
                      soft_wrap=True, highlight=False)
    if len(new) > SHOWN_NEW:
        console.print(f"         ... {len(new) - SHOWN_NEW} more (--json lists all)")


def _print_suspects(suspects: list[dict[str, Any]], console: Console) -> None:
    if not suspects:
        console.print("  no suspect lines: the output has no known failure message")
        return
    console.print("  [yellow]suspects[/], most likely first:")
    for i, s in enumerate(suspects[:SHOWN_SUSPECTS], start=1):
        where = []
        if s["rank"] is not None:
            others = len(s["ranks"]) - 1
            where.append(f"rank {s['rank']}" + (f" (+{others} more)" if others > 0 else ""))
        if s["step"] is not None:
            where.append(f"step {s['step']}")
        known = ", also in successful runs" if s["discounted"] else ""
        head = f"{s['cause'] or 'unknown cause'}" + (f" | {' | '.join(where)}" if where else "")
        console.print(f"  {i}. [bold]{escape(head)}[/] [dim](score {s['score']:.2f}"
                      f"{known})[/]", soft_wrap=True, highlight=False)
        console.print(f"     {escape(s['text'].strip()[:200])}", soft_wrap=True,
                      highlight=False)
        for reason in s["evidence"][:3]:
            console.print(f"     [dim]- {escape(reason[:200])}[/]", soft_wrap=True,
                          highlight=False)
    if len(suspects) > SHOWN_SUSPECTS:
        console.print(f"  ... {len(suspects) - SHOWN_SUSPECTS} more suspects (--json lists all)")


def print_templates(name: str, rows: list[Any], console: Console) -> None:
    """Templates (`labcoat.diagnose.TemplateSummary`) as a table, in order of first
    appearance."""
    if not rows:
        console.print("no lines match (noise is hidden; --all shows it)")
        return
    failed_only = sum(r.only_failed for r in rows)
    table = Table(title=f"{name}: {len(rows)} templates over {sum(r.count for r in rows)} "
                  f"lines ({failed_only} printed only by failed attempts)",
                  title_justify="left", box=None, pad_edge=False, header_style="bold")
    for header in ("id", "lines", "trials", "ranks", "from step", "failed only"):
        table.add_column(header, no_wrap=True)
    table.add_column("template", ratio=1)
    for r in rows:
        trials = r.trials[0] if len(r.trials) == 1 else f"{len(r.trials)} trials"
        table.add_row(r.template, str(r.count), escape(trials), _ranks(r.ranks),
                      "" if r.first_step is None else str(r.first_step),
                      "[red]yes[/]" if r.only_failed else "", escape(r.text[:140]))
    console.print(table)


def _ranks(ranks: list[int] | tuple[int, ...]) -> str:
    ranks = sorted(set(ranks))
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(str(r) for r in ranks)
