"""The Lightning callback under `labcoat run`: a 2 x 3 experiment ends in a verdict, and a
trial killed with SIGKILL resumes from its newest verified checkpoint to the same numbers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("lightning")

from helpers import cli  # noqa: E402

HERE = Path(__file__).parent


def _experiment(directory: Path, design: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "pl_chars.py", directory)
    path = directory / "pl_design.yaml"
    path.write_text(design)
    return path


@pytest.mark.slow
def test_a_lightning_script_runs_as_two_arms_by_three_seeds_and_ends_in_a_verdict(
        home, tmp_path):
    design = _experiment(tmp_path / "exp", (HERE / "pl_design.yaml").read_text())
    cli("run", str(design), "--plain", cwd=design.parent, check=True, timeout=900)
    report = json.loads(cli("report", "pl-letters", "--json", check=True).stdout)
    result = report["results"][0]
    assert [a["arm"] for a in result["arms"]] == ["base", "high_lr"]
    (comparison,) = result["comparisons"]
    assert comparison["verdict"] == "supported", comparison
    show = json.loads(cli("show", "pl-letters", "--json", check=True).stdout)
    assert sorted((t["arm"], t["seed"], t["status"]) for t in show["trials"]) == [
        (arm, seed, "done") for arm in ("base", "high_lr") for seed in (0, 1, 2)]
    items = [json.loads(x) for x in cli("export", "pl-letters", "--items").stdout.splitlines()]
    assert {(i["step"], i["task"]) for i in items} == {(20, "letter_runs"), (40, "letter_runs")}


# Two arms with the same settings: trial b-s0 is the uninterrupted twin of trial a-s0.
TWINS = """name: pl-twins
hypothesis: {claim: c, metric: loss, direction: decrease}
command: "{python} pl_chars.py --lr {lr} --seed {seed} --steps 60"
params: {lr: 0.003}
arms: {a: {control: true}, b: {params: {lr: 0.003}}}
seeds: 1
parallelism: 2
restart: {retries: 1, backoff: 0.2}
"""


def _kill_after_a_sealed_checkpoint(runner: subprocess.Popen, home: Path, trial: str) -> int:
    """SIGKILL `trial` once a checkpoint of step >= 20 is sealed; returns that step."""
    deadline = time.monotonic() + 300
    while True:
        assert runner.poll() is None and time.monotonic() < deadline, "no checkpoint sealed"
        sealed = [int(p.name.split("step=")[1].split(".")[0]) for p in home.glob(
            f"**/{trial}/checkpoints/*.ckpt.labcoat-manifest.json")]
        if sealed and max(sealed) >= 20:
            break
        time.sleep(0.02)
    (journal,) = home.glob(f"**/{trial}/**/journal.jsonl")
    start = json.loads(journal.read_text().splitlines()[0])
    os.kill(start["pid"], signal.SIGKILL)
    return max(sealed)


@pytest.mark.slow
def test_a_killed_lightning_trial_resumes_from_its_newest_verified_checkpoint_exactly(
        home, tmp_path):
    design = _experiment(tmp_path / "twins", TWINS)
    runner = subprocess.Popen([sys.executable, "-m", "labcoat.cli", "run", str(design),
                               "--plain"], cwd=design.parent, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    sealed = _kill_after_a_sealed_checkpoint(runner, home, "a-s0")
    output, _ = runner.communicate(timeout=600)
    assert runner.returncode == 0, output

    show = json.loads(cli("show", "pl-twins", "--json", check=True).stdout)
    attempts = {t["arm"]: (t["status"], t["attempts"]) for t in show["trials"]}
    assert attempts == {"a": ("done", 2), "b": ("done", 1)}
    from labcoat import store

    db = store.open_store()
    with db.session() as session:
        exp = store.find_experiment(session, "pl-twins")
        events = store.events(session, [t.id for t in exp.trials])
    db.close()
    (restored,) = [e for e in events if e.kind == "checkpoint.restored"]
    assert restored.step >= sealed

    rows = [json.loads(x) for x in cli("export", "pl-twins", check=True).stdout.splitlines()]
    by_arm = {arm: {(r["name"], r["step"]): r["value"] for r in rows if r["arm"] == arm}
              for arm in ("a", "b")}
    assert by_arm["a"] == by_arm["b"] and len(by_arm["a"]) >= 60
    items = [json.loads(x) for x in cli("export", "pl-twins", "--items").stdout.splitlines()]
    scores = {arm: {(i["step"], i["item"]): i["score"] for i in items if i["arm"] == arm}
              for arm in ("a", "b")}
    assert scores["a"] == scores["b"] and len(scores["a"]) == 2 * 32
