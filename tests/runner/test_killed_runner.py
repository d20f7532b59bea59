"""After `kill -9` of `labcoat run`: status says which trials were interrupted and by whose
death, attempts end at the runner's last sign of life, and running again resumes them
(issue 22, point 6)."""

import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime

from helpers import cli, fake_design, show_now


def _wait_for(condition, timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting for the runner")


def _both_running_with_points():
    shown = show_now("fake")
    return shown is not None and sum(
        t["status"] == "running" and (t["last_step"] or 0) >= 1 for t in shown["trials"]) == 2


def test_status_after_kill_9_says_interrupted_and_run_resumes(home, tmp_path):
    # every trial is held after its step 1 until the gate file exists: the runner is
    # killed with both trials running, however loaded the machine
    gate = tmp_path / "gate"
    design = fake_design(tmp_path, steps=5, seeds=1, parallelism=2,
                         extra=f"--wait-for {gate}")
    runner = subprocess.Popen([sys.executable, "-m", "labcoat.cli", "run", str(design)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(_both_running_with_points)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        killed_at = time.time()
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()

    status = cli("status", "fake", check=True).stdout
    assert f"interrupted (runner pid {runner.pid} gone)" in status, status
    rows = [line for line in status.splitlines() if "-s0" in line]
    assert rows and not any(" running " in line for line in rows), status
    assert "fake: interrupted" in status
    assert "attempts of" in status and " s " in status  # the open attempts' durations shown
    for verb in ("status", "show"):  # the JSON says so too, in its documented statuses
        data = json.loads(cli(verb, "fake", "--json", check=True).stdout)
        assert data["experiment"]["runner"] == f"runner pid {runner.pid} gone", data
        assert all(t["status"] == "running" and t["interrupted"] for t in data["trials"])
    listed = json.loads(cli("status", "--json", check=True).stdout)
    assert [r["status"] for r in listed if r["name"] == "fake"] == ["interrupted"]

    time.sleep(3)  # a resume that closed the attempts "now" would add these seconds
    gate.touch()
    cli("run", str(design), check=True)
    shown = json.loads(cli("show", "fake", "--json", check=True).stdout)
    for trial in shown["trials"]:
        assert trial["status"] == "done" and trial["attempts"] == 2
        first = trial["attempt_history"][0]
        assert first["cause"] == f"interrupted (runner pid {runner.pid} gone)"
        started = datetime.fromisoformat(first["started_at"]).replace(tzinfo=UTC).timestamp()
        # ended at the last heartbeat or journal line, before the kill (the trials die with
        # their runner), not when the second run found the attempt open
        assert 0 < first["seconds"] and started + first["seconds"] <= killed_at + 1.0, first
