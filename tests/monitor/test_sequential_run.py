"""`labcoat run --until-decisive`: rounds of seeds until an anytime-valid decision."""

import json

from helpers import FAKE_TRIAL, cli


def _design(tmp_path, variant_quality, variant_steps=2):
    path = tmp_path / "seq.yaml"
    path.write_text(f"""name: seq
hypothesis: {{claim: c, metric: exact_match, source: items, direction: increase,
             smallest_effect: 0.05}}
command: "{{python}} {FAKE_TRIAL} --steps {{steps}} --quality {{quality}} --seed {{seed}}"
params: {{quality: 0.3, steps: 2}}
arms: {{base: {{control: true}},
        better: {{params: {{quality: {variant_quality}, steps: {variant_steps}}}}}}}
seeds: 3
parallelism: 2
""")
    return path


def _seeds_per_arm():
    trials = json.loads(cli("show", "seq", "--json", check=True).stdout)["trials"]
    return {arm: sorted(t["seed"] for t in trials if t["arm"] == arm) for arm in ("base", "better")}


def test_a_clear_effect_stops_at_the_first_look(home, tmp_path):
    out = cli("run", str(_design(tmp_path, 0.7)), "--until-decisive", "--max-seeds", "12",
              check=True).stdout
    assert "round 1: 5 seeds per arm" in out and "round 2" not in out
    assert _seeds_per_arm() == {"base": [0, 1, 2, 3, 4], "better": [0, 1, 2, 3, 4]}
    report = json.loads(cli("report", "seq", "--json", check=True).stdout)
    assert report["sequential"]["better"]["decision"] == "supported"
    assert report["results"][0]["comparisons"][0]["verdict"] == "supported"
    assert report["late_trials"] == []  # added by the pre-registered rule, not by peeking
    assert report["registration"]["plan"]["sequential"]["max_seeds"] == 12


def test_no_effect_adds_rounds_until_the_budget(home, tmp_path):
    # same quality, other random draws (more steps): no effect, but noise
    out = cli("run", str(_design(tmp_path, 0.3, variant_steps=3)), "--until-decisive",
              "--max-seeds", "8",
              "--round-size", "2", check=True).stdout
    assert "round 3: 8 seeds per arm" in out and "round 4" not in out
    assert _seeds_per_arm()["better"] == list(range(8))
    report = json.loads(cli("report", "seq", "--json", check=True).stdout)
    assert report["sequential"]["better"]["decision"] in ("budget spent", "no effect")
    # the headline is the sequential decision, never the fixed-n test on stopped seeds
    (comparison,) = report["results"][0]["comparisons"]
    assert comparison["verdict"] == {"budget spent": "inconclusive", "no effect": "no-effect"}[
        report["sequential"]["better"]["decision"]]
    assert comparison["fixed_n"] and "sequential" in comparison["reason"]
