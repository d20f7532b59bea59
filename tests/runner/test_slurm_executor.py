"""The slurm executor, through submitit: jobs run with submitit's local executor
(no Slurm cluster here), and the sbatch script it would submit is checked
against Slurm's own option names."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import cli, fake_design, recorded_once
from labcoat.errors import LabcoatError
from labcoat.spec import Resources

submitit = pytest.importorskip("submitit")


def _job_process(home: Path, trial: str) -> int | None:
    """The submitit job process running trial `trial`: the parent of the trial process."""
    want = {f"LABCOAT_TRIAL={trial}".encode(), f"LABCOAT_HOME={home}".encode()}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = set((entry / "environ").read_bytes().split(b"\0"))
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if want <= environ:
                return int(stat.rsplit(")", 1)[1].split()[1])
    return None


def test_slurm_jobs_run_an_experiment_and_a_killed_job_restarts(home, tmp_path):
    """The experiment runs as submitit jobs; the job of one trial is SIGKILLed mid-trial:
    one lost attempt, restarted as a new job. The fake trial's loss depends only on its
    seed and steps, so the killed trial must end with its uninterrupted twin's points."""
    design = fake_design(tmp_path / "jobs", name="jobs", steps=8, sleep=0.15, seeds=1)
    runner = subprocess.Popen(
        [sys.executable, "-m", "labcoat.cli", "run", str(design), "--plain",
         "--executor", "slurm", "--slurm", "cluster=local"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    deadline = time.time() + 120
    job = None
    while job is None:
        assert runner.poll() is None, runner.communicate()[0]
        assert time.time() < deadline, "trial base-s0 did not start in 120 s"
        job = _job_process(home, "base-s0")
        time.sleep(0.05)
    cmdline = Path(f"/proc/{job}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert "submitit" in cmdline, cmdline  # the trial runs inside a submitit job
    os.kill(job, signal.SIGKILL)
    out, _ = runner.communicate(timeout=300)
    assert runner.returncode == 0, out
    assert "slurm job" in out and "2 trial(s) finished now" in out
    assert "job lost: slurm job" in out

    points, items, attempts = recorded_once("jobs")
    assert attempts == {"base-s0": 2, "better-s0": 1}, attempts
    twins = [{key[1:]: v for key, v in points.items() if key[0] == trial}
             for trial in ("base-s0", "better-s0")]
    assert twins[0] == twins[1]
    assert sorted(step for _, step in twins[0]) == list(range(1, 9))  # each step once
    assert len(items) == 2 * 2 * 40  # 2 trials x 2 tasks x 40 items
    # each attempt was its own submitit job, which left its folder
    assert list((home / "runs" / "jobs" / "better-s0" / "attempt-1" / "submitit").glob(
        "*_result.pkl"))


def test_sbatch_script_asks_for_the_design_resources(tmp_path):
    from labcoat.runner.executors.slurm import SlurmExecutor, slurm_parameters

    resources = Resources(cpus=2.5, gpus=1, memory="1.5GiB", time_minutes=90)
    parameters = slurm_parameters(resources, "gpu", {"account": "ml", "qos": "high"})
    from submitit.slurm.slurm import _make_sbatch_string

    script = _make_sbatch_string(command="python -c pass", folder=tmp_path, **parameters)
    for line in ("#SBATCH --cpus-per-task=3", "#SBATCH --gpus-per-node=1",
                 "#SBATCH --mem=1536M", "#SBATCH --time=90", "#SBATCH --partition=gpu",
                 "#SBATCH --account=ml", "#SBATCH --qos=high"):
        assert line in script, line

    with pytest.raises(LabcoatError, match="whole number"):
        slurm_parameters(Resources(gpus=0.5), None, {})
    with pytest.raises(LabcoatError, match="colour"):
        SlurmExecutor(Resources(), partition=None, settings={"colour": "red", "cluster": "local"})
    with pytest.raises(LabcoatError, match="sbatch"):
        SlurmExecutor(Resources(), partition="gpu", settings={})  # no Slurm on this machine


def test_a_refused_submission_fails_the_trial_with_sbatch_message(home, tmp_path, monkeypatch):
    """A stand-in `sbatch` (no Slurm here) keeps the script it was given and refuses it,
    as sbatch does for an unknown partition."""
    bin_dir, kept = tmp_path / "bin", tmp_path / "kept"
    bin_dir.mkdir()
    kept.mkdir()
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\ncp "$1" {kept}/\n'
        'echo "sbatch: error: invalid partition specified: nope" >&2\nexit 1\n')
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")  # submitit looks for it
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    design = fake_design(tmp_path, name="refused", seeds=1)
    (tmp_path / "design.yaml").write_text((tmp_path / "design.yaml").read_text()
                                          + "resources: {cpus: 2, memory: 1GB}\n")
    result = cli("run", str(design), "--plain", "--executor", "slurm", "--partition", "nope",
                 "--slurm", "account=ml")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "sbatch refused the job: sbatch: error: invalid partition specified: nope" in (
        " ".join(result.stdout.split()))
    assert "Traceback" not in result.stderr
    scripts = [p.read_text() for p in kept.iterdir()]
    assert len(scripts) == 2  # one job per trial, none retried
    for line in ("#SBATCH --partition=nope", "#SBATCH --account=ml", "#SBATCH --cpus-per-task=2",
                 "#SBATCH --mem=954M", "#SBATCH --job-name=labcoat-refused-"):
        assert all(line in script for script in scripts), line


def test_jobs_of_a_dead_runner_are_cancelled(tmp_path, monkeypatch):
    """A runner that died left its attempt's job running; the next runner scancels it
    (stand-in sbatch/srun/scancel that record their arguments)."""
    from labcoat.runner.executors.slurm import SlurmExecutor

    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    for tool in ("sbatch", "srun", "scancel"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho {tool} "$@" >> {calls}\n')
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    run_dir = tmp_path / "attempt-1"
    (run_dir / "submitit").mkdir(parents=True)
    (run_dir / "submitit" / "4242_submitted.pkl").write_bytes(b"")
    (run_dir / "submitit" / "4242_0_log.out").write_text("")
    SlurmExecutor(Resources(), partition=None, settings={}).abandon(run_dir)
    assert calls.read_text().split("\n") == ["scancel 4242", ""]


def test_a_program_a_job_or_actor_cannot_start_is_exit_127_with_the_reason(tmp_path):
    """Inside a Slurm job or a Ray actor the supervisor cannot catch the OSError itself:
    the trial reports exit 127 and says why in its stderr, so the failure reads like the
    local executor's and the crash-loop rule stops the retries."""
    from labcoat.runner._local import stderr_tail
    from labcoat.runner.executors.ray import TrialActor
    from labcoat.runner.executors.slurm import run_trial_job

    command = ["/no/such/python", "train.py"]
    job_dir, actor_dir = tmp_path / "job", tmp_path / "actor"
    assert run_trial_job(command, dict(os.environ), str(job_dir), str(tmp_path)) == 127
    actor = TrialActor()
    pid, _, code = actor.start(command, dict(os.environ), str(actor_dir), str(tmp_path), False)
    assert (pid, code) == (None, 127)
    assert actor.stop(1.0) == 127
    for run_dir in (job_dir, actor_dir):
        tail = stderr_tail(run_dir)
        assert "could not start '/no/such/python'" in tail
        assert "No such file or directory" in tail
