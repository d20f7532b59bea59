"""Reference profiles for the guard's inferred invariants, taken from the store.

A trial of an arm is checked against what clean, finished trials of the same
arm learned (their `guard.profile` events): which parameters change at each
step, how the monitored quantities behave per phase, which modules run in which
mode. "Clean" means finished with no error or critical guard alert.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sqlalchemy.orm import Session

from labcoat import store
from labcoat.journal import Events
from labcoat.store import Experiment, Trial

MAX_REFERENCES = 5
REFERENCE_NAME = "guard-reference.json"


def write_references(session: Session, experiment: Experiment, trial: Trial,
                     directory: Path) -> Path | None:
    """Write the clean profiles of `trial`'s arm to directory/guard-reference.json (atomic);
    None when there are none yet."""
    peers = [t for t in experiment.trials
             if t.arm == trial.arm and t.id != trial.id and t.status == "done"]
    if not peers:
        return None
    ids = [t.id for t in peers]
    dirty = {a.trial_id for a in store.alerts(session, ids) if a.severity in ("error", "critical")}
    profiles = [e.data["profile"] for e in store.events(session, ids, kind=Events.GUARD_PROFILE)
                if e.trial_id not in dirty and isinstance((e.data or {}).get("profile"), dict)]
    if not profiles:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / REFERENCE_NAME
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(profiles[-MAX_REFERENCES:]), encoding="utf-8")
    os.replace(tmp, path)
    return path
