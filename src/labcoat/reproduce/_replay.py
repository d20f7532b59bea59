"""`labcoat replay EXP/TRIAL --from A --to B --probe P`: hindsight logging (FLOR, Garcia 2020).

The quantity you need to debug a run is the one you did not log. A replay
restores the trial's newest kept checkpoint before step A, re-executes the
recorded code (temporary git worktree, recorded diff) with the recorded
command, params and thread counts, and attaches probes for steps A..B (see
`labcoat.torch.checkpoint._probes`). The training script cooperates through its
Checkpointer (`labcoat.torch.checkpoint._replay`): nothing else changes.

Before a probe value is trusted, the replayed `verify` metric (the loss) must
equal the recorded one bit for bit at every re-executed step, from the
checkpoint to B; the first mismatch stops every segment with a message naming
the step. ``segments=K`` splits A..B into K disjoint ranges, each replayed by
its own process from its own checkpoint, `parallel` at a time.

Output: ``$LABCOAT_HOME/runs/EXP/TRIAL/replays/<time>/probes.jsonl`` (one line per
step and probe: ``{"step", "probe", "values": {name: number}}``), each segment's
journal and output beside it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from labcoat import environment as env
from labcoat import store
from labcoat.errors import Interrupted, LabcoatError
from labcoat.journal import Events
from labcoat.reproduce import _recreate
from labcoat.reproduce._compare import JournalMetrics, same_bits
from labcoat.reproduce._trial_ref import find_trial, recorded_metrics, trial_provenance
from labcoat.reproduce._worktree import recorded_code
from labcoat.runner import LocalProcess, stderr_tail
from labcoat.sdk import JOURNAL_NAME

BUILTIN_PROBES = ("activations", "grad_norms", "attention_entropy", "update_ratios")
POLL_SECONDS = 0.2


class ReplayMismatch(LabcoatError):
    """The replay did not reproduce the recorded run: its probes cannot be trusted."""


@dataclass
class Segment:
    index: int
    start: int  # first step probed
    end: int  # last step probed
    restore_step: int  # checkpoint restored (0: none, from the beginning)
    checkpoint: str | None
    run_dir: Path | None = None
    process: LocalProcess | None = None
    journal: JournalMetrics | None = None
    seconds: float = 0.0
    started: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "restore_step": self.restore_step,
                "checkpoint": self.checkpoint, "seconds": round(self.seconds, 3),
                "run_dir": str(self.run_dir)}


@dataclass
class ReplayResult:
    trial: str
    start: int
    end: int
    verify: str
    verified_steps: int  # re-executed steps whose `verify` metric matched bit for bit
    segments: list[Segment]
    output: str
    records: list[dict[str, Any]]
    seconds: float
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"trial": self.trial, "from": self.start, "to": self.end, "verify": self.verify,
                "verified_steps": self.verified_steps, "output": self.output,
                "seconds": round(self.seconds, 3), "notes": self.notes,
                "segments": [s.as_dict() for s in self.segments], "records": self.records}


def replay_trial(ref: str, *, start: int, end: int, probes: list[str] | None = None,
                 segments: int = 1, parallel: int | None = None, verify: str = "loss",
                 console: Console | None = None) -> ReplayResult:
    """Replay steps `start`..`end` of trial `ref` (``EXP/TRIAL``) with `probes`; see the doc."""
    console = console or Console(stderr=True)
    probes = check_probes(probes or list(BUILTIN_PROBES))
    began = time.perf_counter()
    db = store.open_store()
    try:  # read everything, then let go of the store while the replay runs
        with db.session() as session:
            experiment, trial = find_trial(session, ref, "replay")
            provenance, notes = trial_provenance(session, trial, ref)
            metrics = recorded_metrics(session, trial)
            kept = [(c.step, c.path) for c in store.verified_checkpoints(session, trial)
                    if (Path(c.path) / "manifest.json").is_file()]
            checkpointed = _used_checkpointer(session, trial)
    finally:
        db.close()
    recorded = metrics.get(verify)
    if not recorded:
        names = ", ".join(sorted(metrics)) or "none"
        raise LabcoatError(f"trial {ref} has no recorded {verify!r} to verify a replay "
                           f"against; choose --verify METRIC (recorded: {names})")
    check_range(start, end, max(recorded), ref)
    if not checkpointed:
        raise LabcoatError(
            f"trial {ref} has no checkpoints to replay from: it never used a labcoat "
            "Checkpointer, which a replay needs to restore a step and attach probes. Make "
            "the training loop call ckpt.restore() once and ckpt.should_save(step) / "
            "ckpt.save(step) every step (labcoat.torch.Checkpointer, docs/checkpoints.md) "
            f"and run it again; to re-execute this trial whole and compare its metrics, use "
            f"`labcoat rerun {ref}`")
    plan = plan_segments(start, end, segments, kept)
    out_dir = _recreate.scratch_dir("runs", experiment.name, trial.key, "replays")
    with recorded_code(provenance.get("code") or {}, out_dir) as code:
        notes = code.notes + notes
        notes += [f"segment {s.start}-{s.end}: no kept checkpoint before step {s.start}; "
                  "replaying from step 1 (record with --replay-budget to keep them)"
                  for s in plan if s.restore_step == 0 and s.start > 1]
        workers = max(1, min(parallel or os.cpu_count() or 1, len(plan)))
        _run_segments(plan, workers, experiment, trial, provenance, code, out_dir,
                      probes, recorded, verify, console, ref)
    records = _merge(plan, out_dir / "probes.jsonl")
    verified = sum(s.end - s.restore_step for s in plan)
    return ReplayResult(trial=ref, start=start, end=end, verify=verify, verified_steps=verified,
                        segments=plan, output=str(out_dir / "probes.jsonl"), records=records,
                        seconds=time.perf_counter() - began, notes=notes)


def _used_checkpointer(session: Any, trial: Any) -> bool:
    """Whether the trial ran with a Checkpointer: it recorded a checkpoint, or its
    restore() said where it started (every restore journals one of these)."""
    if store.checkpoints(session, [trial.id]):
        return True
    kinds = (Events.CHECKPOINT_SAVED, Events.CHECKPOINT_RESTORED,
             Events.CHECKPOINT_FRESH_START)
    return any(store.events(session, [trial.id], kind=kind) for kind in kinds)


def check_probes(probes: list[str]) -> list[str]:
    for probe in probes:
        if probe not in BUILTIN_PROBES and (":" not in probe or probe.startswith(":")
                                            or probe.endswith(":")):
            raise LabcoatError(f"--probe {probe!r} is neither a built-in probe "
                               f"({', '.join(BUILTIN_PROBES)}) nor MODULE:FUNCTION")
    return list(dict.fromkeys(probes))


def check_range(start: int, end: int, last: int, ref: str) -> None:
    if start < 1:
        raise LabcoatError(f"--from {start}: steps start at 1")
    if end < start:
        raise LabcoatError(f"--to {end} is before --from {start}")
    if end > last:
        raise LabcoatError(f"--to {end} is past the last recorded step of {ref} ({last})")


def plan_segments(start: int, end: int, count: int, kept: list[tuple[int, str]]
                  ) -> list[Segment]:
    """Split start..end into `count` contiguous ranges (as equal as possible), each starting
    from the newest kept checkpoint before its first step."""
    if count < 1:
        raise LabcoatError(f"--segments {count}: must be at least 1")
    count = min(count, end - start + 1)
    size, extra = divmod(end - start + 1, count)
    plan, first = [], start
    for index in range(count):
        last = first + size - 1 + (1 if index < extra else 0)
        before = [(step, path) for step, path in kept if step <= first - 1]
        step, path = before[-1] if before else (0, None)
        plan.append(Segment(index, first, last, step, path))
        first = last + 1
    return plan


def _run_segments(plan: list[Segment], workers: int, experiment: Any, trial: Any,
                  provenance: dict[str, Any], code: Any, out_dir: Path, probes: list[str],
                  recorded: dict[int, float], verify: str, console: Console, ref: str) -> None:
    waiting, running = list(plan), []
    try:
        with console.status(f"replaying {ref}") as status:
            while waiting or running:
                while waiting and len(running) < workers:
                    segment = waiting.pop(0)
                    _start(segment, experiment, trial, provenance, code, out_dir, probes)
                    running.append(segment)
                for segment in list(running):
                    code_now = segment.process.poll()
                    _verify(segment, recorded, verify, ref)
                    if code_now is None:
                        continue
                    segment.seconds = time.perf_counter() - segment.started
                    running.remove(segment)
                    _finished(segment, code_now, recorded, verify, ref)
                status.update(f"replaying {ref}: " + ", ".join(
                    f"{s.start}-{s.end} at step {s.journal.last_step or s.restore_step}"
                    for s in running))
                time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        raise Interrupted(f"stopped replaying {ref}; partial output in {out_dir}") from None
    finally:
        for segment in running:
            segment.process.stop(grace=2.0)


def _start(segment: Segment, experiment: Any, trial: Any, provenance: dict[str, Any],
           code: Any, out_dir: Path, probes: list[str]) -> None:
    segment.run_dir = out_dir / f"segment-{segment.index + 1}"
    segment.run_dir.mkdir(parents=True)
    description = {"version": 1, "checkpoint": segment.checkpoint,
                   "restore_step": segment.restore_step, "start": segment.start,
                   "end": segment.end, "probes": probes,
                   "output": str(segment.run_dir / "probes.jsonl")}
    spec_file = segment.run_dir / "replay.json"
    spec_file.write_text(json.dumps(description, indent=2), encoding="utf-8")
    segment.journal = JournalMetrics(segment.run_dir / JOURNAL_NAME)
    segment.started = time.perf_counter()
    # Probes are written after the run, so they are not in the recorded code: MODULE is
    # imported from where `labcoat replay` runs (after the recorded code and PYTHONPATH).
    segment.process = _recreate.start(experiment, trial, provenance, code, segment.run_dir,
                                      extra_env={env.REPLAY: str(spec_file)},
                                      extra_path=os.getcwd())


def _verify(segment: Segment, recorded: dict[int, float], verify: str, ref: str) -> None:
    """Every replayed `verify` value so far must equal the recorded one, bit for bit."""
    segment.journal.read()
    replayed = segment.journal.metrics.get(verify, {})
    for step in sorted(replayed):
        if step <= segment.restore_step or step > segment.end:
            continue
        value = replayed[step]
        if step not in recorded or not same_bits(recorded[step], value):
            raise ReplayMismatch(
                f"replay of {ref} diverged at step {step}: {verify} replayed {value!r}, "
                f"recorded {recorded.get(step)!r}; its probe values are not trusted and were "
                "discarded. Usual causes: code or data that changed since the run (`labcoat "
                f"rerun {ref}` lists them), nondeterministic kernels, or a probe that draws "
                f"random numbers (output in {segment.run_dir})")


def _finished(segment: Segment, exit_code: int, recorded: dict[int, float], verify: str,
              ref: str) -> None:
    _verify(segment, recorded, verify, ref)
    done = any(e.get("event") == Events.REPLAY_DONE for e in segment.journal.events)
    if exit_code != 0 or not done:
        tail = stderr_tail(segment.run_dir, lines=3)
        restored = any(e.get("event") == Events.REPLAY_RESTORED
                       for e in segment.journal.events)
        why = f"exited with code {exit_code}" if exit_code != 0 else \
            "never called ckpt.restore() on a labcoat Checkpointer, so there was no " \
            "checkpoint to replay from and no probe was attached (`labcoat rerun " \
            f"{ref}` re-executes it whole)" if not restored else \
            "ended without reaching the segment's end (does the training loop call " \
            "ckpt.should_save(step) every step?)"
        raise LabcoatError(f"replay of {ref}, steps {segment.start}-{segment.end}: the trial "
                           f"{why}" + (f": {tail}" if tail else "")
                           + f" (output in {segment.run_dir})")
    replayed = segment.journal.metrics.get(verify, {})
    missing = [s for s in range(segment.restore_step + 1, segment.end + 1)
               if s in recorded and s not in replayed]
    if missing:
        raise ReplayMismatch(f"replay of {ref} never logged {verify} at step {missing[0]} "
                             "(recorded there); the replay is not the recorded run")


def _merge(plan: list[Segment], output: Path) -> list[dict[str, Any]]:
    records = []
    for segment in plan:
        path = segment.run_dir / "probes.jsonl"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                if segment.start <= record["step"] <= segment.end:
                    records.append(record)
    records.sort(key=lambda r: (r["step"], r["probe"]))
    output.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return records
