"""`labcoat import wandb`: offline runs wandb itself wrote (WANDB_MODE=offline, no network),
read through wandb's own reader; every point equals the value logged and the run log's
history as `wandb leet inspect --json` prints it, and the report's per-arm means equal
the runs' summaries as `wandb leet inspect --summary --json` gives them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import cli

pytest.importorskip("wandb")

ARMS, SEEDS, STEPS = ("cosine", "linear"), (0, 1, 2), 30

WRITER = """
import json, sys
import numpy as np
import wandb

root, arms, seeds, steps = sys.argv[1], sys.argv[2].split(","), range(3), int(sys.argv[3])
logged = {}
rng = np.random.default_rng(2)
for arm in arms:
    for seed in seeds:
        run = wandb.init(project="sched", dir=root, group=arm,
                         config={"schedule": {"name": arm}, "seed": seed, "lr": 3e-4})
        values = {}
        for step in range(steps):
            v = float(0.7 + (0.01 if arm == "linear" else 0) + rng.normal(0, 0.02))
            row = {"eval": {"acc": v}, "loss": 1 / (step + 1)}
            if step == 3:  # a media object: its width, height and size are not metrics
                row["sample"] = wandb.Image(np.zeros((4, 6, 3), dtype=np.uint8))
            run.log(row, step=step)
            values[step] = v
        run.finish()
        logged[f"{arm}-s{seed}"] = values
print(json.dumps(logged))
"""


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("wandb")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "WANDB_API_KEY": "", "WANDB_DIR": str(root)}
    done = subprocess.run([sys.executable, "-c", WRITER, str(root), ",".join(ARMS), str(STEPS)],
                          env=env, capture_output=True, text=True, timeout=300, check=True)
    logged = json.loads(done.stdout.strip().splitlines()[-1])
    return root / "wandb", {k: {int(s): v for s, v in d.items()} for k, d in logged.items()}


FLAT_WRITER = """
import sys
import wandb

root = sys.argv[1]
for seed in range(2):
    run = wandb.init(project="flat", dir=root, config={"seed": seed})
    for step in range(140):  # past step 130, whose varint holds value_json's tag bytes
        row = {"loss": 1 / (step + 1) + seed, "tokens": step * 512, "lr": 3e-4}
        if step == 7:
            row.update(loss=float("nan"), lr=float("inf"))
        run.log(row, step=step)
    run.finish()
"""


@pytest.fixture(scope="module")
def flat_runs(tmp_path_factory: pytest.TempPathFactory):
    """Runs whose every key is flat: the layout read in one pass (see _rows_at_once)."""
    root = tmp_path_factory.mktemp("wandb-flat")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "WANDB_API_KEY": "", "WANDB_DIR": str(root)}
    subprocess.run([sys.executable, "-c", FLAT_WRITER, str(root)], env=env, timeout=300,
                   check=True, capture_output=True)
    return root / "wandb"


def _core() -> str:
    """The wandb-core binary that `wandb leet` runs: wandb's own reader of its run logs."""
    from importlib.util import find_spec

    return str(Path(next(iter(find_spec("wandb").submodule_search_locations))) / "bin" /
               "wandb-core")


def _leet(run_file, *flags):
    done = subprocess.run([_core(), "leet", "inspect", "--json", "--no-observability", *flags,
                           "--run-file", str(run_file), str(run_file.parent.parent)],
                          capture_output=True, text=True, check=True)
    return done.stdout


def _leet_history(run_file, key="eval.acc") -> tuple[dict, str, dict[int, float]]:
    """(summary, trial key, step -> value of `key`) as `wandb leet` reads the run log."""
    summary = json.loads(_leet(run_file, "--summary"))
    trial = f"{summary['config']['schedule']['name']}-s{summary['config']['seed']}"
    history = {}
    for line in _leet(run_file).splitlines():
        record = json.loads(line)
        if record["type"] == "history":
            item = record["history"]["item"]
            history[item["_step"]] = item[key]  # wandb flattens nested keys
    return summary, trial, history


def _import(path, experiment="wb", *extra):
    return cli("import", "wandb", str(path), "--experiment", experiment, "--arm-by",
               "schedule.name", "--seed-by", "seed", "--metric", "eval.acc", "--direction",
               "increase", "--control", "cosine", *extra)


def test_every_point_and_each_arms_mean_equal_wandbs_own(home, offline, stored, report_means,
                                                         equal_points):
    root, logged = offline
    done = _import(root)
    assert done.returncode == 0, done.stderr
    assert "imported 6 wandb runs" in done.stdout
    held = stored("wb")
    finals: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for file in sorted(root.glob("offline-run-*/run-*.wandb")):
        summary, key, history = _leet_history(file)
        equal_points(held[key]["eval.acc"], history)
        equal_points(held[key]["eval.acc"], logged[key])  # and what the script logged
        assert held[key]["loss"] == {s: 1 / (s + 1) for s in range(STEPS)}
        assert set(held[key]) == {"eval.acc", "loss"}  # not sample.width, sample.size...
        finals[key.rsplit("-s", 1)[0]].append(summary["summary"]["eval"]["acc"])
    assert report_means("wb") == pytest.approx({a: float(np.mean(v)) for a, v in finals.items()},
                                               rel=1e-12)
    again = _import(root)
    assert again.returncode == 0 and "6 again" in again.stdout
    assert stored("wb") == held


def test_a_damaged_run_log_is_named_and_nothing_is_imported(home, offline, tmp_path):
    import shutil

    root, _ = offline
    broken = tmp_path / "wandb"
    shutil.copytree(root, broken)
    victim = sorted(broken.glob("offline-run-*/run-*.wandb"))[4]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x40
    victim.write_bytes(bytes(data))
    done = _import(broken)
    assert done.returncode != 0
    assert f"{victim}: damaged W&B run log" in done.stderr and "Traceback" not in done.stderr
    assert "no experiment named 'wb'" in cli("show", "wb").stderr


def test_a_missing_mapping_lists_the_config_keys(home, offline):
    root, _ = offline
    done = cli("import", "wandb", str(root), "--experiment", "wb", "--arm-by", "scheduler",
               "--seed-by", "seed")
    assert done.returncode != 0 and "has no key 'scheduler'" in done.stderr
    assert "config.schedule.name (2 values: 'cosine', 'linear')" in done.stderr


def _number(value) -> float:
    """A history value as wandb's reader prints it (JSON: non-finite floats as strings)."""
    return float(value.replace("Infinity", "inf")) if isinstance(value, str) else float(value)


def test_flat_runs_read_in_one_pass_equal_wandbs_own(flat_runs, equal_points, monkeypatch):
    from labcoat.runner import _import_wandb as reader

    def row_by_row(*args):
        pytest.fail("flat runs should be decoded in one pass, not row by row")

    monkeypatch.setattr(reader, "_rows", row_by_row)
    runs = reader.read_wandb(flat_runs)
    assert len(runs) == 2
    for run in runs:
        file = next(Path(run.path).glob("run-*.wandb"))
        history: dict[str, dict[int, float]] = {}
        for line in _leet(file).splitlines():
            row = json.loads(line)
            if row["type"] == "history":
                item = row["history"]["item"]
                for key, value in item.items():
                    if not key.startswith("_"):
                        history.setdefault(key, {})[item["_step"]] = _number(value)
        assert set(run.metrics) == set(history) == {"loss", "tokens", "lr"}
        for key, want in history.items():
            equal_points({s: v for s, (v, _) in run.metrics[key].items()}, want)


def test_a_log_cut_short_is_read_to_its_last_whole_record_as_wandb_reads_it(
        home, offline, tmp_path, stored, equal_points):
    """A run killed mid-write (or still writing) is read as far as it goes, and an empty
    log (a run that never wrote) is left out, each named in a note; `wandb leet` reads
    them alike (the cut one with a warning, the empty one as nothing)."""
    import shutil

    root, _ = offline
    cut = tmp_path / "wandb"
    shutil.copytree(root, cut)
    victim = sorted(cut.glob("offline-run-*/run-*.wandb"))[1]
    data = victim.read_bytes()
    victim.write_bytes(data[:len(data) - 5])  # a writer killed mid-record
    empty = cut / "offline-run-20990101_000000-empty000" / "run-empty000.wandb"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    done = _import(cut)
    assert done.returncode == 0, done.stderr
    assert f"{victim}: the log ends in a record cut short at byte" in done.stdout
    assert f"{empty}: an empty W&B run log (the run never wrote to it); left out" in done.stdout
    assert "imported 6 wandb runs" in done.stdout
    _, key, history = _leet_history(victim)
    equal_points(stored("wb")[key]["eval.acc"], history)
