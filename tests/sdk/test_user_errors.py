"""Issue 30: what a user gets wrong in a script ends in one clear line, never a raw
traceback from deep inside labcoat, a run that never reaches the store, or an argument
dropped without a word. Scripts run as real processes; the store is the real SQLite file.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import cli
from labcoat.sdk import read_journal


def _run(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(code), encoding="utf-8")
    import os

    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, **env})


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    """The exception's line (the exit hook may say where the failed run was journaled)."""
    return [x for x in done.stderr.splitlines() if re.match(r"\w+Error: ", x)][-1]


def test_an_experiment_name_no_verb_could_address_is_refused_at_init(home, tmp_path):
    done = _run(tmp_path, """
        import labcoat
        run = labcoat.init(experiment="team/exp1")
        run.log(0, loss=1.0)
    """)
    assert done.returncode == 1
    assert "recorded" not in done.stderr  # it used to claim a run the store never saw
    assert _last_line(done) == (
        "ValueError: labcoat.init: experiment='team/exp1' is not a name labcoat can record: "
        "use letters, digits, '.', '_' and '-' (starting with a letter or digit, at most 100 "
        "characters), e.g. experiment='team-exp1'")
    assert not (home / "adhoc").exists()


def test_a_valid_name_reaches_the_store_and_every_verb(home, tmp_path):
    done = _run(tmp_path, """
        import labcoat
        with labcoat.init(experiment="team-exp1.v2_a", arm="b.1", seed=3) as run:
            run.log(0, loss=1.0)
    """)
    assert done.returncode == 0, done.stderr
    assert "team-exp1.v2_a" in cli("status", check=True).stdout
    shown = json.loads(cli("show", "team-exp1.v2_a", "--json", check=True).stdout)
    assert [(t["key"], t["arm"]) for t in shown["trials"]] == [("b.1-s3", "b.1")]
    assert cli("export", "team-exp1.v2_a", check=True).stdout.count("\n") == 1


def test_a_script_name_that_is_no_valid_name_still_makes_an_addressable_experiment(
        home, tmp_path):
    script = tmp_path / "my train (copy).py"
    script.write_text("import labcoat\nlabcoat.init().log(0, loss=1.0)\n")
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True,
                   capture_output=True)
    assert "adhoc-my-train-copy" in cli("status", check=True).stdout
    cli("export", "adhoc-my-train-copy", check=True)


def test_the_sdk_accepts_the_names_a_design_accepts():
    from labcoat.sdk._run import NAME, NAME_MAX
    from labcoat.spec._schema import NAME as SPEC_NAME
    from labcoat.spec._schema import Design

    for name in ("exp1", "a.b_c-d", "9x", "team/exp1", "-x", ".x", "a b", "ü", "x:y", "_"):
        assert bool(NAME.fullmatch(name)) == bool(re.match(SPEC_NAME, name)), name
    lengths = [m.max_length for m in Design.model_fields["name"].metadata
               if hasattr(m, "max_length")]
    assert lengths == [NAME_MAX]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("run.log(1, tokens=10**400)",
         "ValueError: run.log: metric 'tokens' at step 1 is an integer of about 1e400, beyond "
         "a float's range (1.8e308); log it scaled (e.g. in millions) or as its log10"),
        ("run.log(10**30, loss=1.0)",
         "ValueError: run.log: step 1000000000000000000000000000000 is above 2**63 - 1, the "
         "largest the store keeps; log a step count (or tokens seen) that fits"),
        ("run.log(1, **{'': 1.0})",
         "ValueError: run.log: metric name must be a non-empty string of at most 200 "
         "characters, got '' (0 characters); use a shorter stable name (an index or a hash "
         "for an item)"),
        ("run.log(1, **{'x' * 300: 1.0})", "(300 characters)"),
        ("run.log_items(1, 'qa', ['q' * 201], [1.0])",
         "run.log_items: an item id of task 'qa' must be a non-empty string of at most 200"),
        ("run.log_items(1, 'qa', ['a', 'b'], [1.0])",
         "ValueError: run.log_items: task 'qa' has 2 item ids but 1 scores; pass one score "
         "per item"),
        ("run.log(True, loss=1.0)", "step must be a non-negative integer, got True"),
        ("run.log(1, loss=None)", "metric 'loss' at step 1 is None (NoneType); log numbers only"),
        ("run.log(1, loss='0.5')", "is '0.5' (str); log numbers only"),
        ("run.event('note', data=object())", "cannot journal this event record: <object"),
        ("run.event('note', step=-1)", "run.event: step must be a non-negative integer, got -1"),
        ("run.log_items(1, 'qa', 'abc', [1, 1, 1])",
         "ValueError: run.log_items: item_ids of task 'qa' must be a list (or array) with one "
         "entry per item, got 'abc' (str)"),
        ("import numpy; run.log(2, loss=numpy.array([1.0, 2.0]))",
         "ValueError: run.log: metric 'loss' at step 2 is an array of shape (2,), not one "
         "number; log its mean (or one metric per element)"),
        ("labcoat.init(params='lr=0.1')", "params must be a dict of the run's settings, got "
         "'lr=0.1' (str)"),
        ("labcoat.init(total_steps=-5)", "total_steps=-5 must be a positive integer"),
        ("labcoat.init(seed='7')", "seed='7' must be an integer"),
    ],
)
def test_bad_values_end_in_one_clear_line_naming_them(home, tmp_path, code, expected):
    done = _run(tmp_path, f"""
        import labcoat
        run = labcoat.init(experiment="bad")
        {code}
    """)
    assert done.returncode == 1
    assert expected in _last_line(done)
    assert "During handling" not in done.stderr  # one error, not a chain


def test_nan_and_inf_are_kept_as_evidence_of_a_broken_run(home, tmp_path):
    done = _run(tmp_path, """
        import labcoat
        with labcoat.init(experiment="diverged") as run:
            run.log(1, loss=float("nan"), grad=float("inf"))
    """)
    assert done.returncode == 0, done.stderr
    points = [json.loads(p) for p in cli("export", "diverged", check=True).stdout.splitlines()]
    assert sorted((p["name"], p["value"]) for p in points) == [("grad", None), ("loss", None)]
    diagnosed = cli("diagnose", "diverged")
    assert "nan" in (diagnosed.stdout + diagnosed.stderr).lower()


def test_an_unwritable_home_is_one_line_naming_it(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = _run(tmp_path, "import labcoat\nlabcoat.init()\n",
                LABCOAT_HOME=str(blocker / "home"))
    assert done.returncode == 1
    assert "During handling" not in done.stderr
    last = _last_line(done)
    assert last.startswith(f"OSError: labcoat.init: cannot write this run's journal under "
                           f"LABCOAT_HOME={blocker / 'home'} (Not a directory")
    assert last.endswith("set LABCOAT_HOME to a writable directory")


def test_init_arguments_the_runner_overrides_are_said_not_dropped(home, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import labcoat
        run = labcoat.init(experiment="mine", seed=99, params={"lr": 0.5, "width": 64})
        print(f"seed in use: {run.seed}")
        run.log(0, loss=1.0)
        run.finish()
    """))
    design = tmp_path / "design.yaml"
    design.write_text(textwrap.dedent(f"""
        name: overridden
        command: "{{python}} {script}"
        params: {{lr: 0.1}}
        arms:
          base: {{control: true}}
          other: {{}}
        seeds: [4]
    """))
    cli("run", str(design), check=True)
    logs = cli("logs", "overridden", "--trial", "base-s4", "--all", check=True).stdout
    assert "seed in use: 4" in logs  # the design's seed wins ...
    line = next(x for x in logs.splitlines() if "labcoat: warning" in x)
    # ... and the script is told, with both values and why
    assert "the design names this trial (overridden/base-s4)" in line
    assert "experiment='mine' (the runner's: 'overridden')" in line
    assert "seed=99 (the runner's: 4)" in line
    assert "params['lr']=0.5 (the runner's: 0.1)" in line
    assert "params 'width' (not in the design: not recorded)" in line
    journal = Path(json.loads(cli("status", "overridden", "--json", check=True).stdout)
                   ["trials"][0]["run_dir"]) / "journal.jsonl"
    events = [r for _, r in read_journal(journal).records if r["kind"] == "event"]
    assert [(e["event"], e["level"]) for e in events] == [("init.overridden", "warning")]


def test_init_arguments_equal_to_the_runners_say_nothing(home, tmp_path, monkeypatch):
    import labcoat

    journal = tmp_path / "journal.jsonl"
    for name, value in (("JOURNAL", str(journal)), ("EXPERIMENT", "exp"), ("TRIAL", "a-s1"),
                        ("ARM", "a"), ("SEED", "1"), ("PARAMS", '{"lr": 0.1}')):
        monkeypatch.setenv(f"LABCOAT_{name}", value)
    import numpy as np

    run = labcoat.init(experiment="exp", arm="a", seed=1, params={"lr": np.float32(0.1)})
    run.finish()
    assert [r["kind"] for _, r in read_journal(journal).records] == ["start", "finish"]


SWEEP = """
import labcoat
for lr in (0.1, 0.2):
    with labcoat.init(experiment="sweep", seed=0, params={"lr": lr}) as run:
        run.log(0, loss=lr)
"""


def test_a_run_that_becomes_the_next_attempt_of_an_earlier_one_says_so(home, tmp_path):
    first = _run(tmp_path, SWEEP)
    assert first.returncode == 0, first.stderr
    warnings = [x for x in first.stderr.splitlines() if "warning" in x]
    assert len(warnings) == 1  # the second init of the same trial, not the first
    assert warnings[0].startswith("labcoat: warning: ad-hoc trial main-s0 of sweep was run "
                                  "before (1 run(s) under ")
    assert "its values replace theirs in the store at every step it logs" in warnings[0]
    assert "give this run another seed or arm" in warnings[0]
    shown = json.loads(cli("show", "sweep", "--json", check=True).stdout)
    assert [t["attempts"] for t in shown["trials"]] == [2]
    # running the script again: each of its runs is told
    again = _run(tmp_path, SWEEP)
    assert again.stderr.count("was run before (2 run(s)") == 1
    assert again.stderr.count("was run before (3 run(s)") == 1


def test_runs_with_their_own_arm_or_no_seed_are_separate_trials_and_quiet(home, tmp_path):
    done = _run(tmp_path, """
        import labcoat
        for lr in (0.1, 0.2):
            with labcoat.init(experiment="sweep", arm=f"lr-{lr}", seed=0) as run:
                run.log(0, loss=lr)
        for _ in range(2):  # two seedless runs in the same second: two trials
            with labcoat.init(experiment="sweep") as run:
                run.log(0, loss=1.0)
    """)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    shown = json.loads(cli("show", "sweep", "--json", check=True).stdout)
    assert sorted(t["attempts"] for t in shown["trials"]) == [1, 1, 1, 1]


def test_runner_variables_set_by_hand_to_nonsense_are_named(home, tmp_path):
    done = _run(tmp_path, "import labcoat\nlabcoat.init()\n",
                LABCOAT_JOURNAL=str(tmp_path / "journal.jsonl"), LABCOAT_PARAMS="lr=0.1")
    assert done.returncode == 1 and "During handling" not in done.stderr
    assert _last_line(done) == (
        "ValueError: LABCOAT_PARAMS='lr=0.1' is not what `labcoat run` sets; this process is "
        "a trial because LABCOAT_JOURNAL is set: unset both to record an ad-hoc run")


def test_the_trainer_integrations_under_the_runner_pass_nothing_to_override(
        home, tmp_path, monkeypatch):
    """The Trainer/Lightning callbacks pass the library's seed and settings for an ad-hoc
    run; in a trial they follow the runner's seed themselves, so init says nothing."""
    from labcoat.integrations import _common

    journal = tmp_path / "journal.jsonl"
    monkeypatch.setenv("LABCOAT_JOURNAL", str(journal))
    monkeypatch.setenv("LABCOAT_SEED", "3")
    run = _common.trial_run(None, seed=42, params={"learning_rate": 1e-3})
    run.finish()
    assert run.seed == 3
    assert [r["kind"] for _, r in read_journal(journal).records] == ["start", "finish"]
