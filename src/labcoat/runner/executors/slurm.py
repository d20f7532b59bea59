"""The `slurm` executor: each trial attempt is one Slurm job, submitted with submitit.

The job runs `run_trial_job`, which starts the trial as a local process on the
node Slurm chose (so the trial dies with its job) and returns its exit code.
The job asks for the design's `resources:` (cpus_per_task, gpus_per_node, mem,
time) plus `--partition` and any `--slurm KEY=VALUE` sbatch settings.
Restarts stay labcoat's: a job that ends without a result (cancelled, past its
time limit, node failure) is one lost attempt, and the supervisor restarts the
trial from its last verified checkpoint as a new job, within the retry budget.

Slurm clusters share home and scratch filesystems between nodes; LABCOAT_HOME
must be on one, since the runner (on the login node) reads the journals the
jobs write. `--slurm cluster=local` runs the same jobs with submitit's local
executor (subprocesses of this machine): a way to try a setup without Slurm.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcoat import environment
from labcoat.errors import LabcoatError
from labcoat.runner._executor import (
    LOST,
    ExecutorKind,
    ExecutorSettings,
    LaunchError,
    TrialHandle,
    missing_extra,
    setting,
)
from labcoat.runner._local import LocalProcess, cannot_start
from labcoat.spec import Resources

CLUSTERS = ("slurm", "local")
DEFAULT_MINUTES = 24 * 60
# A job that ended may write its result file a little later on a shared filesystem
# (NFS attribute caches); submitit waits for it, blocking. The runner waits this
# long instead, across polls, before it counts the job as lost.
RESULT_GRACE = {"slurm": 15.0, "local": 1.0}
WHERE_NAME = "executor.json"  # the job writes the trial's pid and host here


@dataclass(frozen=True, kw_only=True)
class SlurmSettings(ExecutorSettings):
    partition: str | None = setting("the Slurm partition to submit to")
    slurm: dict[str, str] = setting("an sbatch setting KEY=VALUE", {})


def run_trial_job(command: list[str], env: dict[str, str], run_dir: str, cwd: str) -> int:
    """The body of one Slurm job: run the trial on this node, return its exit code."""
    env = dict(env)
    for var in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID"):  # set by Slurm for this job
        if var in os.environ:
            env[var] = os.environ[var]
    try:
        process = LocalProcess(command, env=env, run_dir=Path(run_dir), cwd=cwd)
    except OSError as e:
        return cannot_start(Path(run_dir), command, e)
    where = {"pid": process.pid, "host": socket.gethostname()}
    (Path(run_dir) / WHERE_NAME).write_text(json.dumps(where), encoding="utf-8")
    try:
        return process.process.wait()
    except KeyboardInterrupt:  # the job was cancelled: stop the trial cleanly
        return process.stop()


class SlurmExecutor:
    """Submits one job per trial attempt through submitit."""

    name = "slurm"

    def __init__(self, resources: Resources, *, partition: str | None,
                 settings: dict[str, str]) -> None:
        try:
            import submitit
        except ImportError:
            raise missing_extra("submitit", "slurm", "slurm") from None
        self.submitit = submitit
        settings = dict(settings)
        self.cluster = settings.pop("cluster", "slurm")
        if self.cluster not in CLUSTERS:
            raise LabcoatError(f"--slurm cluster={self.cluster}: choose cluster=slurm (the "
                               "default) or cluster=local (submitit's local executor)")
        if self.cluster == "slurm" and shutil.which("sbatch") is None:
            raise LabcoatError("--executor slurm: no Slurm here (`sbatch` is not on PATH); run "
                               "labcoat on the cluster's login node, or try the setup on this "
                               "machine with --slurm cluster=local")
        unknown = sorted(set(settings) - submitit.SlurmExecutor._valid_parameters())
        if unknown:
            raise LabcoatError(f"--slurm: {', '.join(unknown)} is not an sbatch setting submitit "
                               "knows; use e.g. account=, qos=, constraint=, exclude=, "
                               "nodelist=, mem_per_cpu= (submitit.SlurmExecutor's parameters)")
        self.parameters = slurm_parameters(resources, partition, settings)
        self.resources = resources

    def launch(self, command: list[str], *, env: dict[str, str], run_dir: Path,
               cwd: str) -> TrialHandle:
        run_dir.mkdir(parents=True, exist_ok=True)
        name = f"labcoat-{env.get(environment.EXPERIMENT, '')}-{env.get(environment.TRIAL, '')}"
        executor = self._executor(run_dir / "submitit", name)
        try:
            job = executor.submit(run_trial_job, command, env, str(run_dir), cwd)
        except (self.submitit.core.utils.FailedJobError,
                self.submitit.core.utils.FailedSubmissionError, OSError) as e:
            raise LaunchError(f"sbatch refused the job: {_first_line(e)}; check --partition "
                              "and --slurm settings") from None
        return SlurmTrial(job, run_dir, result_grace=RESULT_GRACE[self.cluster])

    def _executor(self, folder: Path, name: str) -> Any:
        if self.cluster == "local":
            executor = self.submitit.LocalExecutor(folder=folder)
            executor.update_parameters(
                timeout_min=self.parameters["time"], gpus_per_node=self.parameters.get(
                    "gpus_per_node", 0))
            return executor
        executor = self.submitit.SlurmExecutor(folder=folder, max_num_timeout=0)
        executor.update_parameters(**{"job_name": name, **self.parameters})
        return executor

    def abandon(self, run_dir: Path) -> None:
        """Cancel the Slurm jobs of an attempt whose runner died: they would run on beside
        the trial's restart, writing to the same checkpoint directory."""
        jobs = sorted(p.name.split("_")[0] for p in (run_dir / "submitit").glob("*_submitted.pkl"))
        if self.cluster == "slurm" and jobs:
            subprocess.run(["scancel", *jobs], check=False, capture_output=True)
        # cluster=local: the job's trial runs on this machine, where kill_stale ends it

    def close(self) -> None:
        pass


class SlurmTrial:
    """The supervisor's handle on one job. `done()` is cheap: submitit batches the
    `sacct` calls of all jobs (the local executor polls its subprocess)."""

    def __init__(self, job: Any, run_dir: Path, *, result_grace: float) -> None:
        self.job, self.run_dir, self.result_grace = job, run_dir, result_grace
        self.ended_at: float | None = None  # when the job was first seen done
        self.pid: int | None = None
        self.host: str | None = None
        self.label = f"slurm job {job.job_id}"
        self.lost: str | None = None
        self.code: int | None = None

    def poll(self) -> int | None:
        if self.code is not None:
            return self.code
        if self.pid is None:
            self._read_where()
        if not self.job.done():
            return None
        self.ended_at = self.ended_at or time.time()
        if (not self.job.paths.result_pickle.exists()
                and time.time() < self.ended_at + self.result_grace):
            return None
        self.job._results_timeout_s = 0  # waited above, without blocking other trials
        try:
            self.code = int(self.job.result())
        except Exception as e:  # noqa: BLE001 - submitit raises its own errors for lost jobs
            self.lost = (f"job lost: slurm job {self.job.job_id} ended without a result "
                         f"({self.job.state}: {_first_line(e)})")
            self.code = LOST
        return self.code

    def stop(self, grace: float = 5.0) -> int | None:
        if self.code is not None:
            return self.code
        self.job.cancel(check=False)
        deadline = time.time() + grace + 30.0
        while time.time() < deadline:
            code = self.poll()
            if code is not None:
                return code
            time.sleep(0.2)
        return None

    def _read_where(self) -> None:
        try:
            where = json.loads((self.run_dir / WHERE_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        self.pid, self.host = where["pid"], where["host"]
        self.label = f"slurm job {self.job.job_id} on {self.host}"


def slurm_parameters(resources: Resources, partition: str | None,
                     settings: dict[str, str]) -> dict[str, Any]:
    """submitit.SlurmExecutor parameters (sbatch options) for one trial's job."""
    if resources.gpus != int(resources.gpus):
        raise LabcoatError(f"resources.gpus: {resources.gpus:g} is not a whole number; a "
                           "Slurm job asks for whole GPUs")
    parameters: dict[str, Any] = {
        "cpus_per_task": math.ceil(resources.cpus),
        "time": math.ceil(resources.time_minutes or DEFAULT_MINUTES),
    }
    if resources.gpus:
        parameters["gpus_per_node"] = int(resources.gpus)
    if resources.memory_bytes is not None:
        parameters["mem"] = f"{math.ceil(resources.memory_bytes / 2**20)}M"
    if partition:
        parameters["partition"] = partition
    parameters.update(settings)
    return parameters


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def open_slurm(settings: SlurmSettings, resources: Resources) -> SlurmExecutor:
    return SlurmExecutor(resources, partition=settings.partition, settings=settings.slurm)


EXECUTOR = ExecutorKind("slurm", SlurmSettings, open_slurm)
