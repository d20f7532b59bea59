"""Guard alerts in the journal reach the alert table, the live display and the report."""

import json

from helpers import cli, fake_design


def test_guard_alerts_are_recorded_shown_live_and_reported(home, tmp_path):
    design = fake_design(tmp_path, steps=4, seeds=1, extra="--alert-at 2")
    out = cli("run", str(design), "--plain", check=True).stdout
    assert "guard error: update.param_unchanged at step 2" in out
    trials = json.loads(cli("status", "fake", "--json", check=True).stdout)["trials"]
    for trial in trials:
        (alert,) = trial["alerts"]  # recorded once, however often the journal was read
        assert alert == {"step": 2, "rule": "update.param_unchanged", "severity": "error",
                         "message": "layer fc1 did not change after the optimizer step",
                         "evidence": {"param": "fc1.weight"}}
    text = cli("report", "fake", check=True).stdout
    assert "guard alerts (2)" in text and "update.param_unchanged" in text


def test_trials_get_the_guard_profiles_of_clean_finished_peers(home, tmp_path):
    record = tmp_path / "references.txt"
    design = fake_design(tmp_path, steps=2, seeds=3, parallelism=1,
                         extra=f"--profile --record-reference {record}")
    cli("run", str(design), check=True)
    seen = dict(line.split(" ", 1) for line in record.read_text().splitlines())
    assert seen["base-s0"] == "none"  # nothing finished yet
    assert json.loads(seen["base-s2"]) == [
        {"format": "labcoat.guard.profile", "version": 1, "trial": "base-s0"},
        {"format": "labcoat.guard.profile", "version": 1, "trial": "base-s1"},
    ]
    assert seen["better-s0"] == "none"  # profiles come from the same arm only
