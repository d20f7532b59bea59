"""A hypothesis whose metric the script never logs: said at the first finished trial and in
the verdict, with what was logged (issue 22, point 4)."""

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
    verdict = _verdict(cli("report", "nolog", check=True).stdout)
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
