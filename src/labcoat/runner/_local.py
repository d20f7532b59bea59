"""A trial attempt as a subprocess on this machine: the `local` executor's trial handle
(executors/local.py), and what the ray and slurm executors run on the node they picked."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

STDOUT_NAME = "stdout.log"
STDERR_NAME = "stderr.log"


class LocalProcess:
    """A running trial attempt; stdout and stderr go to files in its run directory.

    It is also the `local` executor's trial handle (see `_executor.TrialHandle`), and
    the ray and slurm executors run one on the machine they picked.
    """

    def __init__(self, command: list[str], *, env: dict[str, str], run_dir: Path,
                 cwd: str | None = None) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir = run_dir
        self.host: str | None = socket.gethostname()
        self.lost: str | None = None  # a local process is never lost: it exits
        with open(run_dir / STDOUT_NAME, "ab") as out, open(run_dir / STDERR_NAME, "ab") as err:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd or os.getcwd(),
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self.pid = self.process.pid
        self.label = f"pid {self.pid}"

    def poll(self) -> int | None:
        return self.process.poll()

    def stop(self, grace: float = 5.0) -> int:
        """SIGTERM the trial's process group, SIGKILL it after `grace` seconds."""
        _signal_group(self.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(self.pid, signal.SIGKILL)
            return self.process.wait()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _die_with_parent() -> None:
    # Trials run in their own session (Ctrl-C reaches only the runner, which
    # stops them cleanly). If the runner itself is killed, Linux sends the
    # trial SIGKILL (PR_SET_PDEATHSIG) so no orphan keeps training unobserved.
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def kill_stale(pid: int, journal: Path) -> bool:
    """Kill a trial process left by a runner that died, if it is still ours.

    It is ours if its environment names the same journal (pids are reused).
    """
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    if f"LABCOAT_JOURNAL={journal}".encode() not in environ.split(b"\0"):
        return False
    _signal_group(pid, signal.SIGKILL)
    return True


CANNOT_START = 127  # the shell's exit status for a command it cannot run


def cannot_start(run_dir: Path, command: list[str], error: OSError) -> int:
    """On a remote executor: explain in the attempt's stderr why its program did not start,
    and return the exit status to report (the supervisor's crash-loop rule then stops
    retrying the same failure)."""
    program = command[0] if command else "?"
    with open(run_dir / STDERR_NAME, "a", encoding="utf-8") as f:
        f.write(f"could not start {program!r} on {socket.gethostname()}: "
                f"{error.strerror or error}; check the design's `command:`\n")
    return CANNOT_START


def stderr_end(run_dir: Path, size: int) -> str | None:
    """The last `size` bytes of an attempt's stderr as text; None if it cannot be read."""
    try:
        with open(run_dir / STDERR_NAME, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def stderr_tail(run_dir: Path, lines: int = 5) -> str:
    """The last lines of an attempt's stderr, for failure messages."""
    text = stderr_end(run_dir, 8192) or ""
    return "\n".join(text.strip().splitlines()[-lines:])
