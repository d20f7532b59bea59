"""Issue 30: a value logged again at a step the run already logged is never lost without a
word, and a resumed attempt re-logging its steps stays correct and quiet.

Every test runs the user's script as a real process and reads the real SQLite store
through the real CLI, as the user would."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import cli
from labcoat.sdk import read_journal

EPOCHS = """
import labcoat
run = labcoat.init(experiment="epochs", seed=1)
for epoch in range(3):
    for step in range(4):          # the bug: a per-epoch counter, restarting at 0
        run.log(step, loss=10.0 * epoch + step)
run.log(3, acc=0.5)                # another metric at a logged step: no repeat
run.log_items(3, "add", ["a", "b"], [1, 0])
run.log_items(3, "add", ["c"], [1])        # more items of the same eval: no repeat
run.log_items(3, "add", ["b"], [1])        # item b again at step 3: a repeat
run.finish()
"""


def _script(tmp_path: Path, code: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    return path


def test_a_repeated_step_warns_once_keeps_the_last_value_and_shows_in_status(home, tmp_path):
    done = subprocess.run([sys.executable, str(_script(tmp_path, EPOCHS))], cwd=tmp_path,
                          capture_output=True, text=True, check=True)
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    # one line when 'loss' first repeats, one for the item, one summary at the end
    assert len(warnings) == 3, done.stderr
    assert "'loss' was logged again at step 0: the store keeps the later value" in warnings[0]
    assert "use a global step" in warnings[0]
    assert "task 'add' was logged again at step 3" in warnings[1]
    assert "1 repeated item(s)" in warnings[1]
    assert "'loss' 8 times" in warnings[2]  # epochs 1 and 2 re-logged steps 0..3

    # nothing is lost from the journal: all 12 loss values are there
    (journal,) = (home / "adhoc" / "epochs").rglob("journal.jsonl")
    logged = [r["metrics"]["loss"] for _, r in read_journal(journal).records
              if r["kind"] == "log" and "loss" in r["metrics"]]
    assert logged == [10.0 * e + s for e in range(3) for s in range(4)]

    status = cli("status", "epochs", "--json", check=True)
    (trial,) = json.loads(status.stdout)["trials"]
    rules = [(a["step"], a["rule"], a["severity"]) for a in trial["alerts"]]
    assert rules.count((0, "log.overwritten", "warning")) == 1
    assert len(rules) == 3
    shown = cli("status", "epochs", check=True)
    assert "log.overwritten" in shown.stdout and "'loss' was logged again" in shown.stdout

    # the store (and export, curves, verdicts, which read it) keeps the last value per step
    exported = [json.loads(line) for line in cli("export", "epochs", check=True)
                .stdout.splitlines()]
    loss = [(p["step"], p["value"]) for p in exported if p["name"] == "loss"]
    assert loss == [(s, 20.0 + s) for s in range(4)]
    items = [json.loads(line) for line in cli("export", "epochs", "--items", check=True)
             .stdout.splitlines()]
    assert sorted((i["item"], i["score"]) for i in items) == [("a", 1.0), ("b", 1.0),
                                                              ("c", 1.0)]


def test_steps_logged_out_of_order_but_never_twice_are_quiet(home, tmp_path):
    script = _script(tmp_path, """
        import labcoat
        run = labcoat.init(experiment="ooo")
        for step in (10, 5, 20, 7, 6):
            run.log(step, loss=float(step))
        run.finish()
    """)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, check=True)
    assert "warning" not in done.stderr
    exported = cli("export", "ooo", check=True).stdout.splitlines()
    assert [json.loads(p)["step"] for p in exported] == [5, 6, 7, 10, 20]


RESUMING = """
import os, sys
import labcoat
run = labcoat.init()
attempt = int(os.environ["LABCOAT_ATTEMPT"])
# attempt 1 reaches step 5 and crashes; attempt 2 resumes from its checkpoint at step 3
for step in range(0, 6) if attempt == 1 else range(3, 8):
    run.log(step, loss=100.0 * attempt + step)
if attempt == 1:
    sys.exit(3)
run.finish()
"""


def test_a_resumed_attempt_relogging_its_steps_is_correct_and_quiet(home, tmp_path):
    script = _script(tmp_path, RESUMING)
    design = tmp_path / "design.yaml"
    design.write_text(textwrap.dedent(f"""
        name: resumed
        command: "{{python}} {script}"
        arms:
          base: {{control: true}}
          other: {{}}
        seeds: 1
        restart: {{retries: 1, backoff: 0}}
    """), encoding="utf-8")
    cli("run", str(design), check=True)
    trials = json.loads(cli("status", "resumed", "--json", check=True).stdout)["trials"]
    for trial in trials:
        assert trial["attempts"] == 2 and trial["status"] == "done"
        assert trial["alerts"] == []  # a resume re-logging steps is no repeat
    logs = cli("logs", "resumed", "--all", check=True).stdout
    assert "logged again" not in logs
    exported = [json.loads(line) for line in cli("export", "resumed", check=True)
                .stdout.splitlines()]
    # steps 0-2 from attempt 1; 3-7 from attempt 2, which replaced attempt 1's 3-5
    assert [(p["step"], p["value"]) for p in exported if p["arm"] == "base"] == (
        [(s, 100.0 + s) for s in range(3)] + [(s, 200.0 + s) for s in range(3, 8)])
