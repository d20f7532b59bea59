"""Live extrapolation in the runner: a larger-scale trial whose loss leaves the band
predicted by the finished smaller scales gets one `scaling.off_path` alert, shown
live and stored; the same scale on the law's path gets none.

The fake trial's loss is 1.5 + 8 N^-0.5 + 20 (1000 step)^-0.5 with 0.5% noise
(exactly the chinchilla form in N = width and D = 1000 step); in the `drift` arm
the width-256 trial's loss is 25% above that from step 15 on. Only the width-256 trials
take time (0.05 s a step), so the runner polls them several times while they run; the
smaller scales only have to finish first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import FAKE_TRIAL, cli

OFF_AT = 15


@pytest.mark.slow  # runs a whole design through the runner (trial processes)
def test_a_larger_run_leaving_its_band_is_alerted(home: Path, tmp_path: Path) -> None:
    widths = [16, 32, 64, 256]
    scales = "\n".join(f"  - {{name: w{w}, params: {{width: {w}}}}}" for w in widths)
    design = tmp_path / "design.yaml"
    design.write_text(f"""name: live
hypothesis:
  claim: wider models reach lower loss
  metric: loss
  direction: decrease
command: "{{python}} {FAKE_TRIAL} --steps 30 --seed {{seed}} --power-law {{width}} \
  --tokens-per-step {{tokens_per_step}} --off-path-at {{drift_at}} --off-path-above 100 \
  --sleep 0.05 --sleep-above 100"
params: {{width: 16, tokens_per_step: 1000, drift_at: -1}}
arms:
  base: {{control: true}}
  drift: {{params: {{drift_at: {OFF_AT}}}}}
seeds: 1
scales:
{scales}
parallelism: 1
""", encoding="utf-8")
    out = " ".join(cli("run", str(design), "--plain", check=True).stdout.split())
    assert "scaling.off_path" in out and "drift-s0-w256" in out
    trials = {t["key"]: t for t in json.loads(cli("status", "live", "--json",
                                                  check=True).stdout)["trials"]}
    (alert,) = trials["drift-s0-w256"]["alerts"]  # once, however often the runner polled
    assert alert["rule"] == "scaling.off_path" and alert["severity"] == "warning"
    evidence = alert["evidence"]
    assert evidence["direction"] == "above" and evidence["variable"] == "width"
    assert OFF_AT <= alert["step"] <= OFF_AT + 2  # the first point of the streak
    assert evidence["loss"] > evidence["high"]
    # The loss without the drift, at that step, is what the band predicted.
    true = 1.5 + 8 * 256**-0.5 + 20 * (1000 * alert["step"]) ** -0.5
    assert evidence["low"] <= true <= evidence["high"]
    assert "finished trial(s) at width 16, 32, 64" in alert["message"]
    # The same scale on the law's path: watched, never alerted; smaller scales: not watched.
    for key, trial in trials.items():
        if key != "drift-s0-w256":
            assert trial["alerts"] == [], key
    report = " ".join(cli("report", "live", check=True).stdout.split())
    assert "scaling.off_path" in report
