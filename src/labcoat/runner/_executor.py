"""Executors: where a trial attempt's process runs (`labcoat run --executor`).

The supervisor (`_runner`) owns everything that makes a run trustworthy:
restarts from the last verified checkpoint, the retry budget, hang detection,
journal ingestion. An executor only runs "this command, with this environment,
in this run directory" somewhere and reports when it ended. So Ray and Slurm
never retry a trial themselves (Ray: max_restarts=0; Slurm: no requeue); a
lost worker or job is one failed attempt, and labcoat decides whether to
restart it.

Trials write their journals, logs and checkpoints to the run directory under
LABCOAT_HOME, and the runner reads them there while they run. On one machine
that is simply a local directory; across machines LABCOAT_HOME must be on a
filesystem every node mounts at the same path (NFS, Lustre, ...), as it
usually is on Slurm clusters.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from labcoat.errors import LabcoatError
from labcoat.runner._local import LocalProcess
from labcoat.spec import Resources

EXECUTORS = ("local", "ray", "slurm")
# The exit code recorded when the executor lost a trial (its Ray worker or Slurm
# job died under it): the trial was killed from outside, like SIGKILL, so the
# crash-loop rule never stops its restart.
LOST = -int(signal.SIGKILL)


class LaunchError(LabcoatError):
    """The executor refused to start a trial (e.g. sbatch rejected the job): the attempt
    fails with this message and is not retried."""


class TrialHandle(Protocol):
    """One running trial attempt, as the supervisor sees it."""

    run_dir: Path
    pid: int | None  # the trial's process id on `host`, once known
    host: str | None  # the machine it runs on, once known
    label: str  # how the display names it: "pid 123", "slurm job 42"
    # why the executor lost it, when poll() returned LOST: "worker lost: ..." or "job lost:
    # ..." (a failure; not "lost (...)", which is the runner's own stop)
    lost: str | None

    def poll(self) -> int | None:
        """The exit code once the trial ended (LOST if the executor lost it), else None."""

    def stop(self, grace: float = 5.0) -> int | None:
        """Stop the trial (SIGTERM, SIGKILL after `grace` s); its exit code if known."""


class Executor(Protocol):
    name: str

    def launch(self, command: list[str], *, env: dict[str, str], run_dir: Path,
               cwd: str) -> TrialHandle:
        """Start `command` with exactly `env`, output to `run_dir`; return at once.
        Raises OSError (the program cannot be started) or LaunchError."""

    def abandon(self, run_dir: Path) -> None:
        """Stop what may still run an attempt whose runner died (its run directory)."""

    def close(self) -> None:
        """Release the executor's connections (running trials are stopped first)."""


@dataclass(kw_only=True)
class ExecutorConfig:
    """Which executor `labcoat run` uses, and how to reach it.

    name: local (default), ray or slurm.
    address: ray: the cluster's HOST:PORT (what `ray start --head --port PORT` printed).
    partition: slurm: the partition to submit to (default: the cluster's default).
    slurm: slurm: more sbatch settings, e.g. {"account": "ml", "qos": "high"}, and
        {"cluster": "local"} to run the jobs with submitit's local executor instead.
    """

    name: str = "local"
    address: str | None = None
    partition: str | None = None
    slurm: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in EXECUTORS:
            raise LabcoatError(f"--executor: {self.name!r} is not an executor; choose "
                               f"{', '.join(EXECUTORS)}")
        if self.address is not None and self.name != "ray":
            raise LabcoatError("--address is the Ray cluster's HOST:PORT; it needs "
                               "--executor ray")
        if self.name == "ray" and not self.address:
            raise LabcoatError("--executor ray needs --address HOST:PORT, the head node that "
                               "`ray start --head --port PORT` started")
        if (self.partition or self.slurm) and self.name != "slurm":
            raise LabcoatError("--partition and --slurm are Slurm settings; they need "
                               "--executor slurm")


def parse_settings(pairs: list[str], flag: str = "--slurm") -> dict[str, str]:
    """['account=ml', 'qos=high'] -> {'account': 'ml', 'qos': 'high'}."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise LabcoatError(f"{flag}: {pair!r} is not KEY=VALUE; e.g. {flag} account=ml")
        settings[key.strip()] = value.strip()
    return settings


def open_executor(config: ExecutorConfig, resources: Resources | None) -> Executor:
    """Connect to the executor `config` names; a user error if it cannot be reached."""
    resources = resources or Resources()
    if config.name == "ray":
        from labcoat.runner._ray import RayExecutor

        return RayExecutor(config.address or "", resources)
    if config.name == "slurm":
        from labcoat.runner._slurm import SlurmExecutor

        return SlurmExecutor(resources, partition=config.partition, settings=config.slurm)
    return LocalExecutor()


class LocalExecutor:
    """Each trial attempt is a subprocess of the runner on this machine."""

    name = "local"

    def launch(self, command: list[str], *, env: dict[str, str], run_dir: Path,
               cwd: str) -> TrialHandle:
        return LocalProcess(command, env=env, run_dir=run_dir, cwd=cwd)

    def abandon(self, run_dir: Path) -> None:
        pass  # the trial died with its runner (parent-death signal), or kill_stale ends it

    def close(self) -> None:
        pass


def missing_extra(package: str, extra: str, executor: str) -> LabcoatError:
    return LabcoatError(
        f"--executor {executor} needs the {package!r} package, which is not installed; "
        f"install it with: pip install 'labcoat[{extra}]'"
    )
