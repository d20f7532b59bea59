"""Issue 30: an ad-hoc script killed before its exit hook (SIGKILL, the OOM killer) is not
lost: once its process is gone the next read records what it journaled, as failed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from helpers import cli

KILLED = """
import os, signal, sys
import labcoat
run = labcoat.init(experiment="killed", seed=0)
for step in range(5):
    run.log(step, loss=1.0 / (step + 1))
if sys.argv[1:] == ["wait"]:
    print("logged", flush=True)
    sys.stdin.readline()  # the test holds it running
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_adhoc_run_is_recorded_as_failed_with_what_it_logged(home, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(KILLED))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == -9
    status = cli("status", "killed", check=True)
    assert "recorded ad-hoc run killed/main-s0 (process" in " ".join(status.stderr.split())
    assert "ended without finishing (killed?)" in " ".join(status.stderr.split())
    (trial,) = json.loads(cli("status", "killed", "--json", check=True).stdout)["trials"]
    assert trial["status"] == "failed" and trial["last_step"] == 4
    assert trial["cause"].startswith("ad-hoc run: process ")
    points = [json.loads(p) for p in cli("export", "killed", check=True).stdout.splitlines()]
    assert [(p["step"], p["value"]) for p in points] == [(s, 1.0 / (s + 1)) for s in range(5)]
    assert "recorded" not in cli("status", "killed", check=True).stderr  # once


def test_a_running_adhoc_run_is_not_recorded_until_it_ends(home, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(KILLED))
    running = subprocess.Popen([sys.executable, str(script), "wait"], cwd=tmp_path, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert running.stdout.readline().strip() == "logged"
        assert "killed" not in cli("status").stdout  # alive: it waits
    finally:
        running.stdin.write("\n")
        running.stdin.close()
        running.wait(timeout=60)
    assert "killed" in cli("status", check=True).stdout
