"""What the Trainer and Lightning callbacks share: the run, the guard, sealed checkpoints.

Both libraries write their own checkpoints; labcoat seals each one after it is
written (`labcoat.torch.seal_directory`: fsync, SHA-256 of every file, the
manifest last) and resumes only from one that still verifies, newest first.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcoat import environment as env
from labcoat.errors import LabcoatError
from labcoat.journal import Events
from labcoat.sdk import Run, init
from labcoat.torch import (
    Alert,
    Guard,
    GuardError,
    file_manifest,
    seal_directory,
    verify_directory,
    watch,
)

# Events only the integrations write (data: see where each is written).
SEED_FOLLOWED = "integration.seed"  # the library's seed was set to the trial's seed
OUTPUT_REDIRECTED = "integration.output_dir"  # checkpoints go to the trial's checkpoint dir
SEVERITIES = ("warning", "error", "critical")


def trial_run(run: Run | None, *, seed: int | None, params: Mapping[str, Any]) -> Run:
    """`run`, else ``labcoat.init()``: the runner's identity in a trial, else an ad-hoc run
    with `seed` and `params` (the library's own settings)."""
    if run is not None:
        return run
    if os.environ.get(env.JOURNAL):  # under `labcoat run` the design names the trial (and
        return init()               # the library follows its seed): nothing to override
    return init(seed=seed, params=dict(params))


def runner_checkpoint_dir() -> Path | None:
    """The trial's checkpoint directory (shared by its attempts) under `labcoat run`."""
    value = os.environ.get(env.CHECKPOINT_DIR) if os.environ.get(env.JOURNAL) else None
    return Path(value) if value else None


def check_stop_on(stop_on: str | None) -> str | None:
    if stop_on is not None and stop_on not in SEVERITIES:
        raise LabcoatError(f"LabcoatCallback(stop_on={stop_on!r}): choose between None, "
                           + ", ".join(repr(s) for s in SEVERITIES))
    return stop_on


def guard_options(guard: bool | Mapping[str, Any]) -> dict[str, Any] | None:
    """None (guard off) or the options for ``labcoat.torch.watch``."""
    if guard is True:
        return {}
    if guard is False or guard is None:
        return None
    if not isinstance(guard, Mapping):
        raise LabcoatError(f"LabcoatCallback(guard={guard!r}): pass True, False or a dict of "
                           "labcoat.torch.watch options, e.g. guard={'check_every': 21}")
    if "stop_on" in guard:
        raise LabcoatError("LabcoatCallback(guard={'stop_on': ...}): give stop_on= to the "
                           "callback itself; it ends training through the library's own stop")
    return dict(guard)


def start_guard(model: Any, optimizer: Any, run: Run, options: dict[str, Any],
                start_step: int) -> tuple[Guard, list[Any]]:
    """`watch` the model and optimizer (the callback, not the guard, acts on stop_on); returns
    the guard and the hook handles to remove with it."""
    options = {"start_step": start_step, **options}
    try:
        guard = watch(model, optimizer, run=run, **options)
    except GuardError as err:
        raise LabcoatError(f"LabcoatCallback(guard=...): {err}") from None
    return guard, []  # no hooks of its own (the guard handles fused optimizers itself)


@dataclass
class StopWatch:
    """The first alert at or above `stop_on`, journaled once as ``guard.stopped``."""

    stop_on: str | None
    alert: Alert | None = None

    def check(self, guard: Guard, run: Run) -> Alert | None:
        """The alert to stop on, the first time one is seen (then None)."""
        if self.stop_on is None or self.alert is not None:
            return None
        floor = SEVERITIES.index(self.stop_on)
        for alert in guard.alerts:
            if SEVERITIES.index(alert.severity) >= floor:
                self.alert = alert
                run.event(Events.GUARD_STOPPED, f"stopping: {alert.rule} at step {alert.step}",
                          level="critical", step=alert.step, rule=alert.rule,
                          alert_step=alert.step)
                return alert
        return None


# --- sealed checkpoints ------------------------------------------------------------------------

def seal(run: Run, path: Path, step: int, source: str) -> None:
    """Seal the checkpoint the library just wrote at `path` and journal it."""
    if not path.is_dir():
        raise LabcoatError(f"{source} reported a checkpoint at {path}, but there is no such "
                           "directory; was output_dir changed after the trainer was built?")
    manifest = seal_directory(path, step=step, extra={"source": source})
    size = sum(f["bytes"] for f in manifest["files"].values())
    run.event(Events.CHECKPOINT_SAVED, f"{source} checkpoint of step {step} sealed and verified",
              step=step, path=str(path), bytes=size, files=len(manifest["files"]),
              verified=True, source=source)


@dataclass(frozen=True)
class Resume:
    """Where to resume: the newest verified checkpoint (None: start fresh), what was skipped."""

    path: Path | None
    step: int
    skipped: list[dict[str, Any]]


def find_resume(directory: Path, pattern: re.Pattern[str]) -> Resume:
    """The newest checkpoint in `directory` (names matching `pattern`, group 1 the step) that
    verifies; unverified ones newer than it are listed in `skipped`."""
    found = []
    if directory.is_dir():
        for entry in directory.iterdir():
            match = pattern.fullmatch(entry.name)
            if match and entry.is_dir():
                found.append((int(match.group(1)), entry))
    skipped: list[dict[str, Any]] = []
    for step, path in sorted(found, reverse=True):
        reason = verify_directory(path)
        if reason is None:
            return Resume(path, step, skipped)
        skipped.append({"step": step, "path": str(path), "reason": reason})
    return Resume(None, 0, skipped)


def journal_resume(run: Run, resume: Resume, directory: Path, source: str) -> None:
    """Journal the choice; remove the skipped checkpoints (a crash cut them short or they were
    changed since), which the resumed run would write again under the same names."""
    for bad in resume.skipped:
        run.event(Events.CHECKPOINT_CORRUPT, f"skipping {source} checkpoint {bad['path']}: "
                  f"{bad['reason']}", level="warning", **bad)
        _remove(Path(bad["path"]))
        run.event(Events.CHECKPOINT_DELETED, f"deleted checkpoint {bad['path']} (unverified)",
                  level="debug", step=bad["step"], path=bad["path"], reason="unverified")
    if resume.path is None:
        if resume.skipped:
            run.event(Events.CHECKPOINT_FRESH_START, f"no verified {source} checkpoint in "
                      f"{directory} ({len(resume.skipped)} skipped); starting at step 0",
                      level="warning", step=0, directory=str(directory), skipped=resume.skipped)
        return
    fallback = "; ".join(f"{s['path']}: {s['reason']}" for s in resume.skipped) or None
    run.event(Events.CHECKPOINT_RESTORED, f"resuming from {source} checkpoint of step "
              f"{resume.step} ({resume.path})", step=resume.step, path=str(resume.path),
              fallback_reason=fallback, skipped=resume.skipped, source=source)


def _remove(path: Path) -> None:
    """Remove an unverified checkpoint: a directory, or a file and its seal."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
        file_manifest(path).unlink(missing_ok=True)


# --- per-item eval results ---------------------------------------------------------------------

def log_items(run: Run, step: int, results: Any, where: str) -> None:
    """Journal what a user's eval_items function returned: (task, item_ids, scores) or a list
    of such triples."""
    if isinstance(results, tuple) and len(results) == 3 and isinstance(results[0], str):
        results = [results]
    if not isinstance(results, Iterable) or isinstance(results, str | bytes | Mapping):
        raise LabcoatError(f"{where} returned {type(results).__name__}; return (task, item_ids, "
                           "scores) or a list of such triples")
    for triple in results:
        if not (isinstance(triple, tuple | list) and len(triple) == 3):
            raise LabcoatError(f"{where} returned {triple!r} in its list; each entry must be "
                               "(task, item_ids, scores)")
        task, ids, scores = triple
        try:
            run.log_items(step, task, ids, scores)
        except ValueError as err:
            raise LabcoatError(f"{where}: {err}") from None


class MetricLog:
    """Journals a library's logged values: its numeric entries, each (name, step, value) once.

    Libraries repeat some values in several logs of one step (Trainer's ``epoch`` in the
    training and the evaluation log); the same value again is the same point, so it is not
    journaled twice. A different value at the same step is journaled (the later one counts).
    """

    def __init__(self) -> None:
        self._last: dict[str, tuple[int, float]] = {}

    def log(self, run: Run, step: int, values: Mapping[str, Any]) -> None:
        out = {}
        for name, value in values.items():
            if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
                value = value.item()
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue  # strings and other values are not metrics
            if self._last.get(name) == (step, value):
                continue
            self._last[name] = (step, value)
            out[name] = value
        if out:
            run.log(step, **out)
