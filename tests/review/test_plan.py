"""`labcoat plan`: seeds, items and minimum detectable effects, checked against statsmodels."""

import json

import numpy as np
import pytest
from statsmodels.stats.power import TTestIndPower

from helpers import cli, fake_design
from labcoat import review, spec


def _design(tmp_path, extra=""):
    path = tmp_path / "plan.yaml"
    path.write_text(f"""name: plan
hypothesis: {{claim: c, metric: loss, direction: decrease, smallest_effect: 0.1, sd: 0.2{extra}}}
command: "python t.py {{a}} {{seed}}"
params: {{a: 0}}
arms: {{base: {{control: true}}, x: {{params: {{a: 1}}}}, y: {{params: {{a: 2}}}},
        z: {{params: {{a: 3}}}}}}
seeds: 4
""")
    return path


def test_seeds_and_minimum_detectable_effects_match_statsmodels(tmp_path):
    """Three variants against the control under Holm (the default): each comparison is
    planned at alpha 0.05 / 3, so d = 0.5 needs 86 seeds per arm, not the 64 of one test."""
    found = review.plan(spec.load_design(_design(tmp_path)))
    (h,) = found.hypotheses
    solver = TTestIndPower()
    assert h.comparisons == 3 and h.alpha == pytest.approx(0.05 / 3) and not h.paired
    assert h.analysis == ("two-sample t on seeds, Holm over 3 comparisons: alpha 0.0167 per "
                          "comparison")
    assert h.seeds_needed == int(np.ceil(solver.solve_power(0.1 / 0.2, alpha=0.05 / 3,
                                                            power=0.8))) == 86
    for n, mde in h.mde_by_seeds:
        d = solver.solve_power(nobs1=n, alpha=0.05 / 3, power=0.8)
        assert mde == pytest.approx(d * 0.2, rel=1e-3)
    assert found.factorial is not None  # three one-change arms: test them together
    assert found.factorial.design.n_runs == 8


@pytest.mark.parametrize(("extra", "comparisons", "alpha"), [
    ("correction: none", 3, 0.05),  # uncorrected: each at full alpha
    ("correction: bonferroni", 3, 0.05 / 3),
    ("correction: bh", 3, 0.05 / 3),  # conservative for BH
    ("arms: {base: {control: true}, x: {params: {a: 1}}}", 1, 0.05),  # one comparison
])
def test_plan_alpha_follows_the_family(tmp_path, extra, comparisons, alpha):
    """The per-comparison alpha is stats.family_alpha over the comparisons the design has."""
    text = _design(tmp_path).read_text()
    if extra.startswith("arms:"):
        text = text[:text.index("arms:")] + text[text.index("seeds:"):]
    path = tmp_path / "family.yaml"
    path.write_text(f"{text}{extra}\n")
    (h,) = review.plan(spec.load_design(path)).hypotheses
    assert (h.comparisons, h.alpha) == (comparisons, pytest.approx(alpha))
    assert h.seeds_needed == int(np.ceil(TTestIndPower().solve_power(0.5, alpha=alpha,
                                                                     power=0.8)))


def test_compare_lists_and_hypotheses_count_in_the_family(tmp_path):
    """The family is every hypothesis' variants (its `compare:` list if any): 1 + 3 = 4."""
    path = _design(tmp_path, ", compare: [x]")
    text = path.read_text().replace("seeds: 4", "seeds: 4\nhypotheses: [{claim: d, metric: acc, "
                                    "direction: increase, smallest_effect: 0.1, sd: 0.2}]")
    path.write_text(text)
    found = review.plan(spec.load_design(path))
    assert [h.comparisons for h in found.hypotheses] == [4, 4]
    assert found.hypotheses[0].alpha == pytest.approx(0.05 / 4)


def test_plan_from_a_pilot_in_the_store(home, tmp_path):
    pilot = fake_design(tmp_path / "pilot", steps=2, seeds=3, variant_quality=0.5)
    cli("run", str(pilot), check=True)
    path = tmp_path / "next.yaml"
    path.write_text(pilot.read_text().replace("name: fake", "name: next").replace(
        "direction: increase", "direction: increase\n  smallest_effect: 0.05"))
    data = json.loads(cli("plan", str(path), "--pilot", "fake", "--json", check=True).stdout)
    (h,) = data["hypotheses"]
    assert h["sd_source"] == "pilot fake" and h["sd"] > 0
    assert h["omega2"] > 0 and h["items_needed"] >= 2
    assert [n for n, _ in h["mde_by_items"]] == [50, 100, 200, 500, 1000, 2000]
    mdes = [m for _, m in h["mde_by_items"]]
    assert mdes == sorted(mdes, reverse=True)  # more items resolve smaller effects
    unknown = cli("plan", str(path), "--pilot", "nope")
    assert unknown.returncode == 2 and "no experiment named 'nope'" in unknown.stderr


def test_factorial_designs_plan_for_the_ols_effect_over_every_trial(tmp_path):
    """A 2^(3-1) fraction: each main effect is estimated from all 4 runs x seeds, so it
    needs far fewer seeds per run than two arms compared alone; the seeds found are the
    fewest whose simulated-checked power (stats.power_factorial) reaches 80%."""
    from labcoat import stats

    path = tmp_path / "fact.yaml"
    path.write_text("""name: fact
hypothesis: {claim: c, metric: loss, direction: decrease, smallest_effect: 0.2, sd: 0.2,
             compare: [a]}
command: "python t.py {a} {b} {c} {seed}"
params: {a: 0, b: 0, c: 0}
factors: {a: {levels: [0, 1]}, b: {levels: [0, 1]}, c: {levels: [0, 1]}}
fraction: ["c = a*b"]
seeds: 2
""")
    (h,) = review.plan(spec.load_design(path)).hypotheses
    assert h.analysis.startswith("OLS effect over 4 runs x seeds")
    power = [stats.power_factorial(s, 0.2, runs=4, terms=3, sd=0.2, alpha=h.alpha)
             for s in range(1 + 1, 40)]
    assert h.seeds_needed == 2 + next(i for i, p in enumerate(power) if p >= 0.8)
    two_arms = TTestIndPower().solve_power(1.0, alpha=h.alpha, power=0.8)
    assert h.seeds_needed < two_arms
