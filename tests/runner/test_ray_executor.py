"""The ray executor against a real local Ray head on 127.0.0.1.

A tinylm experiment runs through Ray with two arms that train identically (they
differ only in a label); the Ray worker hosting one trial is SIGKILLed mid-run.
The supervisor must restart that trial from its last verified checkpoint, and it
must end with the same final parameters, bit for bit, and the same metrics (each
point once) as its uninterrupted twin.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from helpers import cli, fake_design, recorded_once

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

SRC = Path(__file__).resolve().parents[2] / "src"
# Ray resolves 127.0.0.1 to the machine's outward address unless told it is not
# a cluster node; this keeps every Ray connection on the loopback interface.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head():
    """`ray start --head` on 127.0.0.1 with 2 CPUs, once for this module (stopped after it,
    so the rest of the suite does not share the CPUs with an idle cluster); its address."""
    port = _free_port()
    temp = Path(tempfile.mkdtemp(prefix="lc-ray-"))  # short: Ray's socket paths must fit
    env = {**os.environ, **LOOPBACK,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    log = open(temp / "ray-start.log", "w")
    saved = {k: os.environ.get(k) for k in LOOPBACK}
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", "--port", str(port),
         "--num-cpus", "2", "--include-dashboard=false", "--object-store-memory", "80000000",
         "--disable-usage-stats", "--temp-dir", str(temp), "--block"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 180
        while "Ray runtime started" not in (temp / "ray-start.log").read_text():
            assert head.poll() is None, (temp / "ray-start.log").read_text()
            assert time.time() < deadline, "ray start did not finish in 180 s"
            time.sleep(0.2)
        os.environ.update(LOOPBACK)
        yield f"127.0.0.1:{port}"
    finally:
        # Every process of the head (GCS, raylet, workers) is in its session: kill them
        # by process group (`ray stop` would stop every Ray cluster on the machine).
        os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        log.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(temp, ignore_errors=True)


def _design(root: Path, name: str, *, resources: str = "") -> tuple[Path, Path]:
    final = root / name / "final"
    final.mkdir(parents=True)
    path = root / name / "design.yaml"
    path.write_text(f"""name: {name}
hypothesis: {{claim: c, metric: loss, direction: decrease}}
command: "{{python}} -m labcoat.workloads.tinylm --steps 240 --width 16 --depth 1 --heads 2
  --batch-size 16 --eval-every 120 --eval-items 5 --eval-budget 0 --checkpoint-every 10 --threads 1
  --seed {{seed}} --lr 0.01 --save-final {{final}}/{{label}}.pt"
params: {{label: a, final: "{final}"}}
arms: {{a: {{control: true}}, b: {{params: {{label: b}}}}}}
seeds: 1
parallelism: 2
restart: {{retries: 2, backoff: 0.2}}
{resources}""")
    return path, final


def _saved_steps(journal: Path) -> list[int]:
    from labcoat.sdk import read_journal

    if not journal.exists():
        return []
    return [r["step"] for _, r in read_journal(journal).records
            if r.get("kind") == "event" and r.get("event") == "checkpoint.saved"]


def _points_in_store(experiment: str, trial: str) -> int:
    from labcoat import store
    from labcoat.errors import LabcoatError

    db = store.open_store()
    try:
        with db.session() as session:
            found = store.find_experiment(session, experiment)
            ids = [t.id for t in found.trials if t.key == trial]
            return len(store.metric_points(session, ids, "loss"))
    except LabcoatError:  # not registered yet
        return 0
    finally:
        db.close()


def _trial_process(home: Path, trial: str) -> int | None:
    """The pid of the running trial `trial` of this test's home, found by its environment."""
    want = {f"LABCOAT_TRIAL={trial}".encode(), f"LABCOAT_HOME={home}".encode()}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = set((entry / "environ").read_bytes().split(b"\0"))
            except OSError:
                continue
            if want <= environ:
                return int(entry.name)
    return None


def _parent(pid: int) -> tuple[int, str]:
    stat = Path(f"/proc/{pid}/stat").read_text()
    ppid = int(stat.rsplit(")", 1)[1].split()[1])
    cmdline = Path(f"/proc/{ppid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ppid, cmdline


def test_killed_ray_worker_restarts_trial_from_checkpoint(home, tmp_path, ray_head):
    remote, final = _design(tmp_path, "ray")
    runner = subprocess.Popen(
        [sys.executable, "-m", "labcoat.cli", "run", str(remote), "--plain",
         "--executor", "ray", "--address", ray_head],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    journal = home / "runs" / "ray" / "a-s0" / "attempt-1" / "journal.jsonl"
    deadline = time.time() + 240
    # two verified checkpoints, and its journal reached the store while it runs; then the kill
    while len(_saved_steps(journal)) < 2 or not _points_in_store("ray", "a-s0"):
        assert runner.poll() is None, runner.communicate()[0]
        assert time.time() < deadline, "trial a-s0 saved no checkpoint through Ray in 240 s"
        time.sleep(0.05)
    trial = _trial_process(home, "a-s0")
    assert trial is not None, "trial a-s0 is not running on this machine"
    worker, cmdline = _parent(trial)
    assert "TrialActor" in cmdline, cmdline  # the trial runs inside a Ray worker
    os.kill(worker, signal.SIGKILL)
    out, _ = runner.communicate(timeout=300)
    assert runner.returncode == 0, out
    assert "2 trial(s) finished now" in out
    assert "worker lost: the Ray worker running it on" in out

    expected = torch.load(final / "b.pt", weights_only=True)  # the uninterrupted twin
    found = torch.load(final / "a.pt", weights_only=True)
    assert expected.keys() == found.keys()
    for key in expected:
        assert torch.equal(expected[key], found[key]), f"{key} differs"
    points, items, attempts = recorded_once("ray")
    assert attempts == {"a-s0": 2, "b-s0": 1}, attempts

    def twin(rows: dict, trial: str) -> dict:
        return {key[1:]: value for key, value in rows.items() if key[0] == trial}

    assert twin(points, "a-s0") == twin(points, "b-s0")
    assert len(twin(points, "a-s0")) >= 240  # loss at every step, once
    assert twin(items, "a-s0") == twin(items, "b-s0") != {}
    second = home / "runs" / "ray" / "a-s0" / "attempt-2" / "journal.jsonl"
    from labcoat.sdk import read_journal

    restored = [r for _, r in read_journal(second).records
                if r.get("kind") == "event" and r.get("event") == "checkpoint.restored"]
    assert restored and restored[0]["step"] >= 20  # resumed, not started over


def test_a_hung_trial_in_ray_is_stopped_and_restarted(home, tmp_path, ray_head):
    """Hang detection reaches into the actor: the trial is stopped, its attempt recorded
    as hung, and the restart (which does not hang) finishes it."""
    design = fake_design(tmp_path, name="hung", steps=3, seeds=1,
                         extra="--hang-at 2 --only-attempt 1 --heartbeat-timeout 3")
    result = cli("run", str(design), "--plain", "--executor", "ray", "--address", ray_head)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hang: no journal line for 3 s" in result.stdout
    points, _, attempts = recorded_once("hung")
    assert attempts == {"base-s0": 2, "better-s0": 2}
    assert sorted(step for (_, name, step) in points if name == "loss") == [1, 1, 2, 2, 3, 3]
    assert _trial_process(home, "base-s0") is None  # the hung process was stopped, not left


def test_ray_refuses_resources_no_node_has(home, tmp_path, ray_head):
    path, _ = _design(tmp_path, "big", resources="resources: {cpus: 64, memory: 1GB}\n")
    result = cli("run", str(path), "--executor", "ray", "--address", ray_head)
    assert result.returncode != 0
    assert "cpus=64" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_ray_address_with_no_cluster_says_how_to_start_one():
    from labcoat.errors import LabcoatError
    from labcoat.runner.executors.ray import _check_reachable

    port = _free_port()  # nothing listens there
    with pytest.raises(LabcoatError, match=f"ray start --head --port {port}"):
        _check_reachable(f"127.0.0.1:{port}")
    with pytest.raises(LabcoatError, match="not HOST:PORT"):
        _check_reachable("127.0.0.1")
