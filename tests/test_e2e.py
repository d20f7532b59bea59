"""End to end through the CLI on a miniature tinylm experiment: init, run, kill, resume, report."""

import json
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from helpers import cli, show_now

STEPS, EVAL_EVERY, EVAL_ITEMS, TASKS = 60, 30, 12, 10


def _miniature(directory):
    cli("init", str(directory), check=True)
    design = directory / "design.yaml"
    text = design.read_text()
    text = re.sub(r"(?m)^  steps: \d+", f"  steps: {STEPS}", text)
    text = text.replace("--seed {seed}", "--seed {seed} --width 32")
    # budget 0: every eval scores the whole set (a budget sizes it by measured time)
    plan = f"{{every: {EVAL_EVERY}, items_per_task: {EVAL_ITEMS}, budget: 0}}"
    text = re.sub(r"(?m)^eval: .*$", f"eval: {plan}", text)
    text = text.replace("warmup: 500", "warmup: 20")
    design.write_text(text)
    return design


def _trials():
    result = cli("show", "warmup-demo", "--json")
    return json.loads(result.stdout)["trials"] if result.returncode == 0 else []


def _trials_now():  # polled while trials train: read in-process (see helpers.show_now)
    shown = show_now("warmup-demo")
    return shown["trials"] if shown else []


@pytest.mark.needs("torch")  # the demo design trains tinylm
def test_init_run_kill_resume_report(home, tmp_path):
    design = _miniature(tmp_path / "exp")
    runner = subprocess.Popen([sys.executable, "-m", "labcoat.cli", "run", str(design)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not any(t["status"] == "done" for t in _trials_now()):
        assert time.monotonic() < deadline and runner.poll() is None, "no trial finished"
        time.sleep(0.2)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    done_before = {t["key"] for t in _trials() if t["status"] == "done"}
    assert 0 < len(done_before) < 6

    cli("run", str(design), check=True)
    trials = {t["key"]: t for t in _trials()}
    assert len(trials) == 6 and {t["status"] for t in trials.values()} == {"done"}
    assert all(trials[k]["attempts"] == 1 for k in done_before)

    points = [json.loads(x) for x in cli("export", "warmup-demo").stdout.splitlines()]
    keys = Counter((p["trial"], p["name"], p["step"]) for p in points)
    assert max(keys.values()) == 1
    losses = {(p["trial"], p["step"]) for p in points if p["name"] == "loss"}
    assert len(losses) == 6 * STEPS
    items = [json.loads(x) for x in cli("export", "warmup-demo", "--items").stdout.splitlines()]
    per_eval = Counter((i["trial"], i["step"]) for i in items)
    short = {k: n for k, n in per_eval.items() if n != TASKS * EVAL_ITEMS}
    assert len(per_eval) == 6 * (STEPS // EVAL_EVERY) and not short, (per_eval, short)
    assert len({(i["trial"], i["task"], i["item"], i["step"]) for i in items}) == len(items)

    report = json.loads(cli("report", "warmup-demo", "--json", check=True).stdout)
    assert [a["arm"] for a in report["results"][0]["arms"]] == ["control", "warmup"]
    assert len(report["results"][0]["tasks"]) == TASKS
    (comparison,) = report["results"][0]["comparisons"]
    assert comparison["verdict"] in {"supported", "refuted", "inconclusive"}
    assert comparison["reason"]
    text = cli("report", "warmup-demo", check=True).stdout
    assert "Verdict for warmup vs control" in text


def test_status_lists_experiments_and_bad_input_is_one_message(home, tmp_path):
    assert "no experiments yet" in cli("status", check=True).stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nhypotesis: {}\n")
    result = cli("run", str(bad))
    assert result.returncode == 2
    assert f"{bad}:2: unknown key 'hypotesis'; did you mean 'hypothesis'?" in result.stderr
    assert "Traceback" not in result.stderr
    again = cli("init", str(tmp_path / "exp"))
    assert again.returncode == 0
    exists = cli("init", str(tmp_path / "exp"))
    assert exists.returncode == 2 and "already exists" in exists.stderr
