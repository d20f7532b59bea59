"""Choosing an executor: each bad choice or missing piece is one clear LabcoatError."""

from __future__ import annotations

import sys

import pytest

from helpers import cli, fake_design
from labcoat.errors import LabcoatError
from labcoat.runner import ExecutorConfig, open_executor, parse_settings
from labcoat.runner.executors.local import LocalExecutor


def test_local_is_the_default():
    assert isinstance(open_executor(ExecutorConfig(), None), LocalExecutor)


@pytest.mark.parametrize("config, message", [
    (dict(name="kubernetes"), "choose local, ray, slurm"),
    (dict(name="ray"), "--address HOST:PORT"),
    (dict(name="local", address="127.0.0.1:6379"),
     "--address is the Ray cluster's HOST:PORT; it needs --executor ray"),
    (dict(name="ray", address="h:1", partition="gpu"),
     "--partition is the Slurm partition to submit to; it needs --executor slurm"),
    (dict(name="local", slurm={"account": "ml"}), "--slurm is .*; it needs --executor slurm"),
    (dict(name="local", options={"namespace": "ml"}),
     "--namespace: no executor takes this setting; executors: local, ray, slurm"),
])
def test_bad_choices(config, message):
    with pytest.raises(LabcoatError, match=message):
        ExecutorConfig(**config)


def test_each_executor_gets_its_own_typed_settings():
    assert ExecutorConfig().settings == ExecutorConfig(name="local").settings
    ray = ExecutorConfig(name="ray", address="h:1").settings
    assert type(ray).__name__ == "RaySettings" and ray.address == "h:1"
    slurm = ExecutorConfig(name="slurm", partition="gpu", slurm={"qos": "high"}).settings
    assert (slurm.partition, slurm.slurm) == ("gpu", {"qos": "high"})
    # the same settings by field name, as an executor without dedicated arguments takes them
    assert ExecutorConfig(name="slurm", options={"partition": "gpu"}).settings.partition == "gpu"


def test_slurm_settings_are_key_value_pairs():
    assert parse_settings(["account=ml", "qos = high", "constraint=a100|h100"]) == {
        "account": "ml", "qos": "high", "constraint": "a100|h100"}
    with pytest.raises(LabcoatError, match="KEY=VALUE"):
        parse_settings(["account"])


def test_missing_packages_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    monkeypatch.setitem(sys.modules, "submitit", None)
    with pytest.raises(LabcoatError, match=r"labcoat\[ray\]"):
        open_executor(ExecutorConfig(name="ray", address="127.0.0.1:1"), None)
    with pytest.raises(LabcoatError, match=r"labcoat\[slurm\]"):
        open_executor(ExecutorConfig(name="slurm"), None)


def test_cli_names_the_bad_executor(home, tmp_path):
    design = fake_design(tmp_path)
    result = cli("run", str(design), "--executor", "mpi")
    assert result.returncode != 0
    assert "'mpi' is not an executor; choose local, ray, slurm" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert not (home / "runs" / "fake").exists()  # refused before anything ran


def test_a_trial_the_executor_lost_counts_as_a_failure():
    """A dead Ray worker or Slurm job is a failure for the MTBF (checkpoint interval) and
    for diagnose, unlike the runner's own stop ("lost (labcoat run was stopped ...)")."""
    from labcoat.diagnose import cause_of_end
    from labcoat.runner._restart import is_failure

    for cause in ("worker lost: the Ray worker running it on n7 died (The actor died "
                  "unexpectedly before finishing this task.)",
                  "job lost: slurm job 42 ended without a result (FINISHED: no output)"):
        assert is_failure(cause)
        assert cause_of_end(cause, -9).cause == "signal"
    assert not is_failure("lost (labcoat run was stopped while it ran)")


def test_local_trials_get_as_many_threads_as_resources_cpus(home, tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    seen, script = tmp_path / "threads.txt", tmp_path / "threads.py"
    script.write_text(f"import os\nopen({str(seen)!r}, 'a').write(os.environ['OMP_NUM_THREADS'] "
                      "+ ' ')\n")
    design = tmp_path / "design.yaml"
    design.write_text(f"""name: threads
hypothesis: {{claim: c, metric: loss, direction: decrease}}
command: "{{python}} {script} {{seed}}"
arms: {{a: {{control: true}}, b: {{params: {{}}}}}}
seeds: 1
parallelism: 2
resources: {{cpus: 3}}
""")
    cli("run", str(design), check=True)
    assert seen.read_text().split() == ["3", "3"]  # not cpu_count // parallelism (= 1 here)
