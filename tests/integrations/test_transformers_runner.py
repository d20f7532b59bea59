"""The Trainer callback under `labcoat run`: a 2 x 3 experiment ends in a verdict, and a trial
killed with SIGKILL resumes from its newest verified checkpoint to the same numbers."""

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

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from helpers import cli  # noqa: E402

HERE = Path(__file__).parent
WALL_CLOCK = ("_runtime", "_per_second")  # timings: never equal between two runs


def _experiment(directory: Path, design: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "hf_chars.py", directory)
    path = directory / "hf_design.yaml"
    path.write_text(design or (HERE / "hf_design.yaml").read_text())
    return path


@pytest.mark.slow
def test_a_trainer_script_runs_as_two_arms_by_three_seeds_and_ends_in_a_verdict(home, tmp_path):
    design = _experiment(tmp_path / "exp")
    cli("run", str(design), "--plain", cwd=design.parent, check=True, timeout=900)
    report = json.loads(cli("report", "hf-letters", "--json", check=True).stdout)
    result = report["results"][0]
    assert [a["arm"] for a in result["arms"]] == ["base", "high_lr"]
    (comparison,) = result["comparisons"]
    assert comparison["verdict"] == "supported", comparison
    show = json.loads(cli("show", "hf-letters", "--json", check=True).stdout)
    assert sorted((t["arm"], t["seed"], t["status"]) for t in show["trials"]) == [
        (arm, seed, "done") for arm in ("base", "high_lr") for seed in (0, 1, 2)]
    points = [json.loads(x) for x in cli("export", "hf-letters").stdout.splitlines()]
    assert {p["step"] for p in points if p["name"] == "loss"} == set(range(1, 41))
    items = [json.loads(x) for x in cli("export", "hf-letters", "--items").stdout.splitlines()]
    assert {(i["step"], i["task"]) for i in items} == {(20, "letter_runs"), (40, "letter_runs")}


# Two arms with the same settings: trial b-s0 is the uninterrupted twin of trial a-s0.
TWINS = """name: hf-twins
hypothesis: {claim: c, metric: loss, direction: decrease}
command: "{python} hf_chars.py --lr {lr} --seed {seed} --steps 60"
params: {lr: 0.003}
arms: {a: {control: true}, b: {params: {lr: 0.003}}}
seeds: 1
parallelism: 2
restart: {retries: 1, backoff: 0.2}
"""


def _export(name: str) -> dict:
    rows = [json.loads(x) for x in cli("export", name, check=True).stdout.splitlines()]
    return {(r["arm"], r["name"], r["step"]): r["value"] for r in rows
            if not r["name"].endswith(WALL_CLOCK)}


def _kill_after_a_sealed_checkpoint(runner: subprocess.Popen, home: Path, trial: str) -> int:
    """SIGKILL `trial` once a checkpoint of step >= 20 is sealed; returns that step."""
    deadline = time.monotonic() + 300
    while True:
        assert runner.poll() is None and time.monotonic() < deadline, "no checkpoint sealed"
        sealed = [int(p.parent.name.split("-")[1]) for p in home.glob(
            f"**/{trial}/checkpoints/checkpoint-*/labcoat-manifest.json")]
        if sealed and max(sealed) >= 20:
            break
        time.sleep(0.02)
    (journal,) = home.glob(f"**/{trial}/**/journal.jsonl")
    start = json.loads(journal.read_text().splitlines()[0])
    os.kill(start["pid"], signal.SIGKILL)
    return max(sealed)


@pytest.mark.slow
def test_a_killed_trial_resumes_from_its_newest_verified_checkpoint_to_the_same_numbers(
        home, tmp_path):
    design = _experiment(tmp_path / "twins", TWINS)
    runner = subprocess.Popen([sys.executable, "-m", "labcoat.cli", "run", str(design),
                               "--plain"], cwd=design.parent, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    sealed = _kill_after_a_sealed_checkpoint(runner, home, "a-s0")
    output, _ = runner.communicate(timeout=600)
    assert runner.returncode == 0, output

    show = json.loads(cli("show", "hf-twins", "--json", check=True).stdout)
    attempts = {t["arm"]: (t["status"], t["attempts"]) for t in show["trials"]}
    assert attempts == {"a": ("done", 2), "b": ("done", 1)}
    from labcoat import store

    db = store.open_store()
    with db.session() as session:
        exp = store.find_experiment(session, "hf-twins")
        events = store.events(session, [t.id for t in exp.trials])
    db.close()
    (restored,) = [e for e in events if e.kind == "checkpoint.restored"]
    assert restored.step >= sealed  # the newest sealed one (a later one may have been sealed)

    points = _export("hf-twins")
    found = {k[1:]: v for k, v in points.items() if k[0] == "a"}
    expected = {k[1:]: v for k, v in points.items() if k[0] == "b"}
    assert found.keys() == expected.keys()
    differ = {k for k in expected if found[k] != expected[k]}
    # train_loss is Trainer's mean over the steps of *this* train() call: the resumed call
    # averages the steps after the checkpoint only (see docs/integrations-transformers.md)
    assert differ == {("train_loss", 60)}, sorted(differ)
    items = [json.loads(x) for x in cli("export", "hf-twins", "--items").stdout.splitlines()]
    by_arm = {arm: {(i["step"], i["item"]): i["score"] for i in items if i["arm"] == arm}
              for arm in ("a", "b")}
    assert by_arm["a"] == by_arm["b"] and len(by_arm["a"]) == 2 * 32
