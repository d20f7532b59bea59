"""The two clocks a phase timer reads: the host's and, on CUDA, the device's.

Host: ``time.perf_counter_ns`` (monotonic, about 50 ns a read). Device: pairs of CUDA
events recorded on the current stream (MegaScale's timers): recording one costs the host
a few microseconds and never waits; a pair's elapsed time is read only once the later
event has completed (``Event.query()``), so resolving never adds a synchronisation. A
step whose device phases are still running stays pending and is journaled a few steps
later; ``close()`` waits once, at the end.

And the time the training thread waited for a CPU (`RunQueue`, Linux): not a clock of the
step's phases but of the machine's share in them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Protocol

import torch


class Mark(Protocol):
    """A point on the device's timeline (``torch.cuda.Event(enable_timing=True)``)."""

    def record(self) -> None: ...
    def query(self) -> bool: ...
    def elapsed_time(self, end: Any) -> float: ...  # milliseconds
    def synchronize(self) -> None: ...


class DeviceClock:
    """CUDA event pairs, resolved lazily.

    event: makes one unrecorded event (default ``torch.cuda.Event(enable_timing=True)``;
    tests give a stand-in where no GPU is present).
    """

    def __init__(self, event: Callable[[], Mark] | None = None) -> None:
        self._event = event or (lambda: torch.cuda.Event(enable_timing=True))
        self._spare: list[Mark] = []

    def mark(self) -> Mark:
        event = self._spare.pop() if self._spare else self._event()
        event.record()
        return event

    @staticmethod
    def ready(*marks: Mark) -> bool:
        return all(m.query() for m in marks)

    @staticmethod
    def wait(marks: list[Mark]) -> None:
        """Wait for the last of `marks` (the run's end: the one synchronisation)."""
        if marks:
            marks[-1].synchronize()

    @staticmethod
    def seconds(start: Mark, end: Mark) -> float:
        """Elapsed device time between two completed marks."""
        return max(0.0, start.elapsed_time(end) * 1e-3)

    def recycle(self, marks: list[Mark]) -> None:
        """Completed marks no span reads any more, for reuse (each once)."""
        self._spare += list({id(m): m for m in marks}.values())


class RunQueue:
    """The training thread's time on a run queue: runnable, while other processes held the
    CPUs (Linux schedstat's run delay, ``/proc/thread-self/schedstat``; about 1 us a read,
    from a file kept open). A busy machine slows every phase for real; this says by how much.

    Opened on the first read, so in the thread that trains (the hooks run there). Where
    schedstat is absent (not Linux, or a kernel without it) every read is None.
    """

    PATH = "/proc/thread-self/schedstat"

    def __init__(self) -> None:
        self._fd: int | None = None

    def wait_ns(self) -> int | None:
        if self._fd is None:
            try:
                self._fd = os.open(self.PATH, os.O_RDONLY)
            except OSError:
                self._fd = -1
        if self._fd < 0:
            return None
        try:
            return int(os.pread(self._fd, 64, 0).split()[1])
        except (OSError, IndexError, ValueError):
            return None

    def close(self) -> None:
        if self._fd is not None and self._fd >= 0:
            os.close(self._fd)
        self._fd = -1


def host_ns() -> int:
    return time.perf_counter_ns()


def device_clock_for(module: torch.nn.Module) -> DeviceClock | None:
    """A device clock if `module`'s parameters live on a CUDA device, else None (host)."""
    for p in module.parameters():
        return DeviceClock() if p.device.type == "cuda" else None
    return None
