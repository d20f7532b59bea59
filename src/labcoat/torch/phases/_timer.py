"""Always-on phase timing: where each training step's time went, per rank, from hooks.

    timer = time_phases(model, optimizer, run=run)
    for inputs, labels in timer.loader(batches):   # or time_phases(..., loader=dataloader)
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step(); optimizer.zero_grad()
        with run.phase("eval"):                      # anything else, by name
            ...
    timer.close()

What each phase is, from the hooks the user does not write:
- data: inside the loader's ``__next__`` (the wrapped iterator, or a DataLoader's own);
- forward: the root module's forward pre-hook to its forward hook, training forwards only
  (``model.training`` and grad enabled; a forward inside a ``run.phase`` block is that
  phase's, so evaluation never counts as forward);
- backward: the gap the others leave between the end of the last forward and the
  optimizer's step pre-hook (``loss.backward()``, clipping, a gradient accumulation's
  next micro-batch's data aside), minus comm and ``run.phase`` blocks inside it. A gap,
  not autograd hooks: hooks on every parameter would cost a Python call each per step;
- optimizer: the optimizer's step pre-hook to its post-hook;
- comm: under DistributedDataParallel, the exposed wait of the gradient all-reduce, from
  the last bucket's launch (a DDP comm hook wrapping the default all-reduce) to the
  completion of the last one: time this rank waits for the slowest rank and the network.
  Wrap other collectives in ``run.phase("comm")``;
- eval, checkpoint and any other name: ``run.phase(name)`` blocks;
- other: the rest of the step's wall time (logging, the loop's own Python);
- total: the step's wall time, from one step's first data fetch (or training forward) to
  the next one's;
- cpu_wait (Linux): not a phase but the part of the step the training thread spent
  waiting for a CPU that other processes held (`_clocks.RunQueue`); the slow-step alarm
  reads it to tell a busy machine from a slower run.

A step ends when the optimizer's step has run and the next one begins. One ``phases``
journal record per step (`labcoat.journal`), written then. On CUDA, forward, backward and
optimizer are device times from event pairs resolved lazily (`_clocks`), data, comm and
named phases host times.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from labcoat.errors import LabcoatError
from labcoat.journal import CPU_WAIT
from labcoat.sdk import Run
from labcoat.torch.phases._clocks import DeviceClock, Mark, RunQueue, device_clock_for, host_ns
from labcoat.torch.phases._profile import PhaseMarks, ProfileOnSlow, SlowWatch, profile_setting

KEEP = 4096  # steps kept in memory (timer.records); the journal keeps them all


class PhaseError(LabcoatError):
    """time_phases() was given something it cannot time."""


class _Local:
    """Where ``timer.phase`` accumulates without a run (the same fields as a Run's)."""

    def __init__(self) -> None:
        self.phase_seconds: dict[str, float] = {}
        self.current_phase: str | None = None
        self.phase_timer: object | None = None

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        outer, self.current_phase = self.current_phase, name
        started = host_ns()
        try:
            yield
        finally:
            seconds = (host_ns() - started) * 1e-9
            self.phase_seconds[name] = self.phase_seconds.get(name, 0.0) + seconds
            self.current_phase = outer


class _Open:
    """The step being timed: host nanoseconds per phase, and device spans on CUDA."""

    __slots__ = ("start", "ns", "spans", "named", "waited")

    def __init__(self, start: int, named: float, waited: int | None) -> None:
        self.start = start
        self.waited = waited  # the thread's run-queue wait (ns) when the step began
        self.ns: dict[str, int] = {}
        self.spans: list[tuple[str, Mark, Mark, float]] = []  # (phase, start, end, minus s)
        self.named = named  # run.phase seconds pending when the step began


class PhaseTimer:
    """Hooks on one model, optimizer (and loader) that time each step by phase.

    records: the last `KEEP` steps as (step, {phase: seconds}), oldest first.
    profiles: trace files captured on a slowdown (`profile_on_slow`; at most one).
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                 run: Run | None = None, loader: Any = None, start_step: int = 0,
                 device: DeviceClock | None | bool = True,
                 profile_on_slow: int | ProfileOnSlow | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise PhaseError(f"time_phases() needs the nn.Module the loop calls, got "
                             f"{type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise PhaseError(f"time_phases() needs a torch.optim.Optimizer, got "
                             f"{type(optimizer).__name__}")
        if isinstance(start_step, bool) or not isinstance(start_step, int) or start_step < 0:
            raise PhaseError(f"time_phases(start_step={start_step!r}) must be the number of "
                             "optimizer steps already done (an int >= 0; a resumed run's step)")
        if loader is not None and not isinstance(loader, torch.utils.data.DataLoader):
            raise PhaseError(f"time_phases(loader=...) takes a torch DataLoader, got "
                             f"{type(loader).__name__}; wrap any other iterable with "
                             "timer.loader(iterable) instead")
        setting = profile_setting(profile_on_slow)  # checked before the run is claimed
        if setting is not None and setting.directory is None and run is None:
            raise PhaseError("profile_on_slow needs somewhere to write the trace: pass "
                             "run=... (the trace goes beside its journal) or "
                             "ProfileOnSlow(directory=...)")
        self.run = run
        self._phases: Any = run if run is not None else _Local()
        if getattr(self._phases, "phase_timer", None) is not None:
            raise PhaseError("this run already has a phase timer; close() it first (one "
                             "timer per training loop)")
        self._phases.phase_timer = self
        self.step = start_step  # optimizer steps done
        self.records: collections.deque[tuple[int, dict[str, float]]] = collections.deque(
            maxlen=KEEP)
        self._device = (device_clock_for(model) if device is True
                        else device if isinstance(device, DeviceClock) else None)
        self._open: _Open | None = None
        self._run_queue = RunQueue()
        self._ended = True  # the optimizer stepped: the next fetch or forward starts a step
        self._forward_at: int | Mark | None = None
        self._forward_end: int = 0  # host ns at the end of the last training forward
        self._forward_end_mark: Mark | None = None
        self._named_at_forward_end = 0.0
        self._optimizer_at: int | Mark | None = None
        self._optimizer_depth = 0  # optimizer.step() calls under way (nested: a subclass's)
        self._comm_launch = 0  # host ns: last bucket handed to the all-reduce this step
        self._comm_done = 0  # host ns: last all-reduce completed (set on gloo's thread)
        self._pending: collections.deque[tuple[int, dict[str, float], _Open]] = (
            collections.deque())
        self._lock = threading.Lock()
        self._closed = False
        self.comm_timed = False
        self._watch = (SlowWatch(setting, run, cuda=self._device is not None)
                       if setting is not None else None)
        self._marks: PhaseMarks | None = None  # open while a profile is captured
        self._handles = [
            model.register_forward_pre_hook(self._forward_pre),
            model.register_forward_hook(self._forward_post),
            optimizer.register_step_pre_hook(self._optimizer_pre),
            optimizer.register_step_post_hook(self._optimizer_post),
        ]
        self._comm(model)
        self._loader_class: tuple[Any, type] | None = None
        if loader is not None:
            self._hook_loader(loader)

    # --- public API ------------------------------------------------------------------------------

    def loader(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """`iterable`, with the time spent in each of its ``next()`` calls timed as data."""
        return _TimedIterator(iter(iterable), self)

    def phase(self, name: str) -> contextlib.AbstractContextManager[None]:
        """``run.phase(name)`` (or, without a run, the same timing kept by the timer)."""
        return self._phases.phase(name)

    @property
    def profiles(self) -> list[Path]:
        return list(self._watch.profiles) if self._watch is not None else []

    def close(self) -> None:
        """End the last step (journaled), wait once for pending device times, unhook."""
        if self._closed:
            return
        self._closed = True
        if self._watch is not None:
            self._watch.ending = True
        if self._open is not None and self._ended:
            self._end_step(host_ns(), self._run_queue.wait_ns())
        if self._device is not None and self._pending:
            self._device.wait([b for _, _, step in self._pending for _, _, b, _ in step.spans])
        self._drain(wait=True)
        if self._watch is not None:
            self._watch.close(self.step)
            self._marks = None
        self._run_queue.close()
        for handle in self._handles:
            handle.remove()
        if self._loader_class is not None:
            loader, cls = self._loader_class
            loader.__class__ = cls
        self._phases.phase_timer = None

    def __enter__(self) -> PhaseTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- hooks -----------------------------------------------------------------------------------

    def _data(self, started: int) -> None:
        elapsed = host_ns() - started  # the fetch alone (journaling the last step is other)
        self._optimizer_depth = 0  # no step() is under way (one that raised never ended)
        if self._ended:
            self._begin(started)
        if self._open is not None:
            ns = self._open.ns
            ns["data"] = ns.get("data", 0) + elapsed
            if self._forward_end:  # a micro-batch's fetch inside the backward gap
                self._forward_end += elapsed

    def _training(self, module: nn.Module) -> bool:
        return (module.training and torch.is_grad_enabled()
                and self._phases.current_phase is None)

    def _forward_pre(self, module: nn.Module, args: Any) -> None:
        if not self._training(module):
            self._forward_at = None
            return
        now = host_ns()
        if self._ended:
            self._begin(now)
        elif self._forward_end:  # a micro-batch's backward ended with this forward
            self._close_gap(now, self._device.mark() if self._device else None)
        if self._marks is not None:
            self._marks.begin("forward")
        self._forward_at = self._device.mark() if self._device else now

    def _forward_post(self, module: nn.Module, args: Any, output: Any) -> None:
        started, self._forward_at = self._forward_at, None
        if started is None or self._open is None:
            return
        now = host_ns()
        if self._device is not None:
            end = self._device.mark()
            self._open.spans.append(("forward", started, end, 0.0))  # type: ignore[arg-type]
            self._forward_end_mark = end
        else:
            ns = self._open.ns
            ns["forward"] = ns.get("forward", 0) + now - started  # type: ignore[operator]
        self._forward_end = now
        self._named_at_forward_end = self._named()
        if self._marks is not None:
            self._marks.end("forward")
            self._marks.begin("backward")

    def _optimizer_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        # A subclass whose step() calls super().step() runs the hooks twice once the parent
        # class's step is patched too (torch wraps each class's step when it is first
        # instantiated): only the outermost call is the step.
        self._optimizer_depth += 1
        if self._optimizer_depth > 1 or self._open is None:
            return
        now = host_ns()
        mark = self._device.mark() if self._device else None
        if self._forward_end:
            self._close_gap(now, mark)
        if self._marks is not None:
            self._marks.begin("optimizer")
        self._optimizer_at = mark if mark is not None else now

    def _optimizer_post(self, optimizer: torch.optim.Optimizer, args: Any,
                        kwargs: Any) -> None:
        self._optimizer_depth = max(0, self._optimizer_depth - 1)
        if self._optimizer_depth:
            return  # an inner step() (see _optimizer_pre)
        self.step += 1
        if self._marks is not None:
            self._marks.end("optimizer")
        started, self._optimizer_at = self._optimizer_at, None
        if self._open is None or started is None:
            return
        if self._device is not None:
            self._open.spans.append(("optimizer", started, self._device.mark(), 0.0))  # type: ignore[arg-type]
        else:
            ns = self._open.ns
            ns["optimizer"] = ns.get("optimizer", 0) + host_ns() - started  # type: ignore[operator]
        self._ended = True

    def _close_gap(self, now: int, mark: Mark | None) -> None:
        """Backward: from the last forward's end to `now`, less comm and named phases."""
        if self._marks is not None:
            self._marks.end("backward")
        ns = self._open.ns  # type: ignore[union-attr]
        comm = 0
        if self._comm_launch:  # the exposed all-reduce wait (DDP), from the comm hook
            comm = max(0, min(self._comm_done, now) - self._comm_launch)
            ns["comm"] = ns.get("comm", 0) + comm
            self._comm_launch = self._comm_done = 0
        named = int((self._named() - self._named_at_forward_end) * 1e9)
        if mark is not None and self._forward_end_mark is not None:
            self._open.spans.append(  # type: ignore[union-attr]
                ("backward", self._forward_end_mark, mark, (comm + named) * 1e-9))
        else:
            ns["backward"] = ns.get("backward", 0) + max(0, now - self._forward_end - comm
                                                         - named)
        self._forward_end = 0
        self._forward_end_mark = None

    # --- steps -----------------------------------------------------------------------------------

    def _named(self) -> float:
        return sum(self._phases.phase_seconds.values())

    def _begin(self, now: int) -> None:
        waited = self._run_queue.wait_ns()  # one read: one step's end, the next's start
        if self._open is not None:
            self._end_step(now, waited)
        self._open = _Open(now, self._named(), waited)
        self._ended = False
        self._forward_end = 0
        self._forward_end_mark = None

    def _end_step(self, now: int, waited: int | None) -> None:
        step, self._open = self._open, None
        assert step is not None
        seconds = {name: ns * 1e-9 for name, ns in step.ns.items()}
        seconds["total"] = (now - step.start) * 1e-9
        if waited is not None and step.waited is not None:
            seconds[CPU_WAIT] = (waited - step.waited) * 1e-9
        self._pending.append((self.step, seconds, step))
        self._drain(wait=False)

    def _drain(self, *, wait: bool) -> None:
        """Journal the finished steps whose device times have resolved, oldest first."""
        while self._pending:
            number, seconds, step = self._pending[0]
            if step.spans and not wait and not DeviceClock.ready(
                    *(m for _, a, b, _ in step.spans for m in (a, b))):
                return  # still running on the device: resolved at a later step
            self._pending.popleft()
            for name, start, end, minus in step.spans:
                value = DeviceClock.seconds(start, end) - minus
                seconds[name] = seconds.get(name, 0.0) + max(0.0, value)
            if step.spans:  # a mark may end one span and start the next: reuse it once
                self._device.recycle(  # type: ignore[union-attr]
                    [m for _, a, b, _ in step.spans for m in (a, b)])
            self._write(number, seconds)

    def _write(self, number: int, seconds: dict[str, float]) -> None:
        named = self._phases.phase_seconds
        total = seconds["total"]
        timed = (sum(v for k, v in seconds.items() if k not in ("total", CPU_WAIT))
                 + sum(named.values()))
        seconds["other"] = max(0.0, total - timed)
        for name, value in named.items():
            seconds[name] = seconds.get(name, 0.0) + value
        named.clear()
        if self.run is not None and not self.run.finished:
            self.run.log_phases(number, seconds)
        self.records.append((number, seconds))
        if self._watch is not None:
            self._marks = self._watch.after_step(self.records)

    # --- data and collectives --------------------------------------------------------------------

    def _hook_loader(self, loader: Any) -> None:
        """Time a DataLoader's own iteration: its class becomes a subclass whose iterator is
        timed (restored by close()), so the loop keeps ``for batch in loader``."""
        cls = type(loader)
        timer = weakref.ref(self)

        def __iter__(self_: Any) -> Iterator[Any]:  # noqa: N807
            it = cls.__iter__(self_)
            alive = timer()
            return _TimedIterator(it, alive) if alive is not None and not alive._closed else it

        loader.__class__ = type(f"Timed{cls.__name__}", (cls,), {"__iter__": __iter__})
        self._loader_class = (loader, cls)

    def _comm(self, model: nn.Module) -> None:
        """Under DDP, a comm hook around the default all-reduce that notes when each bucket
        is launched and done (the wait it exposes is this rank's comm)."""
        if not isinstance(model, nn.parallel.DistributedDataParallel):
            return
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        timer = weakref.ref(self)

        def done(fut: torch.futures.Future[torch.Tensor]) -> torch.Tensor:
            alive = timer()
            if alive is not None:
                alive._comm_done = max(alive._comm_done, host_ns())
            return fut.value()

        # unannotated: DDP compares annotations with its types (strings here, under
        # `from __future__ import annotations`)
        def timed_allreduce(state, bucket):  # type: ignore[no-untyped-def]
            alive = timer()
            if alive is not None:
                alive._comm_launch = host_ns()
            return allreduce_hook(state, bucket).then(done)

        try:
            model.register_comm_hook(None, timed_allreduce)
        except RuntimeError:  # the user registered a comm hook already: theirs stays
            return
        self.comm_timed = True


class _TimedIterator:
    """An iterator whose ``next()`` calls are timed as the data phase."""

    __slots__ = ("_it", "_timer")

    def __init__(self, it: Iterator[Any], timer: PhaseTimer) -> None:
        self._it = it
        self._timer = timer

    def __iter__(self) -> _TimedIterator:
        return self

    def __next__(self) -> Any:
        timer = self._timer
        marks = timer._marks
        if marks is not None:
            marks.begin("data")
        started = host_ns()
        try:
            return next(self._it)
        finally:
            if marks is not None:
                marks.end("data")
            if not timer._closed:
                timer._data(started)


def time_phases(model: nn.Module, optimizer: torch.optim.Optimizer, *, run: Run | None = None,
                loader: Any = None, start_step: int = 0,
                profile_on_slow: int | ProfileOnSlow | None = None) -> PhaseTimer:
    """Time every training step by phase (see the module doc); returns the `PhaseTimer`.

    model: the module the loop calls (DDP's wrapper under DDP: comm is timed then).
    optimizer: the optimizer whose ``step()`` ends a training step.
    run: where each step's ``phases`` record goes (None: ``timer.records`` only).
    loader: a DataLoader whose iteration is timed as data (else wrap any iterable with
        ``timer.loader(...)``; without either, data time falls in ``other``).
    start_step: optimizer steps already done (a resumed run's restored step).
    profile_on_slow: on a slowdown of one of this rank's phases, capture this many steps
        with torch.profiler, beside the run's journal (`_profile`; a `ProfileOnSlow` for
        more settings). None: ``$LABCOAT_PROFILE_ON_SLOW`` (unset: off); 0: off.
    """
    return PhaseTimer(model, optimizer, run=run, loader=loader, start_step=start_step,
                      profile_on_slow=profile_on_slow)
