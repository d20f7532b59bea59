"""`labcoat rerun EXP/TRIAL`: recreate a trial from its provenance and compare, bit for bit.

The recorded code (a temporary git worktree at the recorded commit, the recorded
uncommitted diff applied) runs the recorded command with the same params, seeds
and numeric environment (thread counts), journaling into
``$LABCOAT_HOME/reruns/EXP/TRIAL/<time>/`` — never into the experiment. Then every
metric point is compared with the recorded one: the first divergence (step,
metric, both values) or a bit-identical reproduction. What changed since the
run (a data file's fingerprint, package versions, torch's build) is listed
beside the verdict, since it is usually why a rerun diverges.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from labcoat import store
from labcoat.errors import Interrupted, LabcoatError
from labcoat.reproduce import _recreate
from labcoat.reproduce._compare import Divergence, JournalMetrics, count_points, first_divergence
from labcoat.reproduce._trial_ref import find_trial, recorded_metrics, trial_provenance
from labcoat.reproduce._worktree import recorded_code
from labcoat.runner import current_fingerprint, environment_state, stderr_tail
from labcoat.sdk import JOURNAL_NAME

POLL_SECONDS = 0.2


@dataclass
class RerunResult:
    trial: str  # EXP/TRIAL
    identical: bool
    divergence: Divergence | None
    points: int  # metric points compared (recorded)
    steps: int  # distinct steps recorded
    exit_code: int
    seconds: float
    run_dir: str  # the rerun's journal and output
    notes: list[str] = field(default_factory=list)  # how the code was recreated
    changed: list[str] = field(default_factory=list)  # what differs since the original run

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "divergence"}
        out["divergence"] = None if self.divergence is None else self.divergence.__dict__
        return out


def rerun_trial(ref: str, *, console: Console | None = None) -> RerunResult:
    """Rerun the trial `ref` (``EXP/TRIAL``) from its provenance; see the module doc."""
    console = console or Console(stderr=True)
    db = store.open_store()
    try:  # read everything, then let go of the store while the rerun runs
        with db.session() as session:
            experiment, trial = find_trial(session, ref, "rerun")
            provenance, notes = trial_provenance(session, trial, ref)
            recorded = recorded_metrics(session, trial)
    finally:
        db.close()
    if not recorded:
        raise LabcoatError(f"trial {ref} has no recorded metrics to compare a rerun with")
    run_dir = _recreate.scratch_dir("reruns", experiment.name, trial.key)
    with recorded_code(provenance.get("code") or {}, run_dir) as code:
        notes = code.notes + notes
        started = time.perf_counter()
        process = _recreate.start(experiment, trial, provenance, code, run_dir)
        exit_code = _wait(process, run_dir, console, f"rerunning {ref}")
        seconds = time.perf_counter() - started
    journal = JournalMetrics(run_dir / JOURNAL_NAME)
    journal.read()
    divergence = first_divergence(recorded, journal.metrics)
    if exit_code != 0:
        tail = stderr_tail(run_dir, lines=3)
        notes.append(f"the rerun exited with code {exit_code}" + (f": {tail}" if tail else ""))
    return RerunResult(
        trial=ref, identical=divergence is None and exit_code == 0, divergence=divergence,
        points=count_points(recorded),
        steps=len({s for values in recorded.values() for s in values}),
        exit_code=exit_code, seconds=seconds, run_dir=str(run_dir), notes=notes,
        changed=changes_since(provenance),
    )


def _wait(process: Any, run_dir: Path, console: Console, what: str) -> int:
    """Wait for the process, showing the step it reached; Ctrl-C stops it."""
    journal = JournalMetrics(run_dir / JOURNAL_NAME)
    try:
        with console.status(what) as status:
            while (code := process.poll()) is None:
                journal.read()
                status.update(f"{what}: step {journal.last_step or 0}")
                time.sleep(POLL_SECONDS)
            return code
    except KeyboardInterrupt:
        process.stop()
        raise Interrupted(f"stopped {what}; its partial output is in {run_dir}") from None


def changes_since(provenance: dict[str, Any]) -> list[str]:
    """What differs now from the recorded run: data files, packages, torch, Python."""
    changed = []
    for entry in provenance.get("data") or []:
        if entry.get("missing"):
            continue
        now = current_fingerprint(entry["path"])
        if now is None:
            changed.append(f"data file {entry['path']} is gone")
        elif now != entry["sha256"]:
            changed.append(f"data file {entry['path']} changed since the run (sha256 "
                           f"{entry['sha256'][:12]} then, {now[:12]} now)")
    then = provenance.get("environment") or {}
    now_env = environment_state()
    if then.get("python") and then["python"] != now_env["python"]:
        changed.append(f"Python {then['python']} then, {now_env['python']} now")
    if (then.get("torch") or {}) != (now_env.get("torch") or {}):
        changed.append(f"torch build {then.get('torch')} then, {now_env.get('torch')} now")
    old, new = then.get("packages") or {}, now_env["packages"]
    moved = [f"{name} {old.get(name, '-')} -> {new.get(name, '-')}"
             for name in sorted(set(old) | set(new), key=str.lower)
             if old.get(name) != new.get(name) and name.lower() != "torch"]
    if moved:
        shown = ", ".join(moved[:8]) + (f" and {len(moved) - 8} more" if len(moved) > 8 else "")
        changed.append(f"packages changed: {shown}")
    return changed
