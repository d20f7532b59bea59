"""Everything the HTML report and the dashboard's experiment page show, gathered once.

The statistics are the terminal report's (`analyze`), never recomputed here;
this adds what only a page shows: the design text and its review findings,
curves, the incident timeline and each trial's command.
"""

from __future__ import annotations

import shlex
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from labcoat import store
from labcoat.analysis._curves import arm_curves
from labcoat.analysis._experiment import Analysis, analyze
from labcoat.analysis._status import experiment_summary
from labcoat.analysis._why import Why, load_why
from labcoat.journal import PHASE_POINTS
from labcoat.review import Finding
from labcoat.store import Experiment


@dataclass
class ReportPage:
    analysis: Analysis
    experiment: dict[str, Any]  # report._status.experiment_summary
    design_yaml: str
    findings: list[Finding] | None  # None: ad-hoc experiment, no design to review
    curves: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # metric -> arm
    trials: list[dict[str, Any]] = field(default_factory=list)  # key, arm, seed, status, ...
    timeline: list[dict[str, Any]] = field(default_factory=list)  # attempts, alerts, restarts
    generated_at: str = ""
    why: Why | None = None  # labcoat inside's saved results (analysis._why), if any


def report_page(session: Session, experiment: Experiment, *,
                analysis: Analysis | None = None,
                curves: dict[str, dict[str, dict[str, Any]]] | None = None) -> ReportPage:
    """The page's data; `analysis` and `curves` when the caller has them already (the
    dashboard computes them side by side)."""
    analysis = analysis or analyze(session, experiment)
    curves = page_curves(session, experiment) if curves is None else curves
    return ReportPage(
        analysis=analysis, experiment=experiment_summary(experiment),
        design_yaml=experiment.design_yaml or "",
        findings=review_findings(experiment.design_yaml) if experiment.design_yaml else None,
        curves=curves, trials=_trials(experiment), timeline=_timeline(session, experiment),
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        why=load_why(experiment.name),
    )


def page_curves(session: Session, experiment: Experiment
                ) -> dict[str, dict[str, dict[str, Any]]]:
    """Every logged metric's per-arm curves (report._curves.arm_curves), but the phase
    times (``phase_s/...``): the step-time-by-phase section draws those, per rank."""
    return {name: arm_curves(session, experiment, name)
            for name in store.metric_names(session, [t.id for t in experiment.trials])
            if not name.startswith(PHASE_POINTS)}


def review_findings(design_yaml: str) -> list[Finding]:
    """`labcoat lint` on the stored design (the file a run froze, not today's copy)."""
    from labcoat import review

    with tempfile.TemporaryDirectory(prefix="labcoat-review-") as tmp:
        path = Path(tmp) / "design.yaml"
        path.write_text(design_yaml, encoding="utf-8")
        found = review.lint(path)
    return [Finding(f.rule, f.severity, "design.yaml", f.line, f.message, f.fix) for f in found]


def _trials(experiment: Experiment) -> list[dict[str, Any]]:
    out = []
    for t in experiment.trials:
        last = store.last_attempt(t)
        out.append({"key": t.key, "arm": t.arm, "seed": t.seed, "scale": t.scale,
                    "status": t.status, "attempts": len(t.attempts),
                    "last_step": last.last_step if last else None,
                    "command": shlex.join(t.command) if t.command else ""})
    return out


def _timeline(session: Session, experiment: Experiment) -> list[dict[str, Any]]:
    """Attempts as spans and guard alerts as marks, on the wall clock (UTC)."""
    keys = {t.id: t.key for t in experiment.trials}
    rows: list[dict[str, Any]] = []
    for t in experiment.trials:
        for a in t.attempts:
            end = store.as_utc(a.ended_at) if a.ended_at else None
            rows.append({"kind": "attempt", "trial": t.key, "attempt": a.number,
                         "start": store.as_utc(a.started_at).isoformat(),
                         "end": end.isoformat() if end else None, "cause": a.cause or "running",
                         "restarted": a.number < len(t.attempts)})
    for alert in store.alerts(session, list(keys)):
        when = alert.time
        rows.append({"kind": "alert", "trial": keys[alert.trial_id], "step": alert.step,
                     "severity": alert.severity, "rule": alert.rule, "message": alert.message,
                     "time": datetime.fromtimestamp(when, UTC).isoformat() if when else None})
    return rows


def trial_data(session: Session, trial: Any, *, log_lines: int = 200) -> dict[str, Any]:
    """One trial for the dashboard: identity, attempts, alerts, checkpoints, last log lines."""
    from labcoat.analysis._status import _attempt_dict

    attempts = [_attempt_dict(a, prev) for prev, a in
                zip([None, *trial.attempts], trial.attempts, strict=False)]
    numbers = {a.id: a.number for a in trial.attempts}
    lines = store.log_lines(session, [trial.id])[-log_lines:]
    return {
        "key": trial.key, "arm": trial.arm, "seed": trial.seed, "scale": trial.scale,
        "status": trial.status, "params": dict(trial.params or {}),
        "command_line": shlex.join(trial.command) if trial.command else "",
        "attempts": len(trial.attempts), "attempt_history": attempts,
        "alerts": [{"step": a.step, "rule": a.rule, "severity": a.severity,
                    "message": a.message} for a in store.alerts(session, [trial.id])],
        "checkpoints": [{"step": c.step, "path": c.path, "bytes": c.bytes,
                         "verified": c.verified, "deleted": c.deleted}
                        for c in store.checkpoints(session, [trial.id])],
        "logs": [f"[attempt {numbers.get(e.attempt_id, '?')} {e.stream}] {e.message}"
                 for e in lines],
    }
