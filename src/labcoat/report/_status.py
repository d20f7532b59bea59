"""Where an experiment stands: trials, their attempts (restarts, work lost) and goodput.

`status_data` is also the documented `labcoat show EXP --json` shape:
{"experiment": {"id", "name", "status", ...}, "trials": [{"id", "arm", "seed",
"status", "attempts", "params", ...}], "goodput": {...}}.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from labcoat.journal import Events
from labcoat.runner import LOSSES, runner_state


def print_wide(table: Table, console: Console) -> None:
    """Print `table` as wide as its cells need, never narrower than the terminal: names are
    never cut ("an-arm-w…") or split across lines to fit 80 columns (a wider table wraps
    in the terminal but stays whole, and whole in a file or pipe)."""
    needed = Measurement.get(console, console.options.update_width(100_000), table).maximum
    width = console.width
    console.width = max(width, needed)  # Console.print(width=) cannot exceed it
    try:
        console.print(table)
    finally:
        console.width = width


def print_status(data: dict[str, Any], console: Console) -> None:
    data = mark_interrupted(data)
    e = data["experiment"]
    # the name on a line of its own: as a table title it would be wrapped mid-name
    console.print(f"[italic]{escape(e['name'])}: {e['status']} ({e['done']}/{e['trials']} "
                  "done)[/]", soft_wrap=True, highlight=False)
    table = Table("trial", "arm", "seed", "status", "attempts", "step", "goodput",
                  "last attempt")
    for t in data["trials"]:
        step = "" if t["last_step"] is None else str(t["last_step"])
        if t["total_steps"]:
            step += f"/{t['total_steps']}"
        table.add_row(escape(t["key"]), escape(t["arm"]), str(t["seed"]), t["status"],
                      str(t["attempts"]), step, _percent(t["goodput"]["ratio"]),
                      escape(t["cause"] or ""))
    print_wide(table, console)
    restarted = [t for t in data["trials"] if t["attempts"] > 1 or t["status"] == "interrupted"]
    if restarted:
        print_wide(_attempts_table(restarted), console)
    console.print(goodput_line(data["goodput"]), soft_wrap=True)
    print_alerts(data["trials"], console)
    for t in data["trials"]:
        if t["status"] == "failed" and t["run_dir"]:
            console.print(f"[red]{escape(t['key'])}[/] logs: {escape(t['run_dir'])}/stderr.log",
                          soft_wrap=True)


def mark_interrupted(data: dict[str, Any], *, documented: bool = False) -> dict[str, Any]:
    """Trials the store calls running whose runner is gone (kill -9, a crash) as
    "interrupted (runner pid N gone)", their open attempt lasting until the runner's last
    heartbeat; `labcoat run` again resumes them. `data` is left unchanged.

    documented=True (the `--json` shapes, whose trial statuses are pending, running, done,
    failed): statuses stay as recorded; such trials get "interrupted": true and the
    cause, and the experiment "runner": "pid N gone"."""
    running = [t for t in data["trials"] if t["status"] == "running"]
    state = runner_state(data["experiment"]["name"]) if running else None
    if state is None or state.alive:
        return data
    why = f"interrupted ({state.gone()}); `labcoat run` again resumes it"
    trials = [_interrupted(t, why, state.heartbeat, documented) if t["status"] == "running"
              else t for t in data["trials"]]
    experiment = dict(data["experiment"])
    if documented:
        experiment["runner"] = state.gone()
    elif experiment["status"] == "running":
        experiment["status"] = "interrupted"
    return {**data, "experiment": experiment, "trials": trials}


def summary_interrupted(row: dict[str, Any]) -> dict[str, Any]:
    """An `experiment_summary` row as `mark_interrupted` would show its experiment."""
    if row["status"] != "running":
        return row
    state = runner_state(row["name"])
    return row if state is None or state.alive else {**row, "status": "interrupted"}


def _interrupted(trial: dict[str, Any], why: str, heartbeat: float | None,
                 documented: bool) -> dict[str, Any]:
    history = [dict(a) for a in trial["attempt_history"]]
    if history and history[-1]["seconds"] is None and heartbeat is not None:
        started = datetime.fromisoformat(history[-1]["started_at"])
        started = started if started.tzinfo else started.replace(tzinfo=UTC)
        history[-1]["seconds"] = max(0.0, heartbeat - started.timestamp())
        history[-1]["cause"] = why
    status = {"interrupted": True} if documented else {"status": "interrupted"}
    return {**trial, **status, "cause": why, "attempt_history": history}


# any other severity (info: a rank waiting for a slow peer) is dim; an empty style would
# leave a bare "[/]" that rich refuses
_ALERT_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow"}


def alert_groups(rows: list[tuple[str, dict[str, Any]]]
                 ) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """(heading, (trial key, alert) rows) of each kind of alert row that has any: checkpoint
    problems (rules ``checkpoint.*``, events), slow steps (``phase.slow``, the slow-step
    alarm), then guard alerts (the silent-error guard's rules)."""
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {
        "checkpoint problems": [], "slow steps": [], "guard alerts": []}
    for key, a in rows:
        rule = a["rule"]
        group = ("checkpoint problems" if rule.startswith("checkpoint.") else
                 "slow steps" if rule == Events.PHASE_SLOW else "guard alerts")
        groups[group].append((key, a))
    return [(heading, found) for heading, found in groups.items() if found]


def print_alerts(trials: list[dict[str, Any]], console: Console, limit: int = 20) -> None:
    """Alert rows, at most `limit` lines a group, under a heading per kind (`alert_groups`):
    checkpoint problems, slow steps, then guard alerts worst first."""
    order = {"critical": 0, "error": 1, "warning": 2}
    for heading, rows in alert_groups([(t["key"], a) for t in trials
                                       for a in t.get("alerts", [])]):
        if heading == "guard alerts":
            rows.sort(key=lambda r: (order.get(r[1]["severity"], 3), r[1]["step"] or 0))
        console.print(f"[bold]{heading}[/] ({len(rows)}):")
        for key, a in rows[:limit]:
            rule = f"{escape(a['rule'])} - " if heading == "guard alerts" else ""
            console.print(f"  {escape(key)} step {a['step']}: "
                          f"[{_ALERT_STYLE.get(a['severity'], 'dim')}]{escape(a['severity'])}[/] "
                          f"{rule}{escape(a['message'])}", soft_wrap=True)
        if len(rows) > limit:
            console.print(f"  ... {len(rows) - limit} more (labcoat status EXP --json)")


def _attempts_table(trials: list[dict[str, Any]]) -> Table:
    table = Table("trial", "attempt", "duration", "reached step", "resumed from", "steps redone",
                  "cause", title="attempts of restarted trials", title_justify="left",
                  box=box.SIMPLE_HEAD)
    for t in trials:
        for a in t["attempt_history"]:
            seconds = "" if a["seconds"] is None else f"{a['seconds']:.1f} s"
            table.add_row(escape(t["key"]), str(a["number"]), seconds,
                          _blank(a["reached_step"]), _blank(a["resumed_from"]),
                          _blank(a["steps_redone"]), escape(a["cause"] or "running"))
    return table


def goodput_line(g: dict[str, Any]) -> str:
    """e.g. 'goodput 96.1% of 312 s: lost checkpoint saves 2.0 s, ...'."""
    if g["ratio"] is None:
        return "goodput: no attempt has run yet"
    losses = ", ".join(f"{name.replace('_', ' ')} {g['lost_s'][name]:.1f} s"
                       for name in LOSSES if g["lost_s"][name] > 0.05)
    text = (f"goodput {_percent(g['ratio'])} of {g['wall_s']:.0f} s of trial time"
            + (f"; lost: {losses}" if losses else ""))
    if g["redone_steps"]:
        text += f" ({g['redone_steps']} steps redone)"
    if g["queued_s"] > 0.05:
        text += f"; queued for a slot {g['queued_s']:.0f} s"
    return text


def _percent(ratio: float | None) -> str:
    return "" if ratio is None else f"{100 * ratio:.1f}%"


def _blank(value: Any) -> str:
    return "" if value is None else str(value)
