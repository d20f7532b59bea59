"""The `ray` executor: each trial attempt runs in a Ray actor on a Ray cluster.

Ray does the placement: the actor asks for the design's `resources:` (num_cpus,
num_gpus, memory), and Ray starts it on a node that has them, waiting while
none has. The actor then runs the trial as a local process on its node
(`LocalProcess`, so the trial dies with its worker) and answers polls.
Restarts stay labcoat's: the actor is created with max_restarts=0, and a
worker that dies under a trial is one lost attempt for the supervisor to
restart from the trial's last verified checkpoint, within its retry budget.

Journals, logs and checkpoints go to the run directory, which the runner reads
while the trial runs: across nodes LABCOAT_HOME must be on a shared filesystem
(see `labcoat.runner._executor`). Every node needs labcoat and the trial's code installed at
the same paths as the runner's machine (the command is run as rendered there).
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcoat.errors import LabcoatError
from labcoat.runner._executor import (
    LOST,
    ExecutorKind,
    ExecutorSettings,
    TrialHandle,
    missing_extra,
    setting,
)
from labcoat.runner._local import LocalProcess, cannot_start
from labcoat.spec import Resources

CONNECT_TIMEOUT = 5.0
WORKER_TIMEOUT = 120.0  # seconds for the cluster to run a first task (a loaded machine)
STOP_TIMEOUT = 60.0  # seconds to wait for an actor to stop its trial, beyond the grace


@dataclass(frozen=True, kw_only=True)
class RaySettings(ExecutorSettings):
    address: str = setting("the Ray cluster's HOST:PORT", "")

    def __post_init__(self) -> None:
        if not self.address:
            raise LabcoatError("--executor ray needs --address HOST:PORT, the head node that "
                               "`ray start --head --port PORT` started")


class TrialActor:
    """Runs one trial attempt on the node Ray placed it on (made a Ray actor at launch).

    A synchronous actor: its methods run one at a time on the worker's main thread,
    which is the thread the trial process's parent-death signal is tied to.
    """

    def start(self, command: list[str], env: dict[str, str], run_dir: str, cwd: str,
              gpus: bool) -> tuple[int, str, int | None]:
        env = dict(env)
        if gpus and "CUDA_VISIBLE_DEVICES" in os.environ:
            env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]  # Ray's choice
        try:
            self.process: LocalProcess | None = LocalProcess(
                command, env=env, run_dir=Path(run_dir), cwd=cwd)
        except OSError as e:
            self.process, self.code = None, cannot_start(Path(run_dir), command, e)
        return self.poll()

    def poll(self) -> tuple[int | None, str, int | None]:
        """(trial pid, host, exit code or None)."""
        if self.process is None:
            return None, socket.gethostname(), self.code
        return self.process.pid, socket.gethostname(), self.process.poll()

    def worker_pid(self) -> int:
        return os.getpid()

    def stop(self, grace: float) -> int | None:
        return self.code if self.process is None else self.process.stop(grace)


class RayExecutor:
    """Connects to the Ray cluster at `address` (HOST:PORT) for one `labcoat run`."""

    name = "ray"

    def __init__(self, address: str, resources: Resources) -> None:
        try:
            import ray
        except ImportError:
            raise missing_extra("ray", "ray", "ray") from None
        self.ray = ray
        _check_reachable(address)
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False,
                     configure_logging=True)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise LabcoatError(f"--address {address}: could not join the Ray cluster there "
                               f"({_first_line(e)}); check it with `ray status --address "
                               f"{address}`") from None
        self.resources = resources
        self.options = _actor_options(resources)
        try:
            _check_feasible(ray, address, resources)
            _check_workers_import_labcoat(ray, address)
        except LabcoatError:
            ray.shutdown()
            raise
        self.actor_class = ray.remote(TrialActor)

    def launch(self, command: list[str], *, env: dict[str, str], run_dir: Path,
               cwd: str) -> TrialHandle:
        actor = self.actor_class.options(**self.options).remote()
        first = actor.start.remote(command, env, str(run_dir), cwd, self.resources.gpus > 0)
        return RayTrial(self.ray, actor, first, run_dir)

    def abandon(self, run_dir: Path) -> None:
        pass  # Ray ended the actors of the runner that died, and their trials with them

    def close(self) -> None:
        self.ray.shutdown()


class RayTrial:
    """The supervisor's handle on a trial in a Ray actor. Polls never block: each asks
    the actor once and is answered at a later poll."""

    def __init__(self, ray: Any, actor: Any, first: Any, run_dir: Path) -> None:
        self.ray, self.actor, self.pending, self.run_dir = ray, actor, first, run_dir
        self.pid: int | None = None
        self.host: str | None = None
        self.label = "ray actor"
        self.lost: str | None = None
        self.code: int | None = None

    def poll(self) -> int | None:
        if self.code is not None:
            return self.code
        if self.pending is None:
            self.pending = self.actor.poll.remote()
        ready, _ = self.ray.wait([self.pending], timeout=0)
        if not ready:
            return None
        ref, self.pending = self.pending, None
        try:
            self.pid, self.host, code = self.ray.get(ref)
        except self.ray.exceptions.RayError as e:
            where = f" on {self.host}" if self.host else ""
            self.lost = f"worker lost: the Ray worker running it{where} died ({_brief(e)})"
            code = LOST
        if code is not None:
            self._finish(code)
        return code

    def stop(self, grace: float = 5.0) -> int | None:
        if self.code is not None:
            return self.code
        code = None
        if self.pid is not None:
            try:
                code = self.ray.get(self.actor.stop.remote(grace), timeout=grace + STOP_TIMEOUT)
            except self.ray.exceptions.RayError:
                code = None
        self._finish(code if code is not None else LOST)
        return code

    def worker_pid(self, timeout: float = 60.0) -> int:
        """The pid of the Ray worker process hosting the actor (for tests and chaos)."""
        return self.ray.get(self.actor.worker_pid.remote(), timeout=timeout)

    def _finish(self, code: int) -> None:
        self.code = code
        try:
            self.ray.kill(self.actor, no_restart=True)  # frees its resources at once
        except self.ray.exceptions.RayError:
            pass  # already gone with its worker or node


def _actor_options(resources: Resources) -> dict[str, Any]:
    options: dict[str, Any] = {"num_cpus": resources.cpus, "num_gpus": resources.gpus,
                               "max_restarts": 0, "max_task_retries": 0}
    if resources.memory_bytes is not None:
        options["memory"] = resources.memory_bytes
    return options


def _check_reachable(address: str) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise LabcoatError(f"--address {address!r} is not HOST:PORT, e.g. 127.0.0.1:6379")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as e:
        raise LabcoatError(
            f"--address {address}: no Ray cluster answers there ({e.strerror or e}); start one "
            f"with `ray start --head --port {port}` or give the head node's address"
        ) from None


def _check_feasible(ray: Any, address: str, resources: Resources) -> None:
    """Refuse a request no node can meet: Ray would wait for it forever."""
    want = {"CPU": resources.cpus, "GPU": resources.gpus, "memory": resources.memory_bytes or 0}
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    if any(all(node.get(k, 0) >= v for k, v in want.items() if v) for node in nodes):
        return
    largest = {k: max((node.get(k, 0) for node in nodes), default=0) for k in want}
    raise LabcoatError(
        f"resources: the design asks each trial for cpus={resources.cpus:g}, "
        f"gpus={resources.gpus:g}, memory={resources.memory or 'any'}, but no node of the Ray "
        f"cluster at {address} has that (largest: {largest['CPU']:g} CPUs, "
        f"{largest['GPU']:g} GPUs, {largest['memory'] / 1e9:.1f} GB); lower `resources:` in "
        "the design or add nodes"
    )


def labcoat_location() -> str:
    """Runs on a Ray worker: where it imports labcoat from."""
    import labcoat

    return labcoat.__file__ or "?"


def _check_workers_import_labcoat(ray: Any, address: str) -> None:
    """Trials need labcoat on the workers; say so once rather than lose every attempt."""
    task = ray.remote(labcoat_location).options(num_cpus=0, max_retries=0)
    try:
        ray.get(task.remote(), timeout=WORKER_TIMEOUT)
    except ray.exceptions.GetTimeoutError:
        raise LabcoatError(f"--address {address}: the Ray cluster started no worker in "
                           f"{WORKER_TIMEOUT:g} s; check it with `ray status --address "
                           f"{address}`") from None
    except ray.exceptions.RayError as e:
        raise LabcoatError(
            f"--address {address}: Ray workers cannot import labcoat ({_last_line(e)}); "
            "install labcoat on every node in the environment `ray start` runs in"
        ) from None


def _first_line(error: BaseException) -> str:
    lines = _plain(error).splitlines()
    return lines[0] if lines else type(error).__name__


def _brief(error: BaseException, limit: int = 160) -> str:
    """Ray's first line, without the actor ids and reprs it appends."""
    line = re.split(r"\s+\S*ray::|\s+\(pid=", _first_line(error))[0].rstrip(" ,")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _last_line(error: BaseException) -> str:
    lines = _plain(error).splitlines()
    return lines[-1] if lines else type(error).__name__


def _plain(error: BaseException) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()  # Ray colours its messages


def open_ray(settings: RaySettings, resources: Resources) -> RayExecutor:
    return RayExecutor(settings.address, resources)


EXECUTOR = ExecutorKind("ray", RaySettings, open_ray)
