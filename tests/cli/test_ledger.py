"""Predictions end to end (issue 33): a real `labcoat run` of a fake design with `predict:`,
resolved from labcoat's verdict, the change line in both reports, the ledger, and an edit
after the run started flagged everywhere."""

import json
import math

import pytest

from helpers import cli, fake_design

PREDICT = ("  predict: {supported: 0.7, effect: 0.3, interval: [0.1, 0.5], author: ada, "
           "tag: quality}\n")


def _with_prediction(design, predict=PREDICT):
    text = design.read_text(encoding="utf-8")
    design.write_text(text.replace("  direction: increase\n", "  direction: increase\n"
                                   + predict), encoding="utf-8")
    return design


@pytest.mark.slow  # a dozen `labcoat` subprocesses: about 100 s on a shared 2-core machine
def test_prediction_runs_resolves_and_reaches_the_ledger(home, tmp_path):
    design = _with_prediction(fake_design(tmp_path, steps=3, seeds=3))
    cli("run", str(design), check=True)
    report = json.loads(cli("report", "fake", "--json", check=True).stdout)
    verdict = report["results"][0]["comparisons"][0]["verdict"]
    effect = report["results"][0]["comparisons"][0]["seeds"]["estimate"]

    terminal = cli("report", "fake", check=True).stdout
    last = terminal.strip().splitlines()[-1]
    assert last.startswith("What changed: H1: prior 0.70 -> ")
    assert verdict.upper().replace("-", " ") in last

    ledger = json.loads(cli("ledger", "--json", check=True).stdout)
    (entry,) = ledger["entries"]
    outcome = "supported" if verdict == "supported" else "not supported"
    assert (entry["experiment"], entry["prior"], entry["outcome"]) == ("fake", 0.7, outcome)
    p = 0.7 if outcome == "supported" else 0.3
    assert entry["surprise"] == -math.log2(p)
    assert entry["observed"] == effect
    everyone = ledger["scores"][0]
    assert everyone["group"] == "everyone" and everyone["n"] == 1
    assert everyone["brier"]["brier"] == (0.7 - (outcome == "supported")) ** 2
    assert [s["group"] for s in ledger["scores"]] == ["everyone", "author ada", "tag quality"]
    assert "came true" in everyone["levels"][0]["words"]
    plain = cli("ledger", check=True).stdout
    assert "fake" in plain and "Brier" in plain and "your 70% predictions came true" in plain

    page = tmp_path / "ledger.html"
    cli("ledger", "--html", str(page), check=True)
    html = page.read_text(encoding="utf-8")
    assert "Prediction ledger" in html and "reliability-0" in html and "ada" in html

    # an edit after the run: refused without --amend, then flagged in every report
    edited = design.read_text(encoding="utf-8").replace("supported: 0.7", "supported: 0.95")
    design.write_text(edited, encoding="utf-8")
    refused = cli("run", str(design))
    assert refused.returncode != 0 and "predictions" in refused.stdout + refused.stderr
    cli("run", str(design), "--amend", "I now think it is sure", check=True)
    terminal = cli("report", "fake", check=True).stdout
    assert "prediction of H1 EDITED after trials started" in terminal
    assert "prediction EDITED after trials started" in terminal.strip().splitlines()[-1]
    html_report = tmp_path / "report.html"
    cli("report", "fake", "--html", str(html_report), check=True)
    assert "EDITED after trials started" in html_report.read_text(encoding="utf-8")
    (entry,) = json.loads(cli("ledger", "--json", check=True).stdout)["entries"]
    assert entry["prior"] == 0.7  # scored as stated before the first trial
    assert entry["edits"][0]["to"]["supported"] == 0.95


def test_prediction_may_change_freely_before_the_first_trial(home, tmp_path):
    """Registered but no trial started (a dry run): a new prediction is re-frozen, no edit."""
    from labcoat import spec, store
    from labcoat.runner._registration import register

    design = _with_prediction(fake_design(tmp_path, steps=3))
    db = store.open_store()
    try:
        with db.session() as session:
            loaded = spec.load_design(design)
            text = design.read_text(encoding="utf-8")
            register(session, loaded, text=text, path=str(design), trials=spec.expand(loaded))
            changed = text.replace("supported: 0.7", "supported: 0.4")
            register(session, spec.parse_design(changed), text=changed, path=str(design),
                     trials=spec.expand(loaded))
            plan = store.find_experiment(session, "fake").analysis_plan
    finally:
        db.close()
    assert plan["original_predictions"]["H1"]["supported"] == 0.4
    assert not plan.get("prediction_edits")


def test_plans_frozen_before_predictions_keep_their_hash(tmp_path):
    """A design without `predict:` freezes the plan it froze before the key existed: stores
    made by earlier versions are not asked for an amendment."""
    from labcoat import spec
    from labcoat.runner._registration import analysis_plan

    plain = spec.load_design(fake_design(tmp_path / "a"))
    plan = analysis_plan(plain)
    assert "predictions" not in plan and "predict" not in plan["hypotheses"][0]
    predicted = spec.load_design(_with_prediction(fake_design(tmp_path / "b")))
    both = analysis_plan(predicted)
    assert both["hypotheses"] == plan["hypotheses"]
    assert both["predictions"]["H1"]["supported"] == 0.7


def test_an_overconfident_author_is_flagged_in_the_ledger_scores():
    """The ledger's score of one author: 200 resolved forecasts whose log-odds are twice the
    truth's are flagged overconfident; the Brier score equals scikit-learn's."""
    import numpy as np

    from labcoat.analysis import Entry
    from labcoat.analysis._ledger import score

    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(7)
    q = rng.uniform(0.05, 0.95, 200)
    happened = rng.uniform(size=200) < q
    p = 1 / (1 + np.exp(-2 * np.log(q / (1 - q))))
    entries = [Entry("e", f"H{i}", "c", float(pi), "ada", None,
                     "supported" if hit else "not supported", ["x"], None)
               for i, (pi, hit) in enumerate(zip(p, happened, strict=True))]
    found = score("author ada", entries)
    assert found.flagged and "overconfident" in found.calibration_words
    assert found.brier.brier == pytest.approx(metrics.brier_score_loss(happened, p), abs=1e-12)


def test_three_outcome_predictions_are_scored_on_three_outcomes():
    """refuted: stated, inconclusive implied; the verdict REFUTED is the second outcome."""
    from labcoat.analysis import Entry
    from labcoat.analysis._ledger import score

    entries = [Entry("e", "H1", "c", 0.6, "ada", None, "not supported", ["refuted"], None,
                     three=(0.6, 0.3, 0.1), outcome3=1),
               Entry("e", "H2", "c", 0.5, "ada", None, "supported", ["supported"], None,
                     three=(0.5, 0.2, 0.3), outcome3=0)]
    found = score("author ada", entries)
    expected = ((0.6 ** 2 + 0.7 ** 2 + 0.1 ** 2) + (0.5 ** 2 + 0.2 ** 2 + 0.3 ** 2)) / 2
    assert (found.brier3, found.brier3_n) == (pytest.approx(expected), 2)
