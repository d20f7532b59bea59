"""labcoat.init / Run: identity from the runner's environment, validation, ad-hoc runs."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import labcoat
from helpers import cli
from labcoat.sdk import read_journal


@pytest.fixture
def trial_env(home, monkeypatch, tmp_path):
    journal = tmp_path / "attempt-1" / "journal.jsonl"
    monkeypatch.setenv("LABCOAT_JOURNAL", str(journal))
    monkeypatch.setenv("LABCOAT_EXPERIMENT", "exp")
    monkeypatch.setenv("LABCOAT_TRIAL", "warmup-s1")
    monkeypatch.setenv("LABCOAT_ATTEMPT", "2")
    monkeypatch.setenv("LABCOAT_SEED", "1")
    monkeypatch.setenv("LABCOAT_PARAMS", json.dumps({"lr": 0.1, "seed": 1}))
    return journal


def test_inside_a_trial_identity_comes_from_the_environment(trial_env):
    run = labcoat.init(total_steps=10)
    assert (run.experiment, run.trial, run.attempt, run.seed) == ("exp", "warmup-s1", 2, 1)
    assert run.params == {"lr": 0.1, "seed": 1}
    run.log(1, loss=np.float32(2.5), lr=1e-3)
    run.log_items(1, "copy", np.array([3, 4]), np.array([1.0, 0.0]))
    run.finish()
    kinds = [r["kind"] for _, r in read_journal(trial_env).records]
    assert kinds == ["start", "log", "items", "finish"]
    records = [r for _, r in read_journal(trial_env).records]
    assert records[0]["total_steps"] == 10
    assert records[1]["metrics"] == {"loss": 2.5, "lr": 1e-3}
    assert records[2]["items"] == ["3", "4"] and records[2]["scores"] == [1.0, 0.0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.log(1, loss="abc"), "metric 'loss' at step 1 is 'abc'"),
        (lambda r: r.log(1, loss=None), "log numbers only"),
        (lambda r: r.log(1, ok=True), "log numbers only"),
        (lambda r: r.log(-1, loss=1.0), "non-negative integer"),
        (lambda r: r.log(1.5, loss=1.0), "non-negative integer"),
        (lambda r: r.log(1), "at least one metric"),
        (lambda r: r.log_items(1, "copy", ["a", "b"], [1.0]), "2 item ids but 1 scores"),
        (lambda r: r.log_items(1, "copy", ["a", "a"], [1.0, 0.0]), "repeated item ids"),
        (lambda r: r.log_items(1, "copy", ["a"], ["x"]), "score of item 'a'"),
        (lambda r: r.log_items(1, "", ["a"], [1.0]), "task must be"),
    ],
)
def test_bad_values_are_rejected_in_the_trial_with_a_clear_message(trial_env, call, message):
    run = labcoat.init()
    with pytest.raises(ValueError, match=message):
        call(run)
    run.finish()
    # nothing invalid reached the journal
    assert [r["kind"] for _, r in read_journal(trial_env).records] == ["start", "finish"]


def test_importing_labcoat_loads_neither_torch_nor_sqlalchemy():
    code = "import sys, labcoat; print(sorted(m for m in ('torch', 'sqlalchemy', 'scipy') " \
           "if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_plain_script_only_journals_and_the_next_read_records_it(home, tmp_path):
    script = tmp_path / "train_me.py"
    script.write_text(textwrap.dedent("""
        import sys
        import labcoat
        run = labcoat.init(seed=7, params={"lr": 0.5})
        for step in range(3):
            run.log(step, loss=1.0 / (step + 1))
        run.finish()
        assert "sqlalchemy" not in sys.modules  # the SDK never opens the store
    """))
    done = subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path,
                          capture_output=True, text=True)
    (journal,) = (home / "adhoc" / "adhoc-train_me" / "main-s7").rglob("journal.jsonl")
    assert f"recorded in {journal}" in " ".join(done.stderr.split())
    assert "labcoat status adhoc-train_me" in done.stderr
    assert not (home / "labcoat.db").exists()

    shown = subprocess.run([sys.executable, "-m", "labcoat.cli", "status", "adhoc-train_me"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "recorded ad-hoc run adhoc-train_me/main-s7" in shown.stderr
    from labcoat import store

    db = store.open_store()
    with db.session() as session:
        exp = store.find_experiment(session, "adhoc-train_me")
        (trial,) = exp.trials
        assert (trial.key, trial.seed, trial.status, trial.params) == (
            "main-s7", 7, "done", {"lr": 0.5})
        points = store.metric_points(session, [trial.id], "loss")
        assert [(p.step, p.value) for p in points] == [(0, 1.0), (1, 0.5), (2, 1 / 3)]
        (attempt,) = trial.attempts
        assert attempt.run_dir == str(journal.parent)
    db.close()


def test_the_exit_hook_finishes_a_script_that_never_calls_finish(home, tmp_path):
    script = tmp_path / "train_me.py"
    script.write_text("import labcoat\nlabcoat.init().log(0, loss=1.0)\n")
    subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path)
    from labcoat import runner, store

    db = store.open_store()
    assert [n.split("/")[0] for n in runner.ingest_adhoc_runs(db)] == ["adhoc-train_me"]
    assert runner.ingest_adhoc_runs(db) == []  # a second reader records nothing twice
    with db.session() as session:
        (trial,) = store.find_experiment(session, "adhoc-train_me").trials
        assert trial.status == "done" and len(trial.attempts) == 1
    db.close()


@pytest.mark.parametrize(("how", "expected"), [
    (["-m", "mypkg"], "adhoc-mypkg"),  # mypkg/__main__.py: not "adhoc-__main"
    (["-m", "mypkg.train"], "adhoc-train"),
    (["-c", "import mypkg.train"], "adhoc-session"),
])
def test_an_adhoc_experiment_is_named_for_what_python_ran(home, tmp_path, how, expected):
    package = tmp_path / "mypkg"
    package.mkdir()
    body = "import labcoat\nlabcoat.init(seed=0).finish()\n"
    for name in ("__init__.py", "__main__.py", "train.py"):
        (package / name).write_text("" if name == "__init__.py" else body)
    subprocess.run([sys.executable, *how], check=True, cwd=tmp_path, capture_output=True)
    assert [p.name for p in (home / "adhoc").iterdir()] == [expected]


def test_runs_of_one_trial_recorded_together_are_said_in_one_line(home, tmp_path):
    script = tmp_path / "again.py"
    script.write_text("import labcoat\nlabcoat.init(seed=0).finish()\n")
    for _ in range(3):
        subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path,
                       capture_output=True)
    said = cli("status", check=True).stderr.strip().splitlines()
    assert said == ["recorded 3 ad-hoc runs of adhoc-again/main-s0"]


def test_an_unfinished_adhoc_run_waits_and_other_runs_are_recorded(home, tmp_path):
    from labcoat import runner, store

    running = labcoat.init(experiment="still-running")
    running.log(0, loss=1.0)
    with labcoat.init(experiment="finished") as run:
        run.log(0, loss=2.0)
    db = store.open_store()
    assert runner.ingest_adhoc_runs(db) == [f"finished/{run.trial}"]
    running.finish()
    assert runner.ingest_adhoc_runs(db) == [f"still-running/{running.trial}"]
    db.close()
