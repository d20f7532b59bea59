"""labcoat shrink on a cheap trial (tests/shrink/bug_trial.py, no torch): slips are reported
and never accepted, a failure that does not reproduce is not shrunk, ddmin keeps exactly
the features the bug needs, Ctrl-C keeps what was found, and the CLI's one-line errors."""

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from helpers import cli
from labcoat import runner, shrink, spec
from labcoat.errors import LabcoatError

BUG = Path(__file__).with_name("bug_trial.py")


def _design(tmp_path: Path, name: str, *, size: int = 16, floor: int = 1, extra: str = "",
            features: str = "", shrink_block: str | None = None, more: str = "") -> Path:
    feature_params = "".join(f", {f}: true" for f in features.split(",") if f)
    feature_flag = " --features " + ",".join(f"{f}={{{f}}}" for f in features.split(",")) \
        if features else ""
    block = shrink_block if shrink_block is not None else (
        f"shrink: {{params: {{size: {floor}}}"
        + (f", features: [{features}]" if features else "") + ", budget: 30}")
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""name: {name}
hypothesis: {{claim: c, metric: loss, direction: decrease}}
command: "{{python}} {BUG} --size {{size}} --steps 4{feature_flag} {extra}"
params: {{size: {size}{feature_params}{more}}}
arms: {{big: {{control: true}}, small: {{params: {{size: 1}}}}}}
seeds: [0]
restart: {{retries: 0}}
{block}
""")
    return path


def _run(path: Path) -> None:
    runner.run_design(path, console=Console(file=io.StringIO()), plain=True, parallelism=1)


@pytest.fixture
def here(home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # trials run here; outside a git checkout (no code diff)
    return tmp_path


def test_a_slip_is_reported_and_never_accepted(here):
    # the bug needs size >= 2; below 4 a different error (KeyError) appears first
    _run(_design(here, "slips", extra="--bug-from 2 --slip-below 4"))
    result = shrink.shrink_trial("slips/big-s0", out=here / "min.yaml")
    outcomes = [(c.params["size"], c.outcome) for c in result.candidates]
    # the floor first, then up the ladder of halvings: 1 and 2 slip, 4 is kept
    assert outcomes == [(16, "fails"), (1, "slip"), (2, "slip"), (4, "fails")]
    assert result.minimal == {"size": 4}  # not 2, where it failed the other way
    assert [c.signature.name for c in result.slips] == ["exception: KeyError"] * 2
    assert result.signature.name == "exception: ValueError"
    assert result.one_minimal and result.neighbours == [("size 4 -> 2", "slip")]
    # the minimal design loads and runs the reproduction as its control arm
    design = spec.load_design(here / "min.yaml")
    assert design.params["size"] == 4 and design.control == "minimal"
    assert "\n    size: 1\n" in (here / "min.yaml").read_text()  # the floor as written, not 1.0
    assert result.command.endswith("--size 4 --steps 4 --bug-from 2 --slip-below 4")


def test_a_failure_that_does_not_reproduce_is_not_shrunk(here):
    _run(_design(here, "flaky", extra=f"--flaky {here / 'marker'}"))
    result = shrink.shrink_trial("flaky/big-s0", out=here / "min.yaml")
    assert not result.reproduced
    assert [(c.params, c.outcome) for c in result.candidates] == [({"size": 16}, "passes")]
    assert result.minimal == result.original and result.design_path is None
    assert "did not reproduce" in result.minimality()
    assert not (here / "min.yaml").exists()


def test_ddmin_keeps_exactly_the_features_the_bug_needs(here):
    # four features on; the bug needs a and c (and size >= 4)
    _run(_design(here, "feat", features="a,b,c,d", extra="--needs a,c"))
    result = shrink.shrink_trial("feat/big-s0", out=here / "min.yaml")
    assert result.minimal == {"size": 4, "a": True, "b": False, "c": True, "d": False}
    # brute force over every subset of features at size 4: the bug's only minimal set is {a, c}
    assert result.one_minimal
    assert sorted(c for c, _ in result.neighbours) == ["a off", "c off", "size 4 -> 2"]
    # the original, sizes 1, 2 (pass) and 4 (fails), 11 ddmin, 1 check
    assert not result.slips and len(result.candidates) == 16


def test_ctrl_c_keeps_what_was_found(here):
    _run(_design(here, "stop", extra="--depth {depth}", more=", depth: 8",
                 shrink_block="shrink: {params: {size: 1, depth: 1}}"))

    def interrupt_after_four(candidate):  # the original, size 1 and 2 (pass), 4 (fails)
        if candidate.number == 3:
            raise KeyboardInterrupt

    result = shrink.shrink_trial("stop/big-s0", out=here / "min.yaml",
                                 on_done=interrupt_after_four)
    assert result.stopped == "stopped by Ctrl-C"
    assert result.minimal == {"size": 4, "depth": 8} and not result.one_minimal
    assert result.untried == ["depth 8 -> 4"]
    assert spec.load_design(here / "min.yaml").params == {"size": 4, "depth": 8}
    # running it again reuses the four finished candidates and goes on to the end
    again = shrink.shrink_trial("stop/big-s0", out=here / "min.yaml")
    assert [c.reused for c in again.candidates[:5]] == [True] * 4 + [False]
    assert again.minimal == {"size": 4, "depth": 1} and again.one_minimal


def test_cli_json_and_one_line_errors(here):
    _run(_design(here, "cli"))
    out = cli("shrink", "cli/big-s0", "--json", "--out", str(here / "min.yaml"), check=True)
    data = json.loads(out.stdout)
    assert data["minimal"] == {"size": 4} and data["slips"] == 0 and data["one_minimal"]
    assert data["time_to_failure"]["ratio"] is not None
    assert data["parameters"] == {"original": 160.0, "minimal": 40.0, "ratio": 4.0}
    # the same shrink as text (every candidate reused): progress on stderr, the answer on
    # stdout with its design file, one rerun command, the cost ratios, the candidates and
    # the 1-minimality statement
    text = cli("shrink", "cli/big-s0", "--out", str(here / "min2.yaml"), check=True)
    assert "c00 the original settings: fails: cause exception: ValueError" in text.stderr
    assert "c01 size 16 -> 1 (its floor): passes" in text.stderr
    lines = text.stdout.splitlines()
    assert "minimal reproduction: size 16 -> 4" in lines
    costs = next(line for line in lines if line.startswith("time to failure"))
    assert "x cheaper" in costs and costs.endswith("parameters 160 -> 40 (4.0x)")
    assert "1-minimal: each of its 1 one-step-smaller neighbours (size 4 -> 2) does not " \
           "fail this way (1 pass, 0 slip)" in text.stdout.replace("\n", " ")
    assert f"design: {here / 'min2.yaml'}" in lines
    assert f"rerun it: {data['command']}" in lines
    assert sum(line.lstrip("│ ").startswith("c0") for line in lines) == len(data["candidates"])
    for ref, message in [
        ("cli/small-s0", "trial cli/small-s0 did not fail (done, no guard alert): nothing to "
                         "shrink"),
        ("cli/nope-s0", "experiment 'cli' has no trial 'nope-s0' (trials: big-s0, small-s0)"),
        ("cli", "'cli' does not name a trial; use EXPERIMENT/TRIAL"),
    ]:
        result = cli("shrink", ref)
        assert result.returncode == 2 and message in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_failure_that_does_not_reproduce_exits_1_from_the_cli(here):
    _run(_design(here, "flaky2", extra=f"--flaky {here / 'marker2'}"))
    done = cli("shrink", "flaky2/big-s0", "--out", str(here / "min.yaml"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "not shrunk: the failure did not reproduce at the original size" in \
        done.stdout.replace("\n", " ")
    assert not (here / "min.yaml").exists()


def test_ctrl_c_in_the_cli_keeps_what_was_found(here):
    """SIGINT to the CLI's process group, as a terminal's Ctrl-C sends it, while a candidate
    runs: the search stops and prints, and writes, the smallest failure found so far."""
    # c00 the original, c01-c03 size 1, 2 (pass) and 4 (fails), then c04 depth 8 -> 1 sleeps
    _run(_design(here, "sigint", extra="--depth {depth} --slow-depth 1", more=", depth: 8",
                 shrink_block="shrink: {params: {size: 1, depth: 1}}"))
    shrinking = subprocess.Popen(
        [sys.executable, "-m", "labcoat.cli", "shrink", "sigint/big-s0", "--out",
         str(here / "min.yaml")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ), start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    progress: list[str] = []
    reader = threading.Thread(target=lambda: progress.extend(shrinking.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not any("c03 size 16 -> 4" in line for line in progress):
        assert shrinking.poll() is None and time.monotonic() < deadline, progress
        time.sleep(0.2)
    time.sleep(2)  # c04 (depth 1) is starting or running
    os.killpg(shrinking.pid, signal.SIGINT)
    out = shrinking.stdout.read()
    assert shrinking.wait(timeout=60) == 0, (out, progress)  # CI once saw 1 under load
    reader.join(timeout=10)
    assert not any("Traceback" in line for line in progress), progress
    assert "minimal reproduction: size 16 -> 4" in out
    assert "search ended early: stopped by Ctrl-C" in out
    assert "not shown 1-minimal (stopped by Ctrl-C): neighbours never run: depth 8 -> 4" in \
        out.replace("\n", " ")
    assert spec.load_design(here / "min.yaml").params == {"size": 4, "depth": 8}


def test_a_design_without_a_shrink_block_is_refused(here):
    _run(_design(here, "plain", shrink_block=""))
    with pytest.raises(LabcoatError, match="has no `shrink:` block"):
        shrink.shrink_trial("plain/big-s0")


def test_the_shrink_block_is_checked_with_file_and_line(tmp_path):
    path = _design(tmp_path, "bad", shrink_block="shrink:\n  params: {size: 32, widht: 2}\n"
                   "  features: [size]\n  budgt: 3")
    with pytest.raises(LabcoatError) as error:
        spec.load_design(path)
    assert f"{path}:11: unknown key 'budgt'; did you mean 'budget'?" in str(error.value)
    path = _design(tmp_path, "bad2", shrink_block="shrink:\n  params: {size: 32, widht: 2}\n"
                   "  features: [size]")
    with pytest.raises(LabcoatError) as error:
        spec.load_design(path)
    text = str(error.value)
    assert f"{path}:9: shrink floor 32.0 of 'size' must be > 0 and at most its value 16" in text
    assert "shrink names 'widht', which is not in params" in text
    assert "'size' is both a shrink param and a feature" in text


def test_an_unknown_experiment_says_which_exist(home):
    with pytest.raises(LabcoatError, match="no experiment named 'nope'"):
        shrink.shrink_trial("nope/x")
