"""Whether an experiment's runner is alive: its pid, host and heartbeat.

`labcoat run` writes "PID HOST" into the experiment's lock file
(``$LABCOAT_HOME/runs/<experiment>/.lock``) and touches it about once a second, so
the file's mtime is the runner's last heartbeat. A reader (`labcoat status`) that
finds trials "running" asks `runner_state`: a runner killed by kill -9 closes none
of its attempts, and its trials (killed with it: PR_SET_PDEATHSIG) are in fact
interrupted. The next `labcoat run` closes such attempts at the heartbeat, not at
the moment it starts, so an attempt's duration never includes the time no runner ran.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from labcoat import environment as env

HEARTBEAT_SECONDS = 1.0  # how often the runner touches its lock file
# A runner on another host (a shared home) is taken for gone after this much silence; on
# this host the pid decides.
SILENT_SECONDS = 120.0


@dataclass(frozen=True)
class RunnerState:
    pid: int | None
    host: str | None
    heartbeat: float | None  # unix seconds of the last heartbeat
    alive: bool

    def gone(self) -> str:
        """Why trials the store calls running are not: e.g. 'runner pid 123 gone'."""
        where = "" if self.host in (None, socket.gethostname()) else f" on {self.host}"
        return f"runner pid {self.pid if self.pid is not None else '?'}{where} gone"


def lock_path(experiment: str) -> Path:
    return env.home() / "runs" / experiment / ".lock"


def identity() -> str:
    """What the runner writes into its lock file."""
    return f"{os.getpid()} {socket.gethostname()}"


class Heartbeat:
    """Touches the lock file at most once per HEARTBEAT_SECONDS."""

    def __init__(self, experiment: str) -> None:
        self.path = lock_path(experiment)
        self.last = 0.0

    def beat(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if now - self.last < HEARTBEAT_SECONDS:
            return
        self.last = now
        try:
            os.utime(self.path)
        except OSError:
            pass  # the home went away: the run itself will say so


def runner_state(experiment: str, text: str | None = None,
                 heartbeat: float | None = None) -> RunnerState | None:
    """The last runner of `experiment` as its lock file records it; None if no runner ever
    ran it from this home. `text`, `heartbeat`: the file's content and mtime, if already
    read (the next runner reads them before it overwrites the file)."""
    if text is None:
        path = lock_path(experiment)
        try:
            text, heartbeat = path.read_text(encoding="utf-8"), path.stat().st_mtime
        except OSError:
            return None
    fields = text.split()
    pid = int(fields[0]) if fields and fields[0].isdigit() else None
    host = fields[1] if len(fields) > 1 else None
    return RunnerState(pid, host, heartbeat, _alive(pid, host, heartbeat))


def _alive(pid: int | None, host: str | None, heartbeat: float | None) -> bool:
    if host in (None, socket.gethostname()) and pid is not None:
        if pid == os.getpid():
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # someone else's process: alive
        return True
    return heartbeat is not None and time.time() - heartbeat < SILENT_SECONDS
