"""Executors: where a trial attempt's process runs (`labcoat run --executor`).

The supervisor (`_runner`) owns everything that makes a run trustworthy:
restarts from the last verified checkpoint, the retry budget, hang detection,
journal ingestion. An executor only runs "this command, with this environment,
in this run directory" somewhere and reports when it ended. So Ray and Slurm
never retry a trial themselves (Ray: max_restarts=0; Slurm: no requeue); a
lost worker or job is one failed attempt, and labcoat decides whether to
restart it.

Each executor is one module of `labcoat.runner.executors`, named for it, that
registers itself: it defines `EXECUTOR = ExecutorKind(name, Settings, open)`
with its own typed settings. This module finds them by listing that package, so
adding one (Kubernetes, say) edits nothing here.

Trials write their journals, logs and checkpoints to the run directory under
LABCOAT_HOME, and the runner reads them there while they run. On one machine
that is simply a local directory; across machines LABCOAT_HOME must be on a
filesystem every node mounts at the same path (NFS, Lustre, ...), as it
usually is on Slurm clusters.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from labcoat.errors import LabcoatError
from labcoat.spec import Resources

PACKAGE = "labcoat.runner.executors"
# The exit code recorded when the executor lost a trial (its Ray worker or Slurm
# job died under it): the trial was killed from outside, like SIGKILL, so the
# crash-loop rule never stops its restart.
LOST = -int(signal.SIGKILL)


def executor_names() -> tuple[str, ...]:
    """Every executor, by listing the package's modules (none is imported)."""
    package = importlib.import_module(PACKAGE)
    return tuple(sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                        if not m.name.startswith("_")))


EXECUTORS = executor_names()  # as installed; executor_names() sees modules added later


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
    """Runs trial attempts somewhere; the supervisor decides restarts (never the executor)."""

    name: str

    def launch(self, command: list[str], *, env: dict[str, str], run_dir: Path,
               cwd: str) -> TrialHandle:
        """Start `command` with exactly `env`, output to `run_dir`; return at once.
        Raises OSError (the program cannot be started) or LaunchError."""

    def abandon(self, run_dir: Path) -> None:
        """Stop what may still run an attempt whose runner died (its run directory)."""

    def close(self) -> None:
        """Release the executor's connections (running trials are stopped first)."""


@dataclass(frozen=True, kw_only=True)
class ExecutorSettings:
    """An executor's own settings (subclass it, a frozen kw_only dataclass). Each field is
    one `labcoat run` option (`--address` for `address`); declare it with `setting()` so
    a misplaced option can say what it is. Validate in `__post_init__`, raising a
    LabcoatError that names the option and the fix."""


def setting(what: str, default: Any = None, **kwargs: Any) -> Any:
    """A settings field; `what` completes "--FLAG is ...", e.g. "the Ray cluster's HOST:PORT"."""
    if isinstance(default, dict | list):  # a fresh copy per instance
        kwargs["default_factory"] = lambda: type(default)(default)
    else:
        kwargs["default"] = default
    return field(metadata={"what": what}, **kwargs)


@dataclass(frozen=True)
class ExecutorKind:
    """One executor, as its module registers it (`EXECUTOR = ExecutorKind(...)`)."""

    name: str  # the module's name, what `--executor` takes
    settings: type[ExecutorSettings]
    open: Callable[[Any, Resources], Executor]  # (its settings, per-trial resources)


def executor_kind(name: str) -> ExecutorKind:
    """The registered executor `name`; a LabcoatError listing the valid names otherwise."""
    names = executor_names()
    if name not in names:
        raise LabcoatError(f"--executor: {name!r} is not an executor; choose "
                           f"{', '.join(names)}")
    kind = importlib.import_module(f"{PACKAGE}.{name}").EXECUTOR
    if kind.name != name:  # a module copied without renaming its registration
        raise RuntimeError(f"{PACKAGE}.{name} registers an executor named {kind.name!r}")
    return kind


def _options_of(settings: type[ExecutorSettings]) -> dict[str, str]:
    return {f.name: f.metadata.get("what", "a setting") for f in dataclasses.fields(settings)}


@dataclass(kw_only=True)
class ExecutorConfig:
    """Which executor `labcoat run` uses, and how to reach it.

    name: local (default), ray or slurm (any module of `labcoat.runner.executors`).
    address: ray: the cluster's HOST:PORT (what `ray start --head --port PORT` printed).
    partition: slurm: the partition to submit to (default: the cluster's default).
    slurm: slurm: more sbatch settings, e.g. {"account": "ml", "qos": "high"}, and
        {"cluster": "local"} to run the jobs with submitit's local executor instead.
    options: the settings of another executor, by field name.
    `settings` is the chosen executor's typed settings, checked when the config is made.
    """

    name: str = "local"
    address: str | None = None
    partition: str | None = None
    slurm: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    settings: ExecutorSettings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kind = executor_kind(self.name)
        given = {k: v for k, v in (("address", self.address), ("partition", self.partition),
                                   ("slurm", self.slurm)) if v is not None and v != {}}
        given.update(self.options)
        own = _options_of(kind.settings)
        for option in given:
            if option not in own:
                raise _misplaced(option)
        self.settings = kind.settings(**given)


def _misplaced(option: str) -> LabcoatError:
    """An option the chosen executor does not take: say which executors take it."""
    owners, names = {}, executor_names()
    for name in names:
        options = _options_of(executor_kind(name).settings)
        if option in options:
            owners[name] = options[option]
    flag = f"--{option.replace('_', '-')}"
    if not owners:
        return LabcoatError(f"{flag}: no executor takes this setting; executors: "
                            f"{', '.join(names)}")
    what = next(iter(owners.values()))
    return LabcoatError(f"{flag} is {what}; it needs "
                        f"{' or '.join(f'--executor {n}' for n in owners)}")


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
    return executor_kind(config.name).open(config.settings, resources or Resources())


def missing_extra(package: str, extra: str, executor: str) -> LabcoatError:
    return LabcoatError(
        f"--executor {executor} needs the {package!r} package, which is not installed; "
        f"install it with: pip install 'labcoat[{extra}]'"
    )
