"""`labcoat report`'s verdict line on stored results with known values, checked against
statsmodels and scipy: sequential decisions, equivalence, negligible effects, power advice
for the analysis that ran, aliasing, bounded intervals (issue 17)."""

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from helpers import cli, stored_experiment
from labcoat import spec, stats

HEAD = """name: {name}
hypothesis: {{claim: c, metric: score, direction: increase{extra}}}
command: "python train.py --seed {{seed}} --q {{q}}"
params: {{q: 0}}
"""
TWO_ARMS = """arms:
  base: {{control: true}}
  better: {{params: {{q: 1}}}}
seeds: {seeds}
"""


def _store(name, design, values_by_arm, analysis_plan=None):
    """values_by_arm: {arm: [one value per seed]} -> a finished trial per value."""
    trials = [{"key": f"{arm}-s{seed}", "arm": arm, "seed": seed,
               "metrics": {"score": [(1, float(v))]}}
              for arm, values in values_by_arm.items() for seed, v in enumerate(values)]
    stored_experiment(name, design, trials, analysis_plan)
    return json.loads(cli("report", name, "--json", check=True).stdout)


def _design(name, seeds, extra="", arms=TWO_ARMS, tail=""):
    return HEAD.format(name=name, extra=extra) + arms.format(seeds=seeds) + tail


def _comparison(report, i=0):
    return report["results"][0]["comparisons"][i]


def test_after_sequential_stopping_the_verdict_is_the_sequential_decision(home):
    # No decisive sequential evidence at 8 seeds, but a fixed-n Welch test calls it refuted:
    # the headline must be the anytime-valid answer, the Welch verdict only for reference.
    rng = np.random.default_rng(6)
    base, better = rng.normal(0, 1, 8), rng.normal(-1.1, 1, 8)
    assert stats.welch(base, better).p_value < 0.05  # the fixed-n test would say "refuted"
    seq = stats.SequentialTest(alpha=0.05, max_seeds=8).update(base, better)
    assert seq.decision == "budget spent"
    rule = {"method": "t-mixture", "hypothesis": None, "alpha": 0.05, "max_seeds": 8,
            "paired_by": "seed"}
    plan = {"hash": "f" * 64, "frozen_at": "2026-12-03T00:00:00", "plan": {"sequential": rule}}
    report = _store("seq", _design("seq", 3), {"base": base, "better": better}, plan)
    c = _comparison(report)
    assert c["verdict"] == "inconclusive"
    assert "sequential" in c["reason"] and "8 seeds per arm" in c["reason"]
    assert c["fixed_n"].startswith("refuted")
    assert report["late_trials"] == []  # the shown verdict is the pre-registered rule's
    text = cli("report", "seq", check=True).stdout.replace("\n", " ")
    assert "INCONCLUSIVE" in text and "REFUTED" not in text
    assert "for reference only" in text
    page = home / "seq.html"
    cli("report", "seq", "--html", str(page), check=True)
    html = page.read_text(encoding="utf-8")
    assert "data-verdict='inconclusive'" in html and "for reference only" in html


def test_late_seeds_are_flagged_when_a_verdict_shown_is_not_the_sequential_one(home):
    base, better = [0.1, 0.3, 0.2, 0.4], [0.2, 0.5, 0.3, 0.6]
    design = HEAD.format(name="seq2", extra="").replace(
        "hypothesis: {claim: c, metric: score, direction: increase}",
        "hypotheses:\n  - {id: H1, claim: c, metric: score, direction: increase}\n"
        "  - {id: H2, claim: d, metric: score, direction: decrease}") + TWO_ARMS.format(seeds=4)
    rule = {"method": "t-mixture", "hypothesis": "H1", "alpha": 0.05, "max_seeds": 4,
            "paired_by": "seed"}
    plan = {"hash": "f" * 64, "frozen_at": "2026-12-03T00:00:00", "plan": {"sequential": rule}}
    report = _store("seq2", design, {"base": base, "better": better}, plan)
    assert report["results"][1]["comparisons"][0]["fixed_n"] == ""  # H2: a fixed-n verdict
    assert report["late_trials"]  # so seeds added after results were seen are flagged


def test_an_interval_inside_the_smallest_effect_is_no_effect(home):
    from statsmodels.stats.weightstats import ttost_ind

    rng = np.random.default_rng(0)
    base, better = rng.normal(1.0, 0.05, 10), rng.normal(1.0, 0.05, 10)
    report = _store("eq", _design("eq", 10, ", smallest_effect: 0.1"),
                    {"base": base, "better": better})
    c = _comparison(report)
    p_ref = ttost_ind(better, base, -0.1, 0.1, usevar="unequal")[0]
    assert p_ref < 0.05
    assert c["verdict"] == "no-effect"
    assert f"TOST) p={p_ref:.3g}" in c["reason"]
    assert "more data" not in c["reason"]
    assert "NO EFFECT" in cli("report", "eq", check=True).stdout
    page = home / "eq.html"
    cli("report", "eq", "--html", str(page), check=True)
    assert "verdict-no-effect" in page.read_text(encoding="utf-8")


def test_same_data_without_a_smallest_effect_stays_inconclusive(home):
    rng = np.random.default_rng(0)
    base, better = rng.normal(1.0, 0.05, 10), rng.normal(1.0, 0.05, 10)
    c = _comparison(_store("noeq", _design("noeq", 10), {"base": base, "better": better}))
    assert c["verdict"] == "inconclusive" and "more data would narrow" in c["reason"]


def test_a_significant_effect_smaller_than_the_smallest_effect_is_negligible(home):
    base = np.array([1.00, 1.01, 0.99, 1.02, 1.00, 0.98])
    better = base[::-1] + 0.03
    ref = sps.ttest_ind(better, base, equal_var=False)
    assert ref.pvalue < 0.05 and ref.confidence_interval(0.95).high < 0.5
    c = _comparison(_store("small", _design("small", 6, ", smallest_effect: 0.5"),
                           {"base": base, "better": better}))
    assert c["verdict"] == "negligible"
    c = _comparison(_store("big", _design("big", 6, ", smallest_effect: 0.01"),
                           {"base": base, "better": better}))
    assert c["verdict"] == "supported"


def test_paired_power_note_uses_the_sd_of_seed_differences(home):
    from statsmodels.stats.power import TTestPower

    rng = np.random.default_rng(1)
    seed_effect = rng.normal(0, 1.0, 5)  # large between-seed spread, shared by both arms
    base = seed_effect
    better = seed_effect + rng.normal(0, 0.1, 5)
    design = _design("pair", 5, ", smallest_effect: 0.05", tail="seed_analysis: paired\n")
    c = _comparison(_store("pair", design, {"base": base, "better": better}))
    sd = float(np.std(better - base, ddof=1))
    ref = math.ceil(TTestPower().solve_power(effect_size=0.05 / sd, alpha=0.05, power=0.8))
    assert c["verdict"] == "inconclusive"
    assert "paired t" in c["power_note"]
    assert f"80% power needs {max(ref, 2)} seeds per arm" in c["power_note"]
    assert f"SD of seed differences {sd:.3g}" in c["power_note"]


def test_power_note_plans_at_the_family_alpha(home):
    from statsmodels.stats.power import TTestIndPower

    arms = """arms:
  base: {{control: true}}
  v1: {{params: {{q: 1}}}}
  v2: {{params: {{q: 2}}}}
  v3: {{params: {{q: 3}}}}
seeds: {seeds}
"""
    rng = np.random.default_rng(2)
    values = {arm: rng.normal(0, 1, 4) for arm in ("base", "v1", "v2", "v3")}
    c = _comparison(_store("fam", _design("fam", 4, ", smallest_effect: 1.0", arms=arms),
                           values))
    a, b = values["base"], values["v1"]
    sd = math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    ref = math.ceil(TTestIndPower().solve_power(effect_size=1.0 / sd, alpha=0.05 / 3,
                                                power=0.8))
    assert "alpha 0.0167" in c["power_note"] and "Holm over 3 comparisons" in c["power_note"]
    assert f"80% power needs {ref} seeds per arm" in c["power_note"]


def test_a_main_effect_aliased_with_an_interaction_is_never_plainly_supported(home):
    design = HEAD.format(name="frac", extra="").replace("params: {q: 0}\n", "").replace(
        "{q}", "{a} {b} {c}") + """\
params: {a: 0, b: 0, c: 0}
factors:
  a: {levels: [0, 1]}
  b: {levels: [0, 1]}
  c: {levels: [0, 1]}
fraction: ["c = a*b"]
seeds: 3
"""
    parsed = spec.parse_design(design, "frac")
    rng = np.random.default_rng(4)
    values = {}
    for arm in spec.arm_specs(parsed):
        x = {f: 1 if arm.factors[f] == "1" else -1 for f in "abc"}
        # no main effect of c, a large a*b interaction: c's column equals a*b's
        values[arm.name] = 1.0 * x["a"] * x["b"] + rng.normal(0, 0.05, 3)
    report = _store("frac", design, values)
    by_name = {c["variant"]: c for c in report["results"][0]["comparisons"]}
    c = by_name["c=1"]
    assert c["seeds"]["p_value"] < 0.05 and c["seeds"]["estimate"] > 1.5  # c + a*b
    assert c["verdict"] == "aliased" and "only if ab is negligible" in c["reason"]
    assert by_name["a=1"]["verdict"] == "inconclusive"
    assert "ALIASED" in cli("report", "frac", check=True).stdout


ITEMS_DESIGN = """name: {name}
hypothesis: {{claim: c, metric: exact_match, source: items, direction: increase}}
command: "python train.py --seed {{seed}} --q {{q}}"
params: {{q: 0}}
arms:
  base: {{control: true}}
  better: {{params: {{q: 1}}}}
seeds: 3
"""


def _store_items(name, correct, tasks=("t",)):
    """correct: {arm: [items right out of 10, per seed]}, the same on every task."""
    trials = [{"key": f"{arm}-s{seed}", "arm": arm, "seed": seed,
               "items": {task: {f"i{i}": float(i < k) for i in range(10)} for task in tasks}}
              for arm, ks in correct.items() for seed, k in enumerate(ks)]
    stored_experiment(name, ITEMS_DESIGN.format(name=name), trials)
    return json.loads(cli("report", name, "--json", check=True).stdout)


def test_intervals_of_scores_in_0_1_stay_inside_0_1(home):
    correct = {"base": [10, 9, 6], "better": [10, 10, 8]}
    report = _store_items("bounded", correct)
    for arm in report["results"][0]["arms"]:
        values = np.array(correct[arm["arm"]]) / 10
        low, high = sps.t.interval(0.95, 2, loc=values.mean(), scale=sps.sem(values))
        overall = arm["overall"]
        assert overall["low"] == pytest.approx(max(low, 0.0))
        assert overall["high"] == pytest.approx(min(high, 1.0))
        assert 0.0 <= overall["low"] <= overall["high"] <= 1.0


def test_differences_of_scores_in_0_1_stay_inside_minus_1_1(home):
    # a huge seed spread: Welch's own interval leaves the range a difference can take
    c = _comparison(_store_items("wide", {"base": [0, 10, 0], "better": [10, 10, 10]},
                                 tasks=("u", "v")))
    ref = sps.ttest_ind([1, 1, 1], [0, 1, 0], equal_var=False).confidence_interval(0.95)
    assert ref.high > 1
    assert (c["seeds"]["low"], c["seeds"]["high"]) == pytest.approx((max(ref.low, -1), 1.0))
    for seeds, _ in c["per_task"].values():
        assert -1.0 <= seeds["difference"]["low"] <= seeds["difference"]["high"] <= 1.0


# --- issue 30, point 5 ------------------------------------------------------------------


@pytest.mark.parametrize("sign", [+1, -1])
def test_a_tiny_effect_of_either_sign_is_negligible(home, sign):
    """A drop of 0.002 with smallest effect 0.02 printed REFUTED, a rise NEGLIGIBLE: now
    both are negligible (scipy's Welch interval lies inside +-0.02, p < 0.05)."""
    base = np.array([0.500, 0.5005, 0.4995, 0.5010, 0.4990, 0.5000])
    other = base[::-1] + sign * 0.002
    ref = sps.ttest_ind(other, base, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert ref.pvalue < 0.05 and -0.02 < ci.low and ci.high < 0.02
    name = "up" if sign > 0 else "down"
    c = _comparison(_store(name, _design(name, 6, ", smallest_effect: 0.02"),
                           {"base": base, "better": other}))
    assert c["verdict"] == "negligible"
    text = cli("report", name, check=True).stdout
    assert "NEGLIGIBLE" in text and "REFUTED" not in text


def test_an_inconclusive_sequential_verdict_gives_the_rules_own_power(home):
    """The report said "80% power needs 9 seeds per arm" (a fixed paired t test) under a
    sequential verdict; the rule reaches ~32% there. The advice is now the rule's, the
    numbers those of stats.sequential_power on the same seed differences."""
    rng = np.random.default_rng(4)
    base = rng.normal(0.0, 1.0, 9)
    better = base + rng.normal(0.3, 1.0, 9)
    seq = stats.SequentialTest(alpha=0.05, smallest_effect=1.0, max_seeds=9)
    assert seq.update(base, better).decision == "budget spent"
    rule = {"method": "t-mixture", "hypothesis": None, "alpha": 0.05, "max_seeds": 9,
            "paired_by": "seed"}
    plan = {"hash": "f" * 64, "frozen_at": "2026-12-03T00:00:00", "plan": {"sequential": rule}}
    report = _store("seqpow", _design("seqpow", 9, ", smallest_effect: 1.0",
                                      tail="seed_analysis: paired\n"),
                    {"base": base, "better": better}, plan)
    c = _comparison(report)
    sd = float(np.std(better - base, ddof=1))
    ref = stats.sequential_power(1.0, sd=sd, alpha=0.05, max_seeds=9)
    assert c["verdict"] == "inconclusive"
    assert c["power_note"].startswith("the sequential rule's power")
    assert f"budget of 9 seeds per arm is {ref.power:.2f}" in c["power_note"]
    assert f"reaches 80% at {ref.seeds_needed} seeds per arm" in c["power_note"]
    assert c["power_note"] in c["reason"]
    flat = cli("report", "seqpow", check=True).stdout.replace("\n", " ")
    assert "80% power needs" not in flat and "80% power needs" not in c["fixed_n"]


def test_paired_items_p_value_and_interval_agree_at_small_n(home):
    """10 items, b right on 3 that a missed, none the other way (both seeds of an arm
    answer alike): the report said p=0.0495 with a 95% CI of [-0.044, +0.544]. Now the
    item comparison is the exact McNemar test (statsmodels: p = 0.25) with an interval
    that covers 0."""
    from statsmodels.stats.contingency_tables import mcnemar

    design = """name: items10
hypothesis: {claim: c, metric: exact_match, source: items, direction: increase}
command: "python train.py --seed {seed} --q {q}"
params: {q: 0}
arms:
  base: {control: true}
  better: {params: {q: 1}}
seeds: 2
"""
    right = {"base": [0] * 10, "better": [1, 1, 1] + [0] * 7}
    trials = [{"key": f"{arm}-s{seed}", "arm": arm, "seed": seed,
               "metrics": {"exact_match": [(1, float(np.mean(scores)) + 0.01 * seed)]},
               "items": {"t": {f"q{i}": float(s) for i, s in enumerate(scores)}}}
              for arm, scores in right.items() for seed in (0, 1)]
    stored_experiment("items10", design, trials)
    report = json.loads(cli("report", "items10", "--json", check=True).stdout)
    items = _comparison(report)["items"]
    ref = mcnemar([[7, 0], [3, 0]], exact=True).pvalue
    assert ref == pytest.approx(0.25)
    assert items["p_value"] == pytest.approx(ref)
    assert items["low"] < 0 < items["high"]
