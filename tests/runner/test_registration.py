"""Pre-registration through the CLI: a frozen plan, refusal, amendment, seeds added late."""

import json

from helpers import cli, fake_design


def test_a_changed_plan_is_refused_until_amended_and_the_report_shows_it(home, tmp_path):
    design = fake_design(tmp_path, steps=2, seeds=2)
    cli("run", str(design), check=True)
    design.write_text(design.read_text().replace("direction: increase",
                                                 "direction: increase\n  alpha: 0.1"))
    refused = cli("run", str(design))
    assert refused.returncode == 2
    assert "analysis plan of 'fake' was frozen at its first run" in refused.stderr
    assert "changes hypotheses" in refused.stderr and "--amend" in refused.stderr

    cli("run", str(design), "--amend", "alpha 0.1 agreed with the reviewer", check=True)
    text = cli("report", "fake", check=True).stdout
    assert "amended" in text and "alpha 0.1 agreed with the reviewer" in text
    report = json.loads(cli("report", "fake", "--json", check=True).stdout)
    (amendment,) = report["registration"]["amendments"]
    assert amendment["changed"] == ["hypotheses"]
    assert report["results"][0]["hypothesis"]["alpha"] == 0.1


def test_seeds_added_after_results_are_run_and_flagged(home, tmp_path):
    design = fake_design(tmp_path, steps=2, seeds=2)
    cli("run", str(design), check=True)
    design.write_text(design.read_text().replace("seeds: 2", "seeds: 3"))
    cli("run", str(design), check=True)  # the plan is unchanged: no amendment needed
    report = json.loads(cli("report", "fake", "--json", check=True).stdout)
    assert report["late_trials"] == ["base-s2", "better-s2"]
    assert report["counts"] == {"base": {"pending": 0, "running": 0, "done": 3, "failed": 0},
                                "better": {"pending": 0, "running": 0, "done": 3, "failed": 0}}
    assert "added after results were seen: base-s2, better-s2" in cli(
        "report", "fake", check=True).stdout
