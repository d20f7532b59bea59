"""A design far larger than meant (`seeds: 100000`) is refused in one line before anything
is expanded or recorded; lint warns; --yes goes ahead (issue 22, point 7)."""

import json

from helpers import cli, fake_design


def test_a_huge_design_is_refused_with_its_size_and_the_fix(home, tmp_path):
    design = fake_design(tmp_path, seeds=100_000)
    result = cli("run", str(design))
    assert result.returncode == 2, result.stdout + result.stderr
    message = result.stderr.strip()
    assert "expands to 200,000 trials (2 arms x 100,000 seeds)" in message
    assert "lower `seeds:`" in message and "--yes" in message
    assert "Traceback" not in message and len(message.splitlines()) <= 3  # one line, wrapped
    assert not (home / "runs").exists()  # nothing started, nothing registered
    listed = json.loads(cli("status", "--json", check=True).stdout)
    assert listed == []

    lint = cli("lint", str(design))
    assert lint.returncode == 0  # a warning: the size may be meant
    assert "warning [large-design] the design expands to 200,000 trials" in lint.stdout


def test_past_a_declared_budget_run_asks_and_yes_goes_ahead(home, tmp_path):
    design = fake_design(tmp_path, steps=1, seeds=2)
    design.write_text(design.read_text() + "budget: {max_trials: 3}\n")
    refused = cli("run", str(design))
    assert refused.returncode == 2
    assert "expands to 4 trials (2 arms x 2 seeds), past its budget of 3" in refused.stderr
    done = cli("run", str(design), "--yes", check=True)
    assert "4 trial(s) finished now" in done.stdout
