"""Prompt-format sensitivity: templates rendered, scored, logged, analyzed and reported."""

import json

import numpy as np
import pytest
import yaml

import labcoat
from helpers import cli
from labcoat import evals
from labcoat.errors import LabcoatError
from labcoat.evals import EvalItem

ITEMS = [EvalItem("qa", f"q{i}", f'What is "{i}" + 1?\nReply: yes', str(i + 1))
         for i in range(60)]


def test_builtin_templates_render_valid_json_and_yaml():
    item = ITEMS[3]
    chosen = evals.prompt_templates()
    assert list(chosen) == ["plain", "markdown", "json", "yaml"]
    assert evals.render(item, chosen["plain"]) == item.input + "\nAnswer:"
    assert "### Question\n\n" + item.input in evals.render(item, chosen["markdown"])
    as_json = json.loads(evals.render(item, chosen["json"]) + '4"}')
    assert as_json == {"question": item.input, "answer": "4"}
    as_yaml = yaml.safe_load(evals.render(item, chosen["yaml"]))
    assert as_yaml == {"question": item.input, "answer": None}


def test_user_templates_are_checked():
    chosen = evals.prompt_templates(["qa=Q: {input}\\nA:"], builtin=["plain"])
    assert evals.render(ITEMS[0], chosen["qa"]) == f"Q: {ITEMS[0].input}\nA:"
    with pytest.raises(LabcoatError, match=r"unknown field \{target\}"):
        evals.prompt_templates(["leak={input} {target}"])
    with pytest.raises(LabcoatError, match="never shows the item"):
        evals.prompt_templates({"empty": "Answer:"})
    with pytest.raises(LabcoatError, match="NAME=TEMPLATE"):
        evals.prompt_templates(["{input}"])
    with pytest.raises(LabcoatError, match="unknown template 'xml'"):
        evals.prompt_templates(builtin=["xml"])


def _toy(arm):
    """A deterministic scorer whose accuracy depends on the template it sees: under plain
    arm a is right on 75% of the items and b on 35%; under JSON the reverse (a 30%,
    b 80%); under markdown both 55% (b's right items shifted); YAML like plain."""
    rates = {"a": {"plain": 0.75, "json": 0.30, "markdown": 0.55, "yaml": 0.75},
             "b": {"plain": 0.35, "json": 0.80, "markdown": 0.55, "yaml": 0.35}}

    def model(prompt, item):
        kind = ("json" if prompt.startswith("{") else "markdown" if prompt.startswith("#")
                else "yaml" if prompt.startswith("question:") else "plain")
        i = int(item.id[1:])
        shift = 10 if (arm == "b" and kind == "markdown") else 0
        return float((i + shift) % 60 < rates[arm][kind] * 60)
    return model


def test_a_conclusion_that_flips_with_the_template_is_flagged():
    scores = {arm: evals.evaluate_templates(ITEMS, _toy(arm)) for arm in ("a", "b")}
    assert scores["a"].scores.mean(axis=0) == pytest.approx([0.75, 0.55, 0.30, 0.75])
    found = evals.format_sensitivity(scores, control="a")
    (c,) = found.comparisons
    assert c.verdict == "flips sign"
    assert c.per_template["plain"].estimate == pytest.approx(0.35 - 0.75)
    assert c.per_template["json"].estimate == pytest.approx(0.80 - 0.30)
    assert c.per_template["markdown"].estimate == pytest.approx(0.0)
    spread_a = found.arms[0].spread
    assert spread_a.estimate == pytest.approx(0.45) and spread_a.p_value < 0.01
    assert found.templates[spread_a.worst] == "json"


def test_a_batched_model_gives_the_same_scores_and_bad_returns_are_one_message():
    one = _toy("a")
    batched = evals.evaluate_templates(
        ITEMS, lambda prompts, items: [one(p, i) for p, i in zip(prompts, items, strict=True)],
        batched=True)
    assert np.array_equal(batched.scores, evals.evaluate_templates(ITEMS, one).scores)
    with pytest.raises(LabcoatError, match="returned 1 scores for 60 prompts"):
        evals.evaluate_templates(ITEMS, lambda prompts, items: [1.0], batched=True)
    with pytest.raises(LabcoatError, match="returned 'yes' for item 'q0'"):
        evals.evaluate_templates(ITEMS, lambda prompt, item: "yes")


def test_a_conclusion_that_holds_only_under_some_templates_loses_significance():
    scores = {"a": evals.evaluate_templates(ITEMS, _toy("a"), {"plain": "{input}",
                                                                "markdown": "# {input}"}),
              "b": evals.evaluate_templates(ITEMS, _toy("b"), {"plain": "{input}",
                                                                "markdown": "# {input}"})}
    (c,) = evals.format_sensitivity(scores).comparisons
    assert c.verdict == "loses significance"
    assert "significant under plain but not under markdown" in c.reason


def test_logged_templates_reach_the_store_and_the_report(home):
    for arm in ("a", "b"):
        run = labcoat.init(experiment="prompts", arm=arm, seed=0)
        evals.evaluate_templates(ITEMS, _toy(arm), run=run, step=10)
        run.finish()
    from labcoat import runner, store

    runner.ingest_adhoc_runs(store.open_store())  # what `labcoat status` would do first
    with store.open_store().session() as session:
        trials = store.find_experiment(session, "prompts").trials
        rows = store.variant_eval_items(session, [t.id for t in trials])
        assert len(rows) == 2 * 4 * 60 and {r.variant for r in rows} == {
            "plain", "markdown", "json", "yaml"}
    from labcoat import report as reports

    with store.open_store().session() as session:
        analysis = reports.analyze(session, store.find_experiment(session, "prompts"))
    report = reports.analysis_dict(analysis)["prompts"]
    assert report["templates"] == ["json", "markdown", "plain", "yaml"]
    (c,) = report["comparisons"]
    assert (c["variant"], c["control"], c["verdict"]) == ("b", "a", "flips sign")
    arm_a = report["arms"][0]["templates"]
    assert arm_a["json"]["point"] == pytest.approx(0.30)
    assert arm_a["json"]["low"] < 0.30 < arm_a["json"]["high"]
    exported = [json.loads(line) for line in
                cli("export", "prompts", "--items", check=True).stdout.splitlines()]
    assert {r["variant"] for r in exported} == {"plain", "markdown", "json", "yaml"}
    text = cli("report", "prompts", check=True).stdout
    assert "prompt-format sensitivity" in text and "FLIPS SIGN" in text
    assert np.isclose(report["arms"][1]["spread"]["estimate"], 0.45)
