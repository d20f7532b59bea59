"""A hypothesis whose metric the script never logs: said by `lint --pilot` before the run, at
the first finished trial and in the verdict, with what was logged (issue 22, point 4)."""

import json
import sys

from helpers import cli, fake_design

SCRIPT = """import labcoat
run = labcoat.init()
run.log(1, loss=1.0)
run.finish()
"""
DESIGN = """name: noitems
hypothesis: {{claim: c, metric: exact_match, source: items, direction: increase}}
command: "{python} {script} --seed {{seed}}"
arms:
  base: {{control: true}}
  hot: {{}}
seeds: 2
"""


def _verdict(report: str) -> str:
    return " ".join(report[report.index("Verdict"):].split())


def test_a_metric_nobody_logged_is_named_by_run_and_report(home, tmp_path):
    design = fake_design(tmp_path / "exp", name="nolog")
    design.write_text(design.read_text().replace("metric: exact_match\n  source: items",
                                                 "metric: accuracy\n  source: scalar"))
    run = cli("run", str(design), "--plain", check=True)
    warnings = [line for line in run.stdout.splitlines() if "finished without logging" in line]
    assert len(warnings) == 1 and "'accuracy'" in warnings[0] and "loss" in warnings[0]
    printed = cli("report", "nolog", check=True).stdout
    assert printed.splitlines()[0] == "Experiment nolog - done (4/4 trials finished)"  # not 0/0
    verdict = _verdict(printed)
    assert "metric 'accuracy' was never logged by the 4 finished trials" in verdict
    assert "they logged: loss" in verdict and "needs at least 2" not in verdict


def test_per_item_scores_nobody_logged(home, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    design = tmp_path / "design.yaml"
    design.write_text(DESIGN.format(python=sys.executable, script=script))
    run = cli("run", str(design), "--plain", check=True)
    assert run.stdout.count("finished without per-item scores (run.log_items)") == 1
    verdict = _verdict(cli("report", "noitems", check=True).stdout)
    assert "none of the 4 finished trials logged per-item scores (run.log_items)" in verdict
    # lint without --pilot reads the design's own earlier run: the same words
    lint = cli("lint", str(design))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    warning = " ".join(line for line in lint.stdout.splitlines() if "pilot-never-logged" in line)
    assert "pilot noitems: none of the 4 finished trials logged per-item scores" in warning


FULL = """name: full
hypothesis: {{claim: c, metric: accuracy, direction: increase, smallest_effect: 0.02}}
command: "{python} {script}"
arms:
  base: {{control: true}}
  hot: {{}}
seeds: 5
"""


def test_lint_with_a_pilot_that_never_logged_the_metric(home, tmp_path):
    """The user runs a one-seed pilot, then lints the full design against it."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    full = tmp_path / "design.yaml"
    full.write_text(FULL.format(python=sys.executable, script=script))
    pilot = tmp_path / "pilot.yaml"
    pilot.write_text(full.read_text().replace("name: full", "name: pilot1")
                     .replace("seeds: 5", "seeds: 1"))
    cli("run", str(pilot), "--plain", check=True)

    lint = cli("lint", str(full), "--pilot", "pilot1")
    assert lint.returncode == 0, lint.stdout + lint.stderr  # a warning: --strict fails
    lines = lint.stdout.splitlines()
    warning = next(i for i, line in enumerate(lines) if "[pilot-never-logged]" in line)
    assert lines[warning].startswith(f"{full}:2: warning")  # the hypothesis' metric line
    assert ("pilot pilot1: metric 'accuracy' was never logged by the 2 finished trials (they "
            "logged: loss)") in lines[warning]
    assert "no verdict" in lines[warning + 1]
    assert "pass --pilot" not in lint.stdout  # it was passed: the finding says why it's empty
    assert lint.stderr == ""
    assert cli("lint", str(full), "--pilot", "pilot1", "--strict").returncode == 1
    found = json.loads(cli("lint", str(full), "--pilot", "pilot1", "--json").stdout)
    assert [f["rule"] for f in found if f["severity"] == "warning"] == ["pilot-never-logged"]
    plan = cli("plan", str(full), "--pilot", "pilot1", check=True).stdout
    assert "metric 'accuracy' was never logged" in " ".join(plan.split())

    # fixed script, still a one-seed pilot: no SD from it, and lint says why
    script.write_text(SCRIPT.replace("loss=1.0", "loss=1.0, accuracy=0.5"))
    pilot.write_text(pilot.read_text().replace("pilot1", "pilot2"))
    cli("run", str(pilot), "--plain", check=True)
    lint = " ".join(cli("lint", str(full), "--pilot", "pilot2", check=True).stdout.split())
    assert "never logged" not in lint and "pass --pilot" not in lint
    assert "[power-unknown]" in lint and "pilot pilot2 has fewer than 2 finished seeds" in lint
