"""Multi-rank trials (design ``ranks: N``): the torchrun launch, the failing rank, stragglers.

A trial with N > 1 ranks runs as one process group launched by torchrun::

    python -m torch.distributed.run --standalone --nproc-per-node N --max-restarts 0
        --tee 3 --log-dir RUN_DIR/ranks --no-python COMMAND...

``--no-python`` runs the design's command as it is on every rank (torchrun sets
RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT); ``--tee 3`` prefixes each line
with ``[default<r>]:``, which the runner's output capture reads as the rank;
``--max-restarts 0`` leaves restarts to labcoat's supervisor (the retry budget,
resuming from the last verified checkpoint) instead of torchrun's blind ones.
When one rank fails, torchrun tears the others down and exits non-zero; its
"Root Cause" report names the rank, and `rank_failure` reads it so the attempt's
cause names the failing rank and its host.

This module keeps the seam at "the command and environment an executor runs":
`launch_command` wraps any argv, and the executors only start it.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import re
import shutil
import signal
import statistics
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from labcoat import environment as env
from labcoat import store
from labcoat.errors import LabcoatError
from labcoat.journal import Events
from labcoat.runner._ingest import Progress, ingest_ranks
from labcoat.runner._local import stderr_end, stderr_tail
from labcoat.store import Attempt

LOG_DIR = "ranks"  # torchrun's per-rank stdout/stderr files, inside the attempt's run directory
STRAGGLER_RATIO = 1.5  # a rank this many times slower than the others' median is a straggler
STRAGGLER_FLOOR_S = 0.02  # ... and at least this many seconds slower (timer and load noise)
STRAGGLER_WINDOW = 20  # recent steps per rank whose median is compared
STRAGGLER_MIN_STEPS = 5  # steps each rank must have reported before anyone is judged
# A rank still running this long without a journal line after another rank finished is
# left behind (e.g. deadlocked in its teardown): the group is stopped like a hung one even
# when no heartbeat timeout is declared. Generous: rank 0 may save or evaluate alone.
LEFT_BEHIND_S = 600.0


def launch_command(command: list[str], ranks: int, run_dir: Path) -> list[str]:
    """The argv that runs `command` as `ranks` ranks (unchanged for one rank)."""
    if ranks <= 1:
        return list(command)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={ranks}", "--max-restarts=0", "--tee=3",
            f"--log-dir={run_dir / LOG_DIR}", "--no-python", *command]


def check_program(command: list[str], ranks: int) -> None:
    """Raise the OSError starting `command` would raise: under torchrun a missing program
    only shows as a failed rank, which would be retried like bad luck."""
    if ranks > 1 and command and shutil.which(command[0]) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command[0])


def check_launcher(ranks: int) -> None:
    """A design with `ranks: N > 1` needs torch (torchrun) where the runner runs."""
    if ranks > 1 and importlib.util.find_spec("torch") is None:
        raise LabcoatError(
            f"the design asks for ranks: {ranks}, which launches trials through torchrun, "
            "but torch is not installed here; install it (pip install 'labcoat[torch]') "
            "or remove `ranks:` from the design")


@dataclass(frozen=True)
class RankFailure:
    """The first rank of a group that failed, as torchrun's "Root Cause" report names it."""

    rank: int
    world: int
    host: str
    exitcode: int  # negative: killed by that signal
    pid: int | None
    tail: str  # the last line of that rank's stderr

    @property
    def cause(self) -> str:
        """The attempt cause, e.g. ``exit 3 on rank 1 of 2 (host vm): boom``."""
        if self.exitcode < 0:  # its stderr says nothing about a signal from outside
            killed = f"killed by signal {_signal_name(-self.exitcode)}"
            return f"{killed} on rank {self.rank} of {self.world} (host {self.host})"
        where = f"exit {self.exitcode} on rank {self.rank} of {self.world} (host {self.host})"
        return f"{where}: {self.tail}" if self.tail else where

    def event(self, attempt: Attempt) -> dict[str, Any]:
        """The ``rank.failed`` event row: which rank, where, how; the group restarts whole."""
        return {"trial_id": attempt.trial_id, "attempt_id": attempt.id, "seq": None,
                "step": attempt.last_step, "rank": self.rank, "host": self.host,
                "level": "error", "kind": Events.RANK_FAILED,
                "message": f"{self.cause}; the whole group of {self.world} ranks was stopped",
                "data": {"rank": self.rank, "world": self.world, "host": self.host,
                         "exitcode": self.exitcode, "pid": self.pid},
                "time": time.time()}


_ROOT_CAUSE = re.compile(
    r"Root Cause \(first observed failure\):.*?"
    r"host\s*:\s*(?P<host>\S+).*?"
    r"rank\s*:\s*(?P<rank>\d+)\s*\(local_rank:\s*(?P<local>\d+)\).*?"
    r"exitcode\s*:\s*(?P<code>-?\d+)(?:\s*\(pid:\s*(?P<pid>\d+)\))?",
    re.DOTALL,
)


def rank_failure(run_dir: Path, world: int, hosts: dict[int, str]) -> RankFailure | None:
    """The failing rank from torchrun's report at the end of the attempt's stderr.log;
    None when there is none (torchrun itself was stopped, or every rank succeeded).

    hosts: rank -> host from the ranks' journals; preferred to torchrun's, which is the
    machine's fully qualified name (often just "localhost").
    """
    text = stderr_end(run_dir, 65536)
    if text is None:
        return None
    found = list(_ROOT_CAUSE.finditer(text))
    if not found:
        return None
    match = found[-1]
    rank, local = int(match["rank"]), int(match["local"])
    return RankFailure(rank=rank, world=world, host=hosts.get(rank) or match["host"],
                       exitcode=int(match["code"]),
                       pid=int(match["pid"]) if match["pid"] else None,
                       tail=_rank_tail(run_dir, local))


def _rank_tail(run_dir: Path, local_rank: int) -> str:
    """The last stderr line of a local rank, from torchrun's per-rank log files."""
    logs = sorted((run_dir / LOG_DIR).glob(f"*/attempt_*/{local_rank}"),
                  key=lambda p: p.stat().st_mtime)
    return stderr_tail(logs[-1], lines=1) if logs else ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"{number}"


def kill_ranks(journal: Path) -> int:
    """SIGKILL every process still running for the attempt whose journal is `journal`
    (torchrun starts each rank in a session of its own, so signalling torchrun's process
    group does not reach them once torchrun itself is gone); returns how many."""
    killed = 0
    needle = f"{env.JOURNAL}={journal}".encode()
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


@dataclass
class Straggler:
    rank: int
    seconds: float  # its median time per step
    others: float  # the median of the other ranks' medians
    measure: str  # "work" (own work before waiting) or "step" (wall time per step)
    medians: list[float]

    @property
    def message(self) -> str:
        what = "own work (before waiting for the others)" if self.measure == "work" else \
            "wall time"
        return (f"rank {self.rank} is a straggler: {self.seconds * 1e3:.1f} ms per step of "
                f"{what} against {self.others * 1e3:.1f} ms on the other ranks "
                f"({self.seconds / self.others:.1f}x, medians of the last "
                f"{STRAGGLER_WINDOW} steps at most)")


@dataclass
class Stragglers:
    """Per-rank step times of one attempt -> a rank much slower than the others, once.

    Own work times (`Run.log_work`) are used when the trial reports them: in
    synchronous data-parallel training every rank's wall time per step is the slowest
    rank's. Otherwise the wall time between a rank's steps."""

    world: int
    work: dict[int, deque[float]] = field(default_factory=dict)
    step: dict[int, deque[float]] = field(default_factory=dict)
    reported: set[int] = field(default_factory=set)

    def add(self, progress: Progress) -> None:
        for times, new in ((self.work, progress.work_s), (self.step, progress.step_s)):
            for rank, values in new.items():
                times.setdefault(rank, deque(maxlen=STRAGGLER_WINDOW)).extend(values)

    def check(self) -> list[Straggler]:
        """Stragglers not reported before (none until every rank has reported enough)."""
        measure, times = ("work", self.work) if self.work else ("step", self.step)
        if len(times) == self.world and all(
                len(t) >= STRAGGLER_MIN_STEPS for t in times.values()):
            return self._judge(measure, times)
        return []

    def _judge(self, measure: str, times: dict[int, deque[float]]) -> list[Straggler]:
        medians = [statistics.median(times[r]) for r in range(self.world)]
        found = []
        for rank, mine in enumerate(medians):
            others = statistics.median(medians[:rank] + medians[rank + 1:])
            slow = mine > STRAGGLER_RATIO * others and mine - others > STRAGGLER_FLOOR_S
            if slow and others > 0 and rank not in self.reported:
                self.reported.add(rank)
                found.append(Straggler(rank, mine, others, measure, medians))
        return found


class RankGroup:
    """What the runner keeps about one running multi-rank attempt."""

    def __init__(self, world: int, started: float) -> None:
        self.world = world
        self.offsets: dict[int, tuple[int, int]] = {}
        self.hosts: dict[int, str] = {}
        self.stragglers = Stragglers(world)
        self.started = started
        # rank -> (when its journal last grew, the last step it journaled); ranks not seen
        # yet count from when the first one was (ranks start seconds apart under load)
        self.seen: dict[int, tuple[float, int | None]] = {}
        self.finished: set[int] = set()  # ranks whose journal has its finish record

    def ingest(self, session: Session, attempt: Attempt, rank0: Progress) -> list[str]:
        """Ingest ranks 1..N-1's journals; returns news for the live display: their guard
        alerts, and newly found stragglers (recorded as a ``rank.straggler`` event and
        alert of the attempt)."""
        if attempt.host:
            self.hosts.setdefault(0, attempt.host)
        progress = ingest_ranks(session, attempt, self.world, self.offsets)
        self.hosts.update(progress.hosts)
        if attempt.last_record_time is not None:
            self.seen[0] = (attempt.last_record_time, attempt.last_step)
        for rank, (when, step) in progress.last.items():
            self.seen[rank] = (when, self.seen.get(rank, (when, None))[1] if step is None
                               else step)
        self.finished |= progress.finished | ({0} if rank0.finish_status else set())
        self.stragglers.add(rank0)
        self.stragglers.add(progress)
        news = [f"guard {a['severity']}: {a['rule']} at step {a['step']}: {a['message']}"
                for a in progress.alerts]
        for straggler in self.stragglers.check():
            _record_straggler(session, attempt, straggler, self.hosts.get(straggler.rank))
            news.append(straggler.message)
        return news

    def _seen(self) -> dict[int, tuple[float, int | None]]:
        """Ranks still running -> (last journal line, last step)."""
        first = min((when for when, _ in self.seen.values()), default=self.started)
        return {rank: self.seen.get(rank, (first, None)) for rank in range(self.world)
                if rank not in self.finished}

    def last_activity(self) -> float:
        """When the most silent rank still running last journaled: the group hangs if any
        rank does."""
        running = self._seen()
        if not running:  # every rank finished; torchrun is exiting
            return max(when for when, _ in self.seen.values())
        return min(when for when, _ in running.values())

    def left_behind(self, now: float) -> str | None:
        """The hang cause when some rank finished and another has been silent for
        `LEFT_BEHIND_S` since (None otherwise)."""
        running = self._seen()
        if not self.finished or not running:
            return None
        rank, (when, step) = min(running.items(), key=lambda kv: kv[1][0])
        if now - when <= LEFT_BEHIND_S:
            return None
        done = ", ".join(str(r) for r in sorted(self.finished))
        at = f"at step {step}" if step is not None else "before its first step"
        host = self.hosts.get(rank)
        return (f"hang: rank {rank} of {self.world}{f' (host {host})' if host else ''} went "
                f"silent {at} and stayed silent {now - when:.0f} s after rank(s) {done} "
                "finished")

    def silent_first(self) -> str:
        """Which rank went silent first, for a hang's cause."""
        rank, (_, step) = min((self._seen() or self.seen).items(), key=lambda kv: kv[1][0])
        at = f" at step {step}" if step is not None else " before its first step"
        host = self.hosts.get(rank)
        return f"rank {rank} of {self.world}{f' (host {host})' if host else ''} went silent " \
               f"first{at}"

    def failure(self, attempt: Attempt) -> RankFailure | None:
        return rank_failure(Path(attempt.run_dir or "."), self.world, self.hosts)


def _record_straggler(session: Session, attempt: Attempt, straggler: Straggler,
                      host: str | None) -> None:
    evidence = {"rank": straggler.rank, "measure": straggler.measure,
                "median_ms": [round(m * 1e3, 2) for m in straggler.medians],
                "ratio": round(straggler.seconds / straggler.others, 2)}
    now = time.time()
    store.insert_events(session, [{
        "trial_id": attempt.trial_id, "attempt_id": attempt.id, "seq": None,
        "step": attempt.last_step, "rank": straggler.rank, "host": host, "level": "warning",
        "kind": Events.RANK_STRAGGLER, "message": straggler.message, "data": evidence,
        "time": now}])
    store.insert_alerts(session, [{
        "trial_id": attempt.trial_id, "attempt_id": attempt.id, "seq": None,
        "step": attempt.last_step, "rule": Events.RANK_STRAGGLER, "severity": "warning",
        "message": straggler.message, "evidence": evidence, "time": now}])
