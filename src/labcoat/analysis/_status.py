"""Where an experiment stands: trials, their attempts (restarts, work lost) and goodput.

`status_data` is also the documented `labcoat show EXP --json` shape:
{"experiment": {"id", "name", "status", ...}, "trials": [{"id", "arm", "seed",
"status", "attempts", "params", ...}], "goodput": {...}}.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from labcoat import store
from labcoat.journal import Events
from labcoat.runner import Goodput, experiment_goodput
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
    problems = _checkpoint_problems(session, [t.id for t in exp.trials])
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
                       for a in alert_rows if a.trial_id == t.id] + problems.get(t.id, []),
        })
    return {"experiment": experiment_summary(exp), "trials": trials,
            "goodput": _goodput_dict(total)}


def _checkpoint_problems(session: Session, trial_ids: list[int]
                         ) -> dict[int, list[dict[str, Any]]]:
    """Checkpoint events a user must see, as alert rows (rule = event name) by trial id: a
    checkpoint that failed verification (moved aside by restore), a save that failed, and
    a restart from step 0 although checkpoints existed (their training is lost)."""
    rows: dict[int, list[dict[str, Any]]] = {}
    for e in store.events(session, trial_ids, min_level="warning"):
        data = e.data or {}
        if (e.kind in (Events.CHECKPOINT_CORRUPT, Events.CHECKPOINT_FAILED)
                or e.kind == Events.CHECKPOINT_FRESH_START and data.get("unusable")):
            rows.setdefault(e.trial_id, []).append(
                {"step": e.step, "rule": e.kind, "severity": e.level, "message": e.message,
                 "evidence": data})
    return rows


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
