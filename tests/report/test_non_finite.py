"""A run whose metric went NaN or inf is data: the report, its JSON and HTML, and the
dashboard name it and judge the others (issue 22, point 2)."""

import json

import pytest
from fastapi.testclient import TestClient
from scipy import stats as sps

from helpers import cli, stored_experiment
from labcoat.web import create_app

DESIGN = """name: {name}
hypothesis: {{claim: c, metric: loss, direction: decrease}}
command: "python train.py --seed {{seed}} --q {{q}}"
params: {{q: 0}}
arms:
  base: {{control: true}}
  hot: {{params: {{q: 1}}}}
seeds: 4
"""
NAN, INF = float("nan"), float("inf")


def _trials(hot_last):
    base = [2.0, 2.1, 1.9, 2.05]
    hot = [1.5, 1.6, 1.55, 1.45]
    trials = [{"key": f"base-s{i}", "arm": "base", "seed": i,
               "metrics": {"loss": [(1, 3.0), (2, v)]}} for i, v in enumerate(base)]
    trials += [{"key": f"hot-s{i}", "arm": "hot", "seed": i,
                "metrics": {"loss": [(1, 3.0), (2, v), (3, v)]}} for i, v in enumerate(hot)]
    trials[4]["metrics"]["loss"] = [(1, 3.0), (2, INF), (3, hot_last)]  # hot-s0
    trials[5]["metrics"]["loss"] = [(1, 3.0), (2, NAN), (3, 1.6)]  # hot-s1 recovers
    return trials, base, hot


def test_a_diverged_trial_is_named_and_the_rest_are_judged(home):
    trials, base, hot = _trials(NAN)
    stored_experiment("nan", DESIGN.format(name="nan"), trials)
    report = json.loads(cli("report", "nan", "--json", check=True).stdout)
    assert ["hot-s0", "diverged: loss is NaN from step 2; not counted for loss"] \
        in report["excluded"]
    assert any("hot-s1: loss was NaN/inf at step 2" in w for w in report["warnings"])
    comparison = report["results"][0]["comparisons"][0]
    expected = sps.ttest_ind(hot[1:], base, equal_var=False)  # hot-s0 left out
    assert comparison["seeds"]["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
    assert comparison["over"] == "4 base and 3 hot seeds"
    text = cli("report", "nan", check=True).stdout
    assert "hot-s0 - diverged: loss is NaN from step 2" in text and "Traceback" not in text
    html = cli("report", "nan", "--html", str(home / "r.html"), check=True)
    assert "Traceback" not in html.stderr
    assert "diverged: loss is NaN from step 2" in (home / "r.html").read_text()


def test_an_infinite_last_value_and_the_dashboard(home):
    trials, _, _ = _trials(-INF)
    stored_experiment("inf", DESIGN.format(name="inf"), trials)
    stored_experiment("fine", DESIGN.format(name="fine"), _trials(1.5)[0][6:])
    report = json.loads(cli("report", "inf", "--json", check=True).stdout)
    assert ["hot-s0", "diverged: loss is -inf from step 2; not counted for loss"] \
        in report["excluded"]
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    index = client.get("/")
    assert index.status_code == 200 and "fine" in index.text and "inf" in index.text
    page = client.get("/experiments/inf")
    assert page.status_code == 200 and "diverged" in page.text


def test_diagnose_takes_up_finished_trials_that_diverged(home):
    trials, _, _ = _trials(NAN)
    stored_experiment("nan", DESIGN.format(name="nan"), trials)
    found = json.loads(cli("diagnose", "nan", "--json", check=True).stdout)["diagnoses"]
    assert {d["trial"] for d in found} == {"hot-s0", "hot-s1"}  # done, but NaN/inf inside
    assert all(d["cause"] == "nan" and d["status"] == "done" for d in found)


def test_an_interval_leaving_0_1_for_a_0_1_metric_says_to_declare_bounds(home):
    design = DESIGN.format(name="acc").replace("metric: loss, direction: decrease",
                                               "metric: accuracy, direction: increase")
    values = {"base": [0.2, 0.9, 0.5, 0.3], "hot": [0.95, 0.99, 0.97, 0.98]}
    stored_experiment("acc", design, [
        {"key": f"{arm}-s{i}", "arm": arm, "seed": i, "metrics": {"accuracy": [(1, v)]}}
        for arm, vs in values.items() for i, v in enumerate(vs)])
    report = json.loads(cli("report", "acc", "--json", check=True).stdout)
    low = report["results"][0]["arms"][0]["overall"]["low"]
    assert low < 0  # t interval of [0.2, 0.9, 0.5, 0.3]: mean 0.475 -/+ 3.18 * 0.152
    assert any("declare `bounds: [0, 1]`" in w for w in report["warnings"])
    bounded = design.replace("direction: increase", "direction: increase, bounds: [0, 1]")
    stored_experiment("acc2", bounded.replace("name: acc", "name: acc2"), [
        {"key": f"{arm}-s{i}", "arm": arm, "seed": i, "metrics": {"accuracy": [(1, v)]}}
        for arm, vs in values.items() for i, v in enumerate(vs)])
    report = json.loads(cli("report", "acc2", "--json", check=True).stdout)
    assert report["results"][0]["arms"][0]["overall"]["low"] >= 0
    assert not any("declare `bounds" in w for w in report["warnings"])
