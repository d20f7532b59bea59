"""The `local` executor (the default): each trial attempt is a subprocess of the runner."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labcoat.runner._executor import ExecutorKind, ExecutorSettings, TrialHandle
from labcoat.runner._local import LocalProcess
from labcoat.spec import Resources


@dataclass(frozen=True, kw_only=True)
class LocalSettings(ExecutorSettings):
    """No settings: trials run on this machine (resources.cpus sets their threads)."""


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


def open_local(settings: LocalSettings, resources: Resources) -> LocalExecutor:
    return LocalExecutor()


EXECUTOR = ExecutorKind("local", LocalSettings, open_local)
