"""Where an experiment stands: trials, their attempts (restarts, work lost) and goodput.

`status_data` is also the documented `labcoat show EXP --json` shape:
{"experiment": {"id", "name", "status", ...}, "trials": [{"id", "arm", "seed",
"status", "attempts", "params", ...}], "goodput": {...}}.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy.orm import Session

from labcoat import store
from labcoat.runner import LOSSES, Goodput, experiment_goodput
from labcoat.store import Attempt, Experiment


def experiment_summary(exp: Experiment) -> dict[str, Any]:
    statuses = [t.status for t in exp.trials]
    return {"id": exp.id, "name": exp.name, "status": store.experiment_status(exp),
            "design_hash": exp.design_hash, "created_at": exp.created_at.isoformat(),
            "trials": len(statuses), "done": statuses.count("done"),
            "failed": statuses.count("failed")}


def status_data(session: Session, exp: Experiment) -> dict[str, Any]:
    per_trial, total = experiment_goodput(session, exp)
    alert_rows = store.alerts(session, [t.id for t in exp.trials])
    trials = []
    for t in exp.trials:
        last = store.last_attempt(t)
        trials.append({
            "id": t.id, "key": t.key, "arm": t.arm, "seed": t.seed, "status": t.status,
            "attempts": len(t.attempts), "params": t.params, "command": t.command,
            "last_step": last.last_step if last else None, "total_steps": t.total_steps,
            "cause": last.cause if last else None, "run_dir": last.run_dir if last else None,
            "attempt_history": [_attempt_dict(a, prev) for prev, a in
                                zip([None, *t.attempts], t.attempts, strict=False)],
            "goodput": _goodput_dict(per_trial[t.key]),
            "alerts": [{"step": a.step, "rule": a.rule, "severity": a.severity,
                        "message": a.message, "evidence": a.evidence}
                       for a in alert_rows if a.trial_id == t.id],
        })
    return {"experiment": experiment_summary(exp), "trials": trials,
            "goodput": _goodput_dict(total)}


def _attempt_dict(a: Attempt, previous: Attempt | None) -> dict[str, Any]:
    lost = None
    if previous is not None and previous.last_step is not None and a.restored_step is not None:
        lost = max(0, previous.last_step - a.restored_step)
    return {"number": a.number, "started_at": a.started_at.isoformat(),
            "seconds": a.seconds(), "cause": a.cause, "exit_code": a.exit_code,
            "host": a.host, "reached_step": a.last_step, "resumed_from": a.restored_step,
            "steps_redone": lost}


def _goodput_dict(g: Goodput) -> dict[str, Any]:
    return {"ratio": g.ratio, "wall_s": g.wall_s, "productive_s": g.productive_s,
            "lost_s": dict(g.lost), "queued_s": g.queued_s, "redone_steps": g.redone_steps}


def print_status(data: dict[str, Any], console: Console) -> None:
    e = data["experiment"]
    table = Table("trial", "arm", "seed", "status", "attempts", "step", "goodput",
                  "last attempt", title=f"{e['name']}: {e['status']} "
                  f"({e['done']}/{e['trials']} done)", title_justify="left")
    for t in data["trials"]:
        step = "" if t["last_step"] is None else str(t["last_step"])
        if t["total_steps"]:
            step += f"/{t['total_steps']}"
        table.add_row(escape(t["key"]), escape(t["arm"]), str(t["seed"]), t["status"],
                      str(t["attempts"]), step, _percent(t["goodput"]["ratio"]),
                      escape(t["cause"] or ""))
    console.print(table)
    restarted = [t for t in data["trials"] if t["attempts"] > 1]
    if restarted:
        console.print(_attempts_table(restarted))
    console.print(goodput_line(data["goodput"]), soft_wrap=True)
    print_alerts(data["trials"], console)
    for t in data["trials"]:
        if t["status"] == "failed" and t["run_dir"]:
            console.print(f"[red]{escape(t['key'])}[/] logs: {escape(t['run_dir'])}/stderr.log",
                          soft_wrap=True)


def print_alerts(trials: list[dict[str, Any]], console: Console, limit: int = 20) -> None:
    """Guard alerts, worst first, at most `limit` lines."""
    rows = [(t["key"], a) for t in trials for a in t.get("alerts", [])]
    if not rows:
        return
    order = {"critical": 0, "error": 1, "warning": 2}
    rows.sort(key=lambda r: (order.get(r[1]["severity"], 3), r[1]["step"] or 0))
    console.print(f"[bold]guard alerts[/] ({len(rows)}):")
    for key, a in rows[:limit]:
        console.print(f"  {escape(key)} step {a['step']}: [{_ALERT_STYLE.get(a['severity'], '')}]"
                      f"{a['severity']}[/] {escape(a['rule'])} - {escape(a['message'])}",
                      soft_wrap=True)
    if len(rows) > limit:
        console.print(f"  ... {len(rows) - limit} more (labcoat status EXP --json)")


_ALERT_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow"}


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
