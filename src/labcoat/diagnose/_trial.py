"""`diagnose_trial`: a stored trial's failed attempt, diagnosed against successful trials.

Reads through `labcoat.store` only: the attempt's captured lines (events of
kind "log"; the attempt's ``stdout.log``/``stderr.log`` files when none were
captured), its guard alerts, chaos events and metric points, and how it ended;
references are the last attempts of successful trials of the same experiment,
else of experiments with the same design, else of earlier experiments.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from labcoat.diagnose._diagnosis import Diagnosis, Reference, diagnose
from labcoat.diagnose._errors import DiagnoseError
from labcoat.diagnose._records import AttemptEnd, LogLine, MetricPoint, RunEvent
from labcoat.diagnose._steps import printed_steps
from labcoat.diagnose._templates import TemplateConfig
from labcoat.journal import Events

if TYPE_CHECKING:  # the store (SQLAlchemy) loads only when a stored trial is diagnosed
    from sqlalchemy.orm import Session

    from labcoat.store import Attempt, Trial

# The runner's names for an attempt's captured output (labcoat.runner._local).
OUTPUT_FILES = (("stdout", "stdout.log"), ("stderr", "stderr.log"))
MAX_FILE_BYTES = 8 << 20  # read at most the last 8 MiB of each output file
MAX_REFERENCE_LINES = 50_000  # per reference trial
CHAOS_KINDS = ("chaos.kill", "chaos.corrupt", "chaos.kill-in-save", "chaos.disk-full",
               "chaos.torn-journal")


def diagnose_trial(
    session: Session,
    trial: Trial,
    *,
    attempt: int | None = None,
    max_references: int = 3,
    config: TemplateConfig | None = None,
) -> Diagnosis:
    """Diagnose `trial`'s last failed attempt (or attempt number `attempt`).

    max_references: how many successful trials to compare with (0: none).
    """
    from labcoat import store

    if not isinstance(max_references, int) or max_references < 0:
        raise DiagnoseError(f"max_references={max_references!r} must be an integer >= 0")
    chosen = attempt_to_diagnose(trial, attempt)
    lines = _lines(store, session, trial, chosen)
    events = [RunEvent(kind=Events.GUARD_ALERT, message=a.message, step=a.step, time=a.time,
                       level=a.severity, data={"rule": a.rule})
              for a in store.alerts(session, [trial.id]) if a.attempt_id == chosen.id]
    for kind in CHAOS_KINDS:
        events += [RunEvent(kind=e.kind, message=e.message, step=e.step, rank=e.rank,
                            host=e.host, time=e.time, level=e.level, data=e.data)
                   for e in store.events(session, [trial.id], kind=kind)
                   if e.attempt_id == chosen.id]
    metrics = [MetricPoint(step=p.step, name=p.name, value=p.value, time=p.time)
               for p in store.metric_points(session, [trial.id]) if p.attempt_id == chosen.id]
    end = AttemptEnd(cause=chosen.cause, exit_code=chosen.exit_code,
                     last_step=chosen.last_step, last_time=chosen.last_record_time)
    reference = Reference(_reference_lines(store, session, trial, max_references),
                          config=config)
    return diagnose(lines, reference, end=end, metrics=metrics, events=events, config=config)


def attempt_to_diagnose(trial: Trial, number: int | None = None) -> Attempt:
    """Attempt `number`, or the last attempt that failed (else the last attempt): the one
    `diagnose_trial` reads."""
    attempts = list(trial.attempts)
    if not attempts:
        raise DiagnoseError(f"trial {trial.key!r} has no attempts yet: nothing to diagnose "
                            "(run it with `labcoat run`)")
    if number is not None:
        for attempt in attempts:
            if attempt.number == number:
                return attempt
        numbers = ", ".join(str(a.number) for a in attempts)
        raise DiagnoseError(f"trial {trial.key!r} has no attempt {number} "
                            f"(attempts: {numbers})")
    failed = [a for a in attempts if _failed(a.cause)]
    return failed[-1] if failed else attempts[-1]


def _failed(cause: str | None) -> bool:
    # As labcoat.runner._restart.is_failure (diagnose may not import the runner).
    clean = ("exit 0", "interrupted", "finished", "lost", "ad-hoc")
    return bool(cause) and not str(cause).startswith(clean)


def _lines(store, session: Session, trial: Trial, attempt: Attempt, *,
           label: str | None = None) -> list[LogLine]:
    """The attempt's captured lines; `label` names the trial in them (default its key)."""
    label = label or trial.key
    captured = [e for e in store.log_lines(session, [trial.id]) if e.attempt_id == attempt.id]
    if captured:
        return [LogLine(text=e.message, trial=label, attempt=attempt.number, rank=e.rank,
                        host=e.host, step=step, time=e.time,
                        stream=getattr(e, "stream", None) or (e.data or {}).get("stream")
                        or "stdout")
                for e, step in zip(captured, printed_steps(captured), strict=True)]
    return _file_lines(trial, attempt, label)


def _file_lines(trial: Trial, attempt: Attempt, label: str) -> list[LogLine]:
    """Fallback: the attempt's output files (no ranks, steps or times but the text's own)."""
    if not attempt.run_dir:
        return []
    out: list[LogLine] = []
    for stream, name in OUTPUT_FILES:
        path = Path(attempt.run_dir) / name
        try:
            with open(path, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - MAX_FILE_BYTES))
                data = f.read()
        except OSError:
            continue
        text = data.decode("utf-8", "replace")
        if size > MAX_FILE_BYTES:
            text = text.split("\n", 1)[-1]  # drop the partial first line
        out += [LogLine(text=line.rsplit("\r", 1)[-1], trial=label, attempt=attempt.number,
                        host=attempt.host, stream=stream)
                for line in text.splitlines()]
    return out


def _reference_lines(store, session: Session, trial: Trial, limit: int) -> list[LogLine]:
    if limit == 0:
        return []
    experiment = trial.experiment
    same = [t for t in experiment.trials if t.id != trial.id and t.status == "done"]
    same.sort(key=lambda t: (t.arm != trial.arm, -t.id))  # same arm first, newest first
    picked = same[:limit]
    if len(picked) < limit:
        others = [e for e in store.list_experiments(session) if e.id != experiment.id]
        others.sort(key=lambda e: (e.design_hash != experiment.design_hash,
                                   e.id > experiment.id, -e.id))
        for other in others:
            for candidate in sorted(other.trials, key=lambda t: -t.id):
                if candidate.status == "done" and len(picked) < limit:
                    picked.append(candidate)
    lines: list[LogLine] = []
    for reference in picked:
        attempt = reference.attempts[-1] if reference.attempts else None
        if attempt is None:
            continue
        # trials of other experiments are named "experiment/trial": keys repeat across them
        label = reference.key if reference.experiment_id == experiment.id else \
            f"{reference.experiment.name}/{reference.key}"
        found = _lines(store, session, reference, attempt, label=label)
        lines += found[:MAX_REFERENCE_LINES]
    return lines
