"""Expected information of a design and the ranking of candidates (issue 33 point 3)."""

import json
import math

import pytest
from statsmodels.stats.power import TTestIndPower

from helpers import cli
from labcoat import review, spec


def _design(directory, name, prior, *, seeds=10, steps=100, arms=2):
    path = directory / f"{name}.yaml"
    variants = "".join(f", v{i}: {{params: {{a: {i}}}}}" for i in range(1, arms))
    predict = "" if prior is None else f", predict: {{supported: {prior}, author: ada}}"
    path.write_text(f"""name: {name}
hypothesis: {{claim: c, metric: loss, direction: decrease, smallest_effect: 0.1, sd: 0.1{predict}}}
command: "python t.py {{a}} {{seed}} {{steps}}"
params: {{a: 0, steps: {steps}}}
arms: {{base: {{control: true}}{variants}}}
seeds: {seeds}
""")
    return path


def _bits(prior, power, alpha):
    """I(claim; verdict) written out from entropies, independently of stats."""
    def h(p):
        return 0.0 if p in (0, 1) else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
    yes = prior * power + (1 - prior) * alpha
    return h(yes) - prior * h(power) - (1 - prior) * h(alpha)


def test_information_uses_the_power_statsmodels_gives(tmp_path):
    design = spec.load_design(_design(tmp_path, "a", 0.6))
    info = review.information(design, design.all_hypotheses[0])
    power = TTestIndPower().power(effect_size=1.0, nobs1=10, alpha=0.05)
    assert info.power == pytest.approx(power, abs=1e-3)
    assert info.false_positive == pytest.approx(0.025)
    assert info.bits == pytest.approx(_bits(0.6, info.power, 0.025), abs=1e-12)
    plan = review.plan(design)
    assert plan.hypotheses[0].information == pytest.approx(info.bits)
    assert (plan.cost, plan.cost_unit) == (2 * 10 * 100, "trial-steps")


def test_equal_cost_candidates_rank_the_uncertain_prior_first(tmp_path):
    paths = [_design(tmp_path, f"p{int(p * 10)}", p) for p in (0.9, 0.1, 0.5)]
    ranked = review.rank([(str(p), spec.load_design(p), {}) for p in paths])
    assert [c.name for c in ranked][0].endswith("p5.yaml")
    assert len({c.cost for c in ranked}) == 1
    out = json.loads(cli("plan", *map(str, paths), "--json", check=True).stdout)
    assert out["ranking"][0]["name"].endswith("p5.yaml")
    table = cli("plan", *map(str, paths), check=True).stdout
    assert table.index("p5.yaml") < table.index("p9.yaml")


def test_compute_divides_the_information(tmp_path):
    """Same prior, same power per comparison: the design with twice the steps ranks second;
    a design without a prior ranks last and says why."""
    cheap = _design(tmp_path, "cheap", 0.5, steps=100)
    dear = _design(tmp_path, "dear", 0.5, steps=200)
    blind = _design(tmp_path, "blind", None)
    ranked = review.rank([(str(p), spec.load_design(p), {}) for p in (dear, blind, cheap)])
    assert [c.name for c in ranked] == [str(cheap), str(dear), str(blind)]
    assert ranked[0].bits_per_cost == pytest.approx(2 * ranked[1].bits_per_cost)
    assert "predict" in ranked[2].why


def test_lint_warns_on_extreme_predictions_and_states_information(tmp_path):
    findings = review.lint(_design(tmp_path, "sure", 0.95))
    extreme = [f for f in findings if f.rule == "extreme-prediction"]
    assert len(extreme) == 1 and extreme[0].severity == "warning" and extreme[0].line == 2
    info = [f for f in findings if f.rule == "expected-information"]
    assert info and "bits" in info[0].message
    for prior in (0.1, 0.5, 0.9):
        assert not [f for f in review.lint(_design(tmp_path, "ok", prior))
                    if f.rule == "extreme-prediction"]
    assert [f for f in review.lint(_design(tmp_path, "low", 0.05))
            if f.rule == "extreme-prediction"]


def test_plan_refuses_candidates_with_several_designs(tmp_path):
    paths = [str(_design(tmp_path, n, 0.5)) for n in ("a", "b")]
    result = cli("plan", *paths, "--candidates", "x,y,z")
    assert result.returncode != 0 and "give one design" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("bad, message", [
    ("{supported: 1.0}", "less than 1"),
    ("{supported: 0.6, refuted: 0.3, inconclusive: 0.3}", "sum to 1"),
    ("{supported: 0.6, interval: [0.2, 0.1]}", "low < high"),
    ("{supported: 0.6, effect: 0.5, interval: [0.0, 0.1]}", "outside its interval"),
    ("{supported: 0.6, confidence: 0.8}", "confidence"),
])
def test_bad_predictions_are_refused_with_the_place(tmp_path, bad, message):
    path = _design(tmp_path, "bad", 0.5)
    path.write_text(path.read_text().replace("predict: {supported: 0.5, author: ada}",
                                             f"predict: {bad}"))
    findings = review.lint(path)
    errors = [f for f in findings if f.severity == "error"]
    assert errors and errors[0].line == 2 and message in errors[0].message
