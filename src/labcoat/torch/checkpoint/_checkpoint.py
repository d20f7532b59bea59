"""`Checkpointer`: verified, asynchronous checkpoints of everything a run needs to continue exactly.

    from labcoat.torch import Checkpointer

    ckpt = Checkpointer(run=run)          # directory: $LABCOAT_CHECKPOINT_DIR, else ./checkpoints
    ckpt.track(model=model, optimizer=opt, scheduler=sched, data_rng=rng, state=progress)
    start = ckpt.restore()                # newest verified checkpoint's step, 0 if none
    for step in range(start + 1, steps + 1):
        ...                               # one training step
        if ckpt.should_save(step):
            ckpt.save(step)               # snapshot now, write in the background
    ckpt.close()                          # wait for the last write; raises if a save failed

What is saved: every tracked object (anything with ``state_dict`` /
``load_state_dict``, e.g. modules, optimizers, LR schedulers, grad scalers;
explicit generators: ``torch.Generator``, ``random.Random``, NumPy
``Generator`` / ``RandomState``; and dicts of plain user state, restored in
place), plus the global RNGs (Python ``random``, NumPy's global, torch CPU
and every CUDA device). The data position is whatever determines the next
batch: track the data RNG, the loader's ``state_dict``, or put an index in
the user state. One process writes a directory; the layout is in `_layout`.

Saving: ``save`` copies the state to CPU memory on the calling (training)
thread (helped by the idle writer thread; the copies are reused, see
`_snapshot`), then the writer thread serializes it, fsyncs, reads it back
from the device to check its SHA-256, and writes the manifest last. At most
one save is in flight: ``save`` first waits for the previous one, and that
wait counts as training stall (``stall_s``, the cost C of the interval
policy in `_interval`). ``asynchronous=False`` does it all in ``save``. A
failed save (e.g. ``OSError: No space left on device``) leaves no loadable
checkpoint, is logged as ``checkpoint.failed`` at once, and raises
`CheckpointError` from the next ``save`` or ``close``.

Journal events (through ``run.event`` when a run is given; else Python logging):
    checkpoint.saved     info     step, path, bytes, sha256, verified, stall_s, wait_s,
                                  write_s, asynchronous, policy (see `Policy`)
    checkpoint.restored  info     step, path, bytes, sha256, fallback_reason, skipped
    checkpoint.fresh_start info/warning  directory, skipped (nothing usable to restore)
    checkpoint.corrupt   warning  step, path, reason (skipped by restore)
    checkpoint.deleted   debug    step, path, reason (retention, corrupt, incomplete)
    checkpoint.failed    error    step, path, stage, error

Environment (set by the runner; see labcoat.environment):
    LABCOAT_CHECKPOINT_DIR    default checkpoint directory of the trial (shared by its attempts)
    LABCOAT_MTBF_SECONDS      mean time between failures for the interval policy (default 24 h)
    LABCOAT_CHECKPOINT_FAULT  fault injection for tests and chaos runs:
                              ``exit-mid-write@STEP`` (or ``@save=N``, the N-th save of the
                              process) ends the process (exit code 137, as SIGKILL) partway
                              through writing that checkpoint; ``disk-full@STEP`` (or
                              ``@save=N``) makes that write fail with ENOSPC
"""

from __future__ import annotations

import errno
import logging
import math
import numbers
import os
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcoat import environment as env
from labcoat.journal import Events
from labcoat.sdk import Run
from labcoat.torch.checkpoint import _layout, _rng
from labcoat.torch.checkpoint._errors import CheckpointError
from labcoat.torch.checkpoint._files import HashingWriter
from labcoat.torch.checkpoint._interval import (
    DEFAULT_MTBF_S,
    DEFAULT_OVERHEAD_BUDGET,
    IntervalPolicy,
    Policy,
)
from labcoat.torch.checkpoint._replay import Replay, ReplaySpec
from labcoat.torch.checkpoint._snapshot import Snapshotter, check_plain

CHECKPOINT_DIR_ENV = env.CHECKPOINT_DIR
MTBF_ENV = env.MTBF
FAULT_ENV = "LABCOAT_CHECKPOINT_FAULT"  # fault injection; see the module doc
FAULT_EXIT_CODE = 137  # what a shell reports for SIGKILL

ON_CORRUPT = ("raise", "start_over")  # restore(on_corrupt=...) when nothing verifies
STATE_DICT = "state_dict"  # kind of tracked objects with state_dict / load_state_dict
USER_DICT = "dict"  # kind of tracked plain-data dicts, restored in place

_log = logging.getLogger("labcoat.torch")
_LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
               "error": logging.ERROR}


@dataclass(kw_only=True, frozen=True)
class CheckpointConfig:
    """A Checkpointer's settings (``ckpt.config``), validated when built."""

    directory: Path  # where step-NNNNNNNN/ checkpoint directories go
    keep_last: int = 2  # keep the newest k verified checkpoints (>= 1; 2 leaves a fallback)
    keep_every: int | None = None  # also keep checkpoints at multiples of m steps, forever
    every: int | None = None  # save every N steps (at multiples of N); None: Young/Daly policy
    asynchronous: bool = True  # write in a background thread (False: save blocks until written)
    overhead_budget: float = DEFAULT_OVERHEAD_BUDGET  # max fraction of time spent stalled saving
    mtbf_s: float = DEFAULT_MTBF_S  # mean time between failures, seconds (policy input)
    # Record for replay (`labcoat replay`): keep every checkpoint, and save as often as this
    # fraction of training time allows (C / interval <= replay_budget), whatever the MTBF.
    replay_budget: float | None = None

    def __post_init__(self) -> None:
        problems = []
        if _bad_int(self.keep_last, minimum=1):
            problems.append(f"keep_last={self.keep_last!r} must be an integer >= 1")
        for name in ("keep_every", "every"):
            value = getattr(self, name)
            if value is not None and _bad_int(value, minimum=1):
                problems.append(f"{name}={value!r} must be None or an integer >= 1")
        if not 0 < self.overhead_budget <= 1:
            problems.append(f"overhead_budget={self.overhead_budget!r} must be in (0, 1]")
        if self.replay_budget is not None and not 0 < self.replay_budget <= 1:
            problems.append(f"replay_budget={self.replay_budget!r} must be None or in (0, 1]")
        if not (self.mtbf_s > 0 and math.isfinite(self.mtbf_s)):
            problems.append(f"mtbf_s={self.mtbf_s!r} must be a positive number of seconds")
        if problems:
            raise CheckpointError("invalid Checkpointer settings: " + "; ".join(problems))


@dataclass
class _Job:
    """One save: the snapshot to write and what the training thread measured."""

    step: int
    state: dict[str, Any] | None
    manifest: dict[str, Any]
    started: float  # perf_counter when save() was called
    number: int = 0  # 1 for this process's first save (fault injection counts saves)
    wait_s: float = 0.0
    stall_s: float = 0.0


class Checkpointer:
    """Saves and restores verified checkpoints of tracked training state; see the module doc.

    directory: default ``$LABCOAT_CHECKPOINT_DIR``, else ``./checkpoints``.
    run: the labcoat run to log events to (None: Python logging only).
    mtbf_s: default ``$LABCOAT_MTBF_SECONDS``, else 24 h. Other settings: see
    `CheckpointConfig`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        run: Run | None = None,
        keep_last: int = 2,
        keep_every: int | None = None,
        every: int | None = None,
        asynchronous: bool = True,
        overhead_budget: float = DEFAULT_OVERHEAD_BUDGET,
        mtbf_s: float | None = None,
        replay_budget: float | None = None,
    ) -> None:
        directory = directory or os.environ.get(CHECKPOINT_DIR_ENV) or "checkpoints"
        self.config = CheckpointConfig(
            directory=Path(directory).absolute(), keep_last=keep_last, keep_every=keep_every,
            every=every, asynchronous=asynchronous, overhead_budget=overhead_budget,
            mtbf_s=_mtbf_from_env() if mtbf_s is None else mtbf_s,
            replay_budget=_replay_budget_from_env() if replay_budget is None else replay_budget,
        )
        self.directory = self.config.directory
        self.run = run
        self.restored_step: int | None = None  # set by restore()
        self._tracked: dict[str, tuple[str, Any]] = {}
        self._policy = IntervalPolicy(every=every, mtbf_s=self.config.mtbf_s,
                                      overhead_budget=overhead_budget,
                                      replay_budget=self.config.replay_budget)
        # Replay mode (LABCOAT_REPLAY, set by `labcoat replay`): see `_replay`.
        spec = ReplaySpec.from_env()
        self._replay = Replay(spec, run) if spec is not None else None
        if self._replay is None:  # a replay only reads
            _check_writable(self.directory)
        # One writer thread, kept for the run: at most one save is in flight, and while
        # none is, the snapshot borrows the thread to copy in parallel.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="labcoat-checkpoint")
        self._snapshotter = Snapshotter(helper=self._writer)
        self._fault = _fault_from_env()
        self._saves = 0  # saves started by this process (fault injection counts them)
        self._event_lock = threading.Lock()
        self._inflight: Future[None] | None = None
        self._failure: tuple[int, Path, BaseException] | None = None
        self._foreign: set[Path] = set()  # skipped by restore and left in place: never deleted
        self._restore_called = False
        self._saved_any = False
        self._closed = False

    # --- public API ------------------------------------------------------------------------------

    def track(self, **objects: Any) -> None:
        """Register what to save under a name: ``ckpt.track(model=m, optimizer=opt, ...)``.

        Accepted: objects with ``state_dict``/``load_state_dict``; ``torch.Generator``,
        ``random.Random``, ``numpy.random.Generator``/``RandomState``; dicts of plain
        data (tensors, numbers, strings, None, lists/tuples/dicts of them), which
        restore updates in place. Names are identifiers and fixed for the run.
        """
        if self._restore_called or self._saved_any:
            raise CheckpointError("track() everything before restore() and the first save()")
        for name, obj in objects.items():
            if name in self._tracked:
                raise CheckpointError(f"{name!r} is already tracked; use one name per object")
            self._tracked[name] = (_kind(name, obj), obj)

    def restore(self, *, on_corrupt: str = "raise") -> int:
        """Load the newest verified checkpoint into the tracked objects and the global RNGs.

        Returns its step (0 if there is none: start from scratch). A checkpoint
        that fails verification (size or SHA-256 mismatch, a manifest that does
        not parse, not loadable with weights_only) is moved aside, never deleted,
        to ``<directory>/corrupt/step-NNNNNNNN``, with a warning line on stderr
        naming it and why, and the previous one is tried. One without a manifest
        (a write a crash cut short) is skipped and later cleaned up.

        on_corrupt: what to do when checkpoints exist (or were set aside as
        corrupt) but none verifies: ``"raise"`` (default) raises `CheckpointError`,
        since starting over would silently throw away the run's training (a
        runner's restarts fail the same way, until someone looks);
        ``"start_over"`` starts at step 0 with a warning, keeping the corrupt
        files. A verified checkpoint that does not fit the tracked objects raises
        `CheckpointError` (never a silent restart).
        """
        self._check_open("restore")
        if on_corrupt not in ON_CORRUPT:
            raise CheckpointError(f"restore(on_corrupt={on_corrupt!r}): choose "
                                  + " or ".join(repr(c) for c in ON_CORRUPT))
        if self._restore_called or self._saved_any:
            raise CheckpointError("restore() must be called once, before the first save()")
        if not self._tracked:
            raise CheckpointError("nothing to restore into: call ckpt.track(model=..., ...) first")
        self._restore_called = True
        if self._replay is not None:
            return self._restore_for_replay()
        skipped: list[dict[str, Any]] = []
        for step, path in reversed(_layout.list_steps(self.directory)):
            try:
                manifest, state = _layout.read_verified(path)
            except _layout.Corrupt as bad:
                skipped.append(self._skip(step, path, bad))
                continue
            self._apply(state, path)
            self._policy.last_saved = step
            self._policy.load_measurements(manifest.get("policy"))
            fallback = "; ".join(f"{s['path']}: {s['reason']}" for s in skipped) or None
            meta = manifest["files"][_layout.STATE]
            corrupt = sum(1 for s in skipped if s["kind"] != "incomplete")
            self._event(Events.CHECKPOINT_RESTORED, f"resuming from step {step} ({path})"
                        + (f" after skipping {len(skipped)} unusable checkpoint(s)"
                           if skipped else ""),
                        level="warning" if corrupt else "info", say=bool(corrupt),
                        step=step, path=str(path), bytes=meta["bytes"], sha256=meta["sha256"],
                        fallback_reason=fallback, skipped=skipped)
            self.restored_step = step
            return step
        return self._fresh_start(skipped, on_corrupt)

    def _skip(self, step: int, path: Path, bad: _layout.Corrupt) -> dict[str, Any]:
        """A checkpoint restore() cannot use: move a corrupt one aside (evidence), leave one of
        a newer format alone (a newer labcoat reads it), and say so."""
        kind = "incomplete" if bad.incomplete else "corrupt" if bad.deletable else "newer format"
        entry: dict[str, Any] = {"step": step, "path": str(path), "reason": bad.reason,
                                 "kind": kind, "moved_to": None}
        if kind == "incomplete":  # the residue of a crash mid-save: retention removes it
            self._event(Events.CHECKPOINT_CORRUPT, f"skipping checkpoint {path}: {bad.reason}",
                        level="info", step=step, **_without_step(entry))
            return entry
        note = ""
        if kind == "corrupt":
            try:
                entry["moved_to"] = str(_layout.set_aside(path))
                note = f"; moved to {entry['moved_to']}"
            except OSError as err:
                note = f"; could not move it aside ({err}), left in place"
        if entry["moved_to"] is None:
            self._foreign.add(path)  # never deleted: evidence, or a newer labcoat's
        self._event(Events.CHECKPOINT_CORRUPT,
                    f"checkpoint of step {step} in {self.directory} is unusable: {bad.reason}"
                    + note, level="warning", say=True, step=step, **_without_step(entry))
        return entry

    def _fresh_start(self, skipped: list[dict[str, Any]], on_corrupt: str) -> int:
        """No verified checkpoint: step 0, unless that would throw away a run's training."""
        aside = _layout.set_aside_dir(self.directory)
        moved = sorted(p.name for p in aside.iterdir()) if aside.is_dir() else []
        in_place = [s for s in skipped if s["kind"] != "incomplete" and not s["moved_to"]]
        found = ([f"{len(moved)} that failed verification, kept in {aside} "
                  f"({', '.join(moved)})"] if moved else []) + [
            f"step {s['step']} left in place ({s['reason']})" for s in in_place]
        lost = bool(found)
        if lost and on_corrupt == "raise":
            raise CheckpointError(
                f"no usable checkpoint in {self.directory}, but checkpoints were there: "
                f"{'; '.join(found)}. Starting over at step 0 would throw away this run's "
                "training: look at the files (a full or failing disk, a copy cut short), put a "
                "good checkpoint back, or call ckpt.restore(on_corrupt=\"start_over\") to train "
                "from step 0 anyway")
        self._event(Events.CHECKPOINT_FRESH_START,
                    f"no verified checkpoint in {self.directory}"
                    + (f" ({'; '.join(found)}): starting over at step 0 as asked "
                       "(on_corrupt='start_over')" if lost else "; starting at step 0"),
                    level="warning" if skipped or lost else "info", say=lost, step=0,
                    directory=str(self.directory), skipped=skipped,
                    unusable=len(moved) + len(in_place))
        self.restored_step = 0
        return 0

    def should_save(self, step: int) -> bool:
        """Whether to save at `step`; call it once per step (it also measures the step time).

        In replay mode it never saves: it records the probes of `step` and ends the
        process after the segment's last step (`ReplayFinished`)."""
        if self._replay is not None:
            self._replay.step_done(_check_step(step, "should_save"))
            return False
        self._policy.saw_step(_check_step(step, "should_save"))
        return self._policy.due(step)

    @property
    def policy(self) -> Policy:
        """The current interval and its reasoning (C, MTBF, step time, which bound applies)."""
        return self._policy.current()

    def save(self, step: int) -> None:
        """Checkpoint the tracked state as of `step`.

        Asynchronous (default): returns once the state is copied to CPU memory;
        modifying parameters afterwards does not affect what is written. Raises
        `CheckpointError` if the previous save failed, or if the state holds
        something that is not plain data (naming it).
        """
        started = time.perf_counter()
        self._check_open("save")
        step = _check_step(step, "save")
        if self._replay is not None:
            return  # a replay never writes: the trial's checkpoints stay as they were
        self._wait()
        self._raise_failure()
        waited = time.perf_counter() - started
        if not self._saved_any and not self._restore_called:
            self._refuse_existing()
        self._saved_any = True
        parts = {name: self._state_of(kind, obj) for name, (kind, obj) in self._tracked.items()}
        if self.config.asynchronous:
            parts = self._snapshotter.copy(parts)
        else:
            check_plain(parts)  # written before anything can change it: no copy needed
        state = {
            "format": _layout.FORMAT, "version": _layout.VERSION, "step": step,
            "tracked": {name: {"kind": self._tracked[name][0], "state": s}
                        for name, s in parts.items()},
            "rng": _rng.capture_global(),
        }
        manifest = {"tracked": {name: {"kind": kind, "type": _type_name(obj)}
                                for name, (kind, obj) in self._tracked.items()}}
        self._saves += 1
        job = _Job(step, state, manifest, started, number=self._saves, wait_s=waited)
        if not self.config.asynchronous:
            self._write(job)
            self._raise_failure()
            return
        job.stall_s = time.perf_counter() - started
        self._policy.saved(step, job.stall_s)
        self._inflight = self._writer.submit(self._write, job)

    def wait(self) -> None:
        """Block until the in-flight save is written; raise `CheckpointError` if it failed."""
        self._wait()
        self._raise_failure()

    def close(self) -> None:
        """Wait for the in-flight save; raise `CheckpointError` if any save failed."""
        if self._closed:
            return
        self._wait()
        self._writer.shutdown()
        self._closed = True
        self._raise_failure()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except CheckpointError as err:  # keep the original error; mention this one with it
            exc.add_note(f"also: {err}")

    # --- the background write ------------------------------------------------------------------

    def _write(self, job: _Job) -> None:
        """Write, verify, log and apply retention (runs on the writer thread when asynchronous)."""
        start = time.perf_counter()
        path = _layout.step_dir(self.directory, job.step)
        stage = "write"
        try:
            job.manifest["policy"] = self._policy.measurements()  # seeds a resumed run's policy
            written = _layout.write(self.directory, job.step, job.state, job.manifest,
                                    self._fault_writer(job.step, job.number))
            job.state = None  # release the snapshot
            self._foreign.discard(path)  # if it was one, it is ours now
            write_s = time.perf_counter() - start
            self._policy.wrote(write_s)
            if not self.config.asynchronous:
                job.stall_s = time.perf_counter() - job.started
                self._policy.saved(job.step, job.stall_s)
            stage = "log"
            self._event(
                Events.CHECKPOINT_SAVED, f"checkpoint of step {job.step} written and verified",
                step=job.step, path=str(path), bytes=written.digest.bytes,
                sha256=written.digest.sha256, verified=True, stall_s=job.stall_s,
                wait_s=job.wait_s, write_s=write_s, asynchronous=self.config.asynchronous,
                policy=self._policy.current().as_dict(),
            )
            stage = "retention"
            self._retain(job.step)
        except Exception as err:  # noqa: BLE001 - stored and raised by the next save()/close()
            job.state = None
            self._fail(job.step, path, stage, err)

    def _fail(self, step: int, path: Path, stage: str, err: Exception) -> None:
        if stage == "write":  # nothing partial may stay loadable (it would fail its hash anyway)
            try:
                if path.exists():
                    _layout.delete(path)
            except OSError as cleanup:
                err.add_note(f"removing the partial checkpoint {path} also failed: {cleanup}")
        self._failure = (step, path, err)
        try:
            self._event(Events.CHECKPOINT_FAILED, f"checkpoint of step {step} failed at {stage}: "
                        f"{type(err).__name__}: {err}", level="error", step=step,
                        path=str(path), stage=stage, error=f"{type(err).__name__}: {err}")
        except Exception as log_err:  # noqa: BLE001 - the failure itself is still raised later
            err.add_note(f"logging this failure also failed: {log_err}")

    def _fault_writer(self, step: int, number: int) -> Any:
        if self._fault is None or not self._fault.hits(step, number):
            return lambda w: w
        return _ExitMidWrite if self._fault.kind == "exit-mid-write" else _DiskFull

    def _retain(self, newest: int) -> None:
        """Keep the last `keep_last` and every `keep_every`-th verified checkpoint up to `newest`;
        delete older ones, and corrupt or incomplete leftovers, now that `newest` is verified."""
        entries = _layout.list_steps(self.directory)
        complete = [s for s, p in entries if s <= newest and _layout.has_manifest(p)
                    and p not in self._foreign]
        keep = {newest, *complete[-self.config.keep_last:]}
        if self.config.replay_budget is not None:
            keep.update(complete)  # recorded for replay: every checkpoint is a starting point
        if self.config.keep_every:
            keep.update(s for s in complete if s % self.config.keep_every == 0)
        for step, path in entries:
            if path in self._foreign:
                continue
            if not _layout.has_manifest(path):
                reason = "incomplete"
            elif step > newest or step in keep:
                continue  # a newer verified checkpoint is not ours to judge
            else:
                reason = "retention"
            _layout.delete(path)
            self._event(Events.CHECKPOINT_DELETED, f"deleted checkpoint {path} ({reason})",
                        level="debug", step=step, path=str(path), reason=reason)

    def _restore_for_replay(self) -> int:
        """Load the replay segment's checkpoint and attach its probes (see `_replay`)."""
        assert self._replay is not None
        loaded = self._replay.restore_state()
        step = 0
        if loaded is not None:
            state, path = loaded
            self._apply(state, path)
            step = state["step"]
        self._replay.attach({name: obj for name, (_, obj) in self._tracked.items()})
        self._event(Events.REPLAY_RESTORED, f"replaying from step {step} with probes "
                    f"{', '.join(self._replay.spec.probes)}", step=step,
                    start=self._replay.spec.start, end=self._replay.spec.end)
        self.restored_step = step
        return step

    # --- helpers ---------------------------------------------------------------------------------

    def _state_of(self, kind: str, obj: Any) -> Any:
        if kind == STATE_DICT:
            return obj.state_dict()
        if kind == USER_DICT:
            return obj
        return _rng.get_state(obj)

    def _apply(self, state: dict[str, Any], path: Path) -> None:
        saved = state["tracked"]
        if set(saved) != set(self._tracked):
            raise CheckpointError(
                f"checkpoint {path} holds {sorted(saved)} but this run tracks "
                f"{sorted(self._tracked)}; track the same names as the run that saved it "
                "(or start over in an empty checkpoint directory)")
        for name, (kind, obj) in self._tracked.items():
            entry = saved[name]
            if entry.get("kind") != kind:
                raise CheckpointError(f"checkpoint {path} saved {name!r} as {entry.get('kind')!r} "
                                      f"but it is tracked as {kind!r} now")
            try:
                if kind == STATE_DICT:
                    obj.load_state_dict(entry["state"])
                elif kind == USER_DICT:
                    obj.clear()
                    obj.update(entry["state"])
                else:
                    _rng.set_state(obj, entry["state"])
            except Exception as err:
                raise CheckpointError(
                    f"cannot restore {name!r} from checkpoint {path}: {type(err).__name__}: "
                    f"{err}; build it the same way as the run that saved it") from err
        _rng.restore_global(state["rng"])

    def _refuse_existing(self) -> None:
        existing = [s for s, p in _layout.list_steps(self.directory) if _layout.has_manifest(p)]
        if existing:
            raise CheckpointError(
                f"{self.directory} already holds checkpoints (newest: step {existing[-1]}); call "
                "ckpt.restore() before the first save() to resume from them, or use an empty "
                "directory to start over")

    def _wait(self) -> None:
        if self._inflight is not None:
            self._inflight.result()  # _write stores its errors; this returns once it is done
            self._inflight = None

    def _raise_failure(self) -> None:
        if self._failure is not None:
            step, path, err = self._failure
            self._failure = None
            raise CheckpointError(f"saving the checkpoint of step {step} to {path} failed: "
                                  f"{type(err).__name__}: {err}") from err

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise CheckpointError(f"{what}() after close(); create a new Checkpointer")

    def _event(self, event: str, message: str, *, level: str = "info", step: int | None = None,
               say: bool = False, **data: Any) -> None:
        """Journal an event (Python logging without a run); say=True also prints it on stderr
        (through logging) when there is a run: a problem the user must see where they look."""
        if self.run is None or say:
            _log.log(_LOG_LEVELS[level], "%s: %s", event, message)
        if self.run is None:
            return
        # Written from the writer thread too; the lock makes that safe even with a journal
        # writer that is not thread-safe itself.
        with self._event_lock:
            self.run.event(event, message, level=level, step=step, **data)


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The verified contents of a checkpoint, without tracked objects to load them into.

    path: one checkpoint (``.../step-00000040``) or a checkpoint directory (its
    newest checkpoint that verifies). Returns ``{"step", "path", "tracked":
    {name: state}, "rng": {...}}``, e.g. ``load_checkpoint(d)["tracked"]["model"]``
    is the model's state_dict. Raises `CheckpointError` with the reason if
    nothing verifies.
    """
    path = Path(path)
    candidates = ([(0, path)] if _layout.has_manifest(path) or path.name.startswith("step-")
                  else list(reversed(_layout.list_steps(path))))
    reasons = []
    for _, candidate in candidates:
        try:
            _, state = _layout.read_verified(candidate)
        except _layout.Corrupt as bad:
            reasons.append(f"{candidate}: {bad.reason}")
            continue
        return {"step": state["step"], "path": str(candidate), "rng": state["rng"],
                "tracked": {name: entry["state"] for name, entry in state["tracked"].items()}}
    raise CheckpointError(f"no verified checkpoint at {path}"
                          + (": " + "; ".join(reasons) if reasons else ""))


class _DiskFull:
    """Fault injection: the disk fills up partway through writing the state file."""

    def __init__(self, inner: HashingWriter) -> None:
        self.inner = inner

    def write(self, data: bytes) -> int:
        self.inner.write(data[: max(1, len(data) // 2)])
        raise OSError(errno.ENOSPC, "No space left on device (injected by labcoat chaos)")

    def flush(self) -> None:
        self.inner.flush()


class _ExitMidWrite:
    """Fault injection: end the process after the first bytes of the state file are on disk."""

    def __init__(self, inner: HashingWriter) -> None:
        self.inner = inner

    def write(self, data: bytes) -> int:
        self.inner.write(data[: max(1, len(data) // 2)])
        self.inner.flush()
        os.fsync(self.inner.file.fileno())
        os._exit(FAULT_EXIT_CODE)

    def flush(self) -> None:
        self.inner.flush()


def _kind(name: str, obj: Any) -> str:
    if not name.isidentifier():
        raise CheckpointError(f"track name {name!r} must be a Python identifier")
    kind = _rng.generator_kind(obj)
    if kind is not None:
        return kind
    if isinstance(obj, dict):
        return USER_DICT
    if callable(getattr(obj, "state_dict", None)) and callable(
            getattr(obj, "load_state_dict", None)):
        return STATE_DICT
    raise CheckpointError(
        f"cannot track {name}={type(obj).__name__}: pass an object with state_dict() and "
        "load_state_dict() (module, optimizer, scheduler...), a torch.Generator, random.Random, "
        "numpy Generator/RandomState, or a dict of plain state")


def _without_step(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "step"}


def _check_writable(directory: Path) -> None:
    """Fail now, not at the first save's close(): create the directory and a file in it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".labcoat-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise CheckpointError(
            f"cannot write checkpoints to {directory}: {reason}"
            + (f" ({err.filename})" if err.filename and str(err.filename) != str(directory)
               else "")
            + f"; give Checkpointer a writable directory (or set {CHECKPOINT_DIR_ENV})"
        ) from None


def _type_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _check_step(step: Any, where: str) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise CheckpointError(f"{where}(step): step must be a non-negative integer, got {step!r}")
    return int(step)


def _bad_int(value: Any, *, minimum: int) -> bool:
    return isinstance(value, bool) or not isinstance(value, int) or value < minimum


def _replay_budget_from_env() -> float | None:
    raw = os.environ.get(env.REPLAY_BUDGET)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise CheckpointError(f"{env.REPLAY_BUDGET}={raw!r} must be a fraction in (0, 1], "
                              "e.g. 0.07 for 7% of training time")
    return value


def _mtbf_from_env() -> float:
    raw = os.environ.get(MTBF_ENV)
    if not raw:
        return DEFAULT_MTBF_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise CheckpointError(f"{MTBF_ENV}={raw!r} must be a positive number of seconds")
    return value


@dataclass(frozen=True)
class _Fault:
    """An injected fault: `kind` at checkpoint step `step`, or at the `save`-th save."""

    kind: str  # "exit-mid-write" | "disk-full"
    step: int | None = None
    save: int | None = None

    def hits(self, step: int, number: int) -> bool:
        return step == self.step if self.step is not None else number == self.save


def _fault_from_env() -> _Fault | None:
    raw = os.environ.get(FAULT_ENV)
    if not raw:
        return None
    match = re.fullmatch(r"(exit-mid-write|disk-full)@(save=)?(\d+)", raw.strip())
    if match is None:
        raise CheckpointError(
            f"{FAULT_ENV}={raw!r} is not a known fault; use exit-mid-write@STEP, "
            "exit-mid-write@save=N, disk-full@STEP or disk-full@save=N"
        )
    kind, by_save, number = match.group(1), match.group(2), int(match.group(3))
    return _Fault(kind, save=number) if by_save else _Fault(kind, step=number)
