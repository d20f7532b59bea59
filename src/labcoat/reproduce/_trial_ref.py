"""Naming one trial on the command line (``EXP/TRIAL``) and finding what it was run with."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from labcoat import store
from labcoat.errors import LabcoatError
from labcoat.journal import PHASE_POINTS
from labcoat.store import Experiment, Trial

# Parts of a provenance record that must agree across attempts for the metrics to be one run's.
_COMPARED = {"code commit": ("code", "commit"), "uncommitted diff": ("code", "diff_sha256"),
             "design": ("design", "hash")}


def split_ref(ref: str, verb: str) -> tuple[str, str]:
    """``EXP/TRIAL`` -> (EXP, TRIAL); the error shows the form. verb: e.g. "rerun", or
    "show --provenance" (the flag is shown after the trial)."""
    experiment, _, trial = ref.rpartition("/")
    if not experiment or not trial:
        command, _, flags = verb.partition(" ")
        example = f"labcoat {command} warmup-demo/warmup-s1" + (f" {flags}" if flags else "")
        raise LabcoatError(f"{ref!r} does not name a trial; use EXPERIMENT/TRIAL, e.g. "
                           f"`{example}` (trials: labcoat show EXP)")
    return experiment, trial


def find_trial(session: Session, ref: str, verb: str) -> tuple[Experiment, Trial]:
    name, key = split_ref(ref, verb)
    experiment = store.find_experiment(session, name)
    return experiment, store.find_trial(experiment, key)


def trial_provenance(session: Session, trial: Trial, ref: str) -> tuple[dict[str, Any], list[str]]:
    """The provenance of the trial's last attempt, and notes on attempts that differ from it
    (a resumed trial whose code changed between attempts is not one program's run)."""
    records = store.provenance(session, trial)
    if not records:
        raise LabcoatError(f"trial {ref} has no recorded provenance: it ran before labcoat "
                           "recorded provenance (or never started); run it again with "
                           "`labcoat run` to record it")
    number, last = records[-1]
    notes = []
    for other_number, other in records[:-1]:
        for what, (section, key) in _COMPARED.items():
            if (other.get(section) or {}).get(key) != (last.get(section) or {}).get(key):
                notes.append(f"attempt {other_number} ran with another {what} than attempt "
                             f"{number}: its metrics may not be reproducible from attempt "
                             f"{number}'s provenance")
    return last, notes


def recorded_metrics(session: Session, trial: Trial) -> dict[str, dict[int, float]]:
    """{metric: {step: value}} as the store holds them, less the phase times
    (``phase_s/...``: wall-clock durations, never reproducible bit for bit)."""
    metrics: dict[str, dict[int, float]] = {}
    for point in store.metric_points(session, [trial.id]):
        if not point.name.startswith(PHASE_POINTS):
            metrics.setdefault(point.name, {})[int(point.step)] = point.value
    return metrics
