"""`labcoat report` on designs with `scales:`: a real run of the fake trial whose final
loss follows a known power law in the scale parameter `width`.

The fake trial's loss is 1.5 + 8 width^-0.5 + 20 (1000 step)^-0.5 (0.5% noise;
the same in both arms, which differ in eval items only), so the final loss after
`steps` steps is E + A / width^alpha with alpha = 0.5, A = 8 and
E = 1.5 + 20 / sqrt(1000 steps): the values the report must recover.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers import FAKE_TRIAL, cli

STEPS = 20


def scaled_design(directory: Path, widths: list[int], *, seeds: int = 2,
                  name: str = "scaled") -> Path:
    scales = "\n".join(f"  - {{name: w{w}, params: {{width: {w}}}}}" for w in widths)
    path = directory / "design.yaml"
    path.write_text(f"""name: {name}
hypothesis:
  claim: wider models reach lower loss
  metric: loss
  direction: decrease
command: "{{python}} {FAKE_TRIAL} --steps {{steps}} --seed {{seed}} --power-law {{width}} \
  --quality {{quality}}"
params: {{steps: {STEPS}, width: {widths[0]}, quality: 0.3}}
arms:
  base: {{control: true}}
  tuned: {{params: {{quality: 0.9}}}}
seeds: {seeds}
scales:
{scales}
parallelism: 2
""", encoding="utf-8")
    return path


@pytest.mark.slow  # runs a whole design through the runner (trial processes)
def test_report_fits_the_scales_and_backtests(home: Path, tmp_path: Path) -> None:
    widths = [16, 32, 64, 128, 256]
    cli("run", str(scaled_design(tmp_path, widths)), "--plain", check=True)
    data = json.loads(cli("report", "scaled", "--json", check=True).stdout)["scales"]
    assert data["variable"] == "width" and data["metric"] == "loss"
    assert [a["arm"] for a in data["arms"]] == ["base", "tuned"]  # one fit per arm
    arm = data["arms"][0]
    assert arm["points"] == 10 and arm["scales"] == widths
    fit = arm["fit"]
    truth = {"E": 1.5 + 20 / math.sqrt(1000 * STEPS), "A": 8.0, "alpha": 0.5}
    for name, true in truth.items():
        iv = fit["params"][name]
        assert iv["low"] <= true <= iv["high"], (name, iv)
    assert fit["params"]["alpha"]["point"] == pytest.approx(0.5, abs=0.1)
    rows = arm["backtest"]["table"]  # fit on 16..128, predict 256 (one row per seed)
    assert len(rows) == 2
    true_256 = truth["E"] + 8 * 256**-0.5
    for row in rows:
        assert row["N"] == 256 and row["extrapolation"] == pytest.approx(2.0)
        assert row["predicted"] == pytest.approx(true_256, rel=0.02)
        assert row["covered"] and row["low"] < row["observed"] < row["high"]
    assert not [w for w in arm["warnings"] if "spans only" in w or "distinct" in w]

    plot = arm["plot"]  # log-log: every width's column holds a trial's mark
    assert plot[-1].split() == ["16", "1.02e+03"]  # to 4x the largest scale
    assert sum(line.count("o") for line in plot) >= len(widths)
    text = " ".join(cli("report", "scaled", check=True).stdout.split())
    for expected in ("o trials, * fit, : 95% band", "Scaling (loss against width)",
                     "loss = E + A / width^alpha",
                     "backtest (leave-largest-out)", "coverage 100% of 2 held-out point"):
        assert expected in text, expected


@pytest.mark.slow  # runs a whole design through the runner (trial processes)
def test_report_warns_on_a_narrow_range_of_few_scales(home: Path, tmp_path: Path) -> None:
    cli("run", str(scaled_design(tmp_path, [64, 80, 96])), "--plain", check=True)
    data = json.loads(cli("report", "scaled", "--json", check=True).stdout)["scales"]
    arm = data["arms"][0]
    assert arm["fit"] is not None and arm["backtest"] is None
    warnings = " ".join(arm["warnings"])
    assert "spans only 1.5x" in warnings and "only 3 distinct N" in warnings
    assert any("no backtest" in n and "have 3" in n for n in arm["notes"])
    text = " ".join(cli("report", "scaled", check=True).stdout.split())
    assert "warning: N spans only 1.5x" in text


@pytest.mark.slow  # runs a whole design through the runner (trial processes)
def test_report_refuses_to_fit_two_scales(home: Path, tmp_path: Path) -> None:
    cli("run", str(scaled_design(tmp_path, [32, 256], seeds=1)), "--plain", check=True)
    data = json.loads(cli("report", "scaled", "--json", check=True).stdout)["scales"]
    arm = data["arms"][0]
    assert arm["fit"] is None
    assert any("only 2 distinct width" in w and "too few" in w for w in arm["warnings"])
