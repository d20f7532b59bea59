"""Answers that say what happened (issue 30 point 4), through the real CLI on a real
store: a typo'd --metric, a flag that would be ignored, a replay of a trial without
checkpoints, unknown experiments and trials, an empty store. Each ends in one line that
names the input and the fix, never in silence or a misleading message."""

import json

import pytest

from helpers import cli, fake_design, shared_home, use_home


@pytest.fixture(scope="module")
def ran_home(tmp_path_factory):
    """Experiment "fake" (fake_trial.py: `loss` every step, eval items at the end), run
    once; the tests only read it."""
    tmp = tmp_path_factory.mktemp("answers")
    with shared_home(tmp / "home") as path:
        cli("run", str(fake_design(tmp / "design", seeds=1, steps=3)), check=True)
    return path


@pytest.fixture
def ran(ran_home, monkeypatch):
    use_home(monkeypatch, ran_home)
    return "fake"


def _error(*args):
    result = cli(*args)
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr  # one line
    return lines[0]


def test_export_a_misspelled_metric_lists_the_names_closest_first(ran):
    message = _error("export", ran, "--metric", "los")
    assert "--metric 'los'" in message and "did you mean 'loss'?" in message
    assert message.endswith("its metrics: loss")
    good = cli("export", ran, "--metric", "loss", check=True).stdout.splitlines()
    assert {json.loads(line)["name"] for line in good} == {"loss"}


def test_export_of_an_experiment_with_nothing_logged_says_so(home, tmp_path):
    (tmp_path / "boom.py").write_text("raise SystemExit(3)\n", encoding="utf-8")
    design = tmp_path / "d.yaml"
    design.write_text("name: quiet\ncommand: \"{python} boom.py --seed {seed}\"\n"
                      "params: {x: 0}\narms:\n  a: {control: true}\n  b: {params: {x: 1}}\n"
                      "seeds: 1\nrestart: {retries: 0}\n", encoding="utf-8")
    cli("run", str(design), cwd=tmp_path)
    result = cli("export", "quiet", check=True)
    assert result.stdout == ""  # stdout stays JSON lines
    assert "has no metric points to export" in result.stderr
    items = cli("export", "quiet", "--items", check=True)
    assert items.stdout == "" and "has no eval items to export" in items.stderr


@pytest.mark.parametrize("value", ["a,b", "a", "a,,b", "a,b,a"])
def test_plan_refuses_candidates_it_would_ignore(tmp_path, value):
    design = fake_design(tmp_path)
    plain = cli("plan", str(design), check=True).stdout
    assert "factorial" not in plain
    message = _error("plan", str(design), "--candidates", value)
    assert f"--candidates {value!r}" in message


def test_plan_with_three_candidates_suggests_the_factorial(tmp_path):
    out = cli("plan", str(fake_design(tmp_path)), "--candidates", "a,b,c", check=True).stdout
    assert "full 2^3 factorial" in out


def test_flags_that_would_be_ignored_are_refused(ran, tmp_path):
    assert "needs --provenance" in _error("show", ran, "--diff")
    html = tmp_path / "r.html"
    assert "use one" in _error("report", ran, "--json", "--html", str(html))
    assert not html.exists()


def test_replay_of_a_trial_without_checkpoints_says_so(ran):
    message = _error("replay", f"{ran}/base-s0", "--from", "1", "--to", "2")
    assert "no checkpoints to replay from" in message
    assert "Checkpointer" in message and f"labcoat rerun {ran}/base-s0" in message
    assert "segment" not in message


@pytest.mark.parametrize("args", [
    ("status", "nope"), ("show", "nope"), ("report", "nope"), ("export", "nope"),
    ("logs", "nope"), ("diagnose", "nope"), ("diagnose", "fake/nope-s9"),
    ("logs", "fake", "--trial", "nope-s9"), ("replay", "fake/nope-s9", "--from", "1",
                                             "--to", "2"),
    ("rerun", "fake/nope-s9"), ("show", "fake/nope-s9", "--provenance"),
])
def test_unknown_experiment_or_trial_is_one_line_naming_it(ran, args):
    message = _error(*args)
    assert "nope" in message
    assert "fake" in message or "known" in message  # says what exists


@pytest.mark.parametrize("args", [("status",), ("report", "x"), ("logs", "x"),
                                  ("export", "x"), ("diagnose", "x")])
def test_an_empty_store(home, args):
    result = cli(*args)
    assert "Traceback" not in result.stderr
    text = (result.stdout + result.stderr).strip()
    assert len(text.splitlines()) == 1 and "run design.yaml" in text


@pytest.mark.parametrize(("args", "how"), [
    (("logs", "fake/base-s0"), "labcoat logs fake --trial base-s0"),
    (("logs", "templates", "fake/base-s0"), "labcoat logs templates fake --trial base-s0"),
    (("export", "fake/base-s0"), "labcoat export fake"),
    (("report", "fake/base-s0"), "labcoat show fake/base-s0 --provenance"),
    (("status", "fake/base-s0"), "labcoat status fake"),
])
def test_a_trial_given_where_an_experiment_is_expected(ran, args, how):
    message = _error(*args)
    assert "names trial 'base-s0' of 'fake'" in message and how in message


def test_bad_trial_references_and_ranks(ran):
    assert "names no trial" in _error("diagnose", "fake/")
    assert "names no trial" in _error("diagnose", "/base-s0")
    message = _error("logs", ran, "--rank", "3")
    assert "--rank 3" in message and "ran as one process" in message
    message = _error("replay", f"{ran}/base-s0", "--from", "0", "--to", "2")
    assert "--from 0: steps start at 1" in message  # the flag first, before the trial's state
