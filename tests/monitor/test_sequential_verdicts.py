"""`labcoat run --until-decisive` as a user runs it (issue 30, point 5): the seed cap is
kept or refused in one line, a script that ignores its seed is never decisive (and the
"discrete" warning is a line of output and of the report, not a raw Python warning), and
an inconclusive sequential verdict gives the sequential rule's power advice, not a fixed-n
test's."""

import json

from helpers import FAKE_TRIAL, cli
from labcoat import stats


def _design(tmp_path, *, seeds=3, seed_flag="{seed}", variant_quality=0.7, extra=""):
    path = tmp_path / "seq.yaml"
    path.write_text(f"""name: seq
hypothesis: {{claim: c, metric: exact_match, source: items, direction: increase,
             smallest_effect: 0.05}}
command: "{{python}} {FAKE_TRIAL} --steps {{steps}} --quality {{quality}} --seed {seed_flag}"
params: {{quality: 0.3, steps: 2}}
arms: {{base: {{control: true}}, better: {{params: {{quality: {variant_quality}}}}}}}
seeds: {seeds}
parallelism: 2
{extra}""")
    return path


def _trials():
    shown = cli("show", "seq", "--json")
    return json.loads(shown.stdout)["trials"] if shown.returncode == 0 else []


def test_max_seeds_below_the_first_decisive_look_is_refused(home, tmp_path):
    """Issue 30: `--max-seeds 3` ran 5 seeds per arm, then said "the budget of 3 seeds per
    arm is spent". At alpha 0.05 the t-mixture cannot decide before 5 seeds per arm."""
    assert stats.sequential_plan(1.0, sd=1.0, reps=10, max_seeds=10).min_seeds == 5
    result = cli("run", str(_design(tmp_path)), "--until-decisive", "--max-seeds", "3")
    assert result.returncode == 2, result.stdout + result.stderr
    message = result.stdout + result.stderr
    assert "--max-seeds 3" in message and "--max-seeds 5 or more" in message
    assert "Traceback" not in message
    assert _trials() == []  # nothing ran


def test_a_first_round_larger_than_the_cap_is_refused(home, tmp_path):
    result = cli("run", str(_design(tmp_path, seeds=8)), "--until-decisive", "--max-seeds", "6")
    assert result.returncode == 2
    message = (result.stdout + result.stderr).replace("\n", " ")
    assert "`seeds: 8` already exceeds --max-seeds 6" in message and "Traceback" not in message
    assert _trials() == []


def test_the_cap_is_kept_when_it_allows_a_decision(home, tmp_path):
    out = cli("run", str(_design(tmp_path, variant_quality=0.3)), "--until-decisive",
              "--max-seeds", "5", check=True).stdout
    assert "round 1: 5 seeds per arm" in out and "round 2" not in out
    assert max(t["seed"] for t in _trials()) == 4  # 5 seeds per arm, never more


def test_a_script_that_ignores_its_seed_is_never_decisive(home, tmp_path):
    """Issue 30: every seed gives the same scores (the command passes --seed 0), so each arm
    is constant: the confidence sequence used to have zero width and the headline said
    SUPPORTED after the first look."""
    design = _design(tmp_path, seed_flag="0", variant_quality=0.7)
    run = cli("run", str(design), "--until-decisive", "--max-seeds", "12", check=True)
    assert "round 1: 5 seeds per arm" in run.stdout and "round 2" not in run.stdout
    assert "no variation" in run.stdout
    assert "warning: 5 of 5 seed differences are the same value" in run.stdout
    assert "StatsWarning" not in run.stderr  # a line of output, not a raw Python warning
    shown = cli("report", "seq", "--json", check=True)
    assert "StatsWarning" not in shown.stderr
    report = json.loads(shown.stdout)
    (comparison,) = report["results"][0]["comparisons"]
    assert report["sequential"]["better"]["decision"] == "no variation"
    assert comparison["verdict"] == "inconclusive"
    assert "seed noise was not measured" in comparison["reason"]
    assert any("seed differences are the same value" in w for w in report["warnings"])
    text = cli("report", "seq", check=True)
    assert "StatsWarning" not in text.stderr
    flat = text.stdout.replace("\n", " ")
    assert "INCONCLUSIVE" in flat and "SUPPORTED" not in flat and "NO EFFECT" not in flat
    assert "seed differences are the same value" in flat
