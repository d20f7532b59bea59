"""Results computed elsewhere: lm-eval-harness --log_samples trees and Inspect AI logs.

Fixtures (tests/fixtures/imports) were written by hand from the documented formats:
lm-eval-harness `--log_samples` records (doc_id, doc, target, arguments, resps,
filtered_resps, filter, metrics, hashes, one key per metric; one
samples_<task>_<time>.jsonl per task beside results_<time>.json), and Inspect AI's
EvalLog (version, status, eval, plan, results, stats, samples with id, epoch, scores
{scorer: {value, answer, explanation}}) as its json/eval recorders write it
(inspect_ai/log/_recorders/eval.py: header.json, _journal/start.json,
samples/<id>_epoch_<n>.json, summaries/N.json).
"""

import json
import zipfile

import numpy as np
import pytest
from scipy import stats as sps

from helpers import FIXTURES, cli
from labcoat import evals
from labcoat.errors import LabcoatError

IMPORTS = FIXTURES / "imports"
LM_EVAL = IMPORTS / "lm_eval"
INSPECT_JSON = next((IMPORTS / "inspect").glob("*.json"))


def _eval_zip(path, values):
    """An Inspect .eval log of 24 samples, one epoch, the given score values."""
    spec = {"run_id": "R2", "task": "addition", "task_id": "T1", "model": "hf/tiny",
            "created": "2024-06-02T08:00:00+00:00", "dataset": {"name": "addition"}}
    samples = [{"id": i, "epoch": 1, "input": f"What is {i} + {i}?", "target": str(2 * i),
                "scores": {"match": {"value": v, "answer": "?"}}}
               for i, v in zip(range(1, 25), values, strict=True)]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("_journal/start.json", json.dumps({"version": 2, "eval": spec,
                                                       "plan": {"steps": []}}))
        for s in samples:
            z.writestr(f"samples/{s['id']}_epoch_1.json", json.dumps(s))
        z.writestr("summaries/1.json", json.dumps([{k: s[k] for k in ("id", "epoch", "input",
                                                                      "target", "scores")}
                                                   for s in samples]))
        z.writestr("header.json", json.dumps({"version": 2, "status": "success", "eval": spec,
                                              "results": {"total_samples": 24}}))
    return path


def test_an_lm_eval_output_tree_reads_every_task():
    scores = evals.load_item_scores(LM_EVAL / "model-a", metric="acc,exact_match",
                                    filter="strict-match,none")
    assert scores.format == "lm-eval-harness"
    tasks = {t: scores.scores[[x == t for x in scores.tasks]] for t in set(scores.tasks)}
    assert {t: v.size for t, v in tasks.items()} == {"arc_easy": 40, "gsm8k": 30}
    assert tasks["arc_easy"].mean() == pytest.approx(0.5)  # doc_id even
    assert tasks["gsm8k"].mean() == pytest.approx(10 / 30)  # strict-match: doc_id % 3 == 0
    flexible = evals.load_item_scores(
        next((LM_EVAL / "model-a").glob("samples_gsm8k_*")), filter="flexible-extract")
    assert flexible.scores.mean() == pytest.approx(0.5)


def test_lm_eval_ambiguity_is_one_clear_message():
    with pytest.raises(LabcoatError, match=r"several metrics per sample \(acc, acc_norm\)"):
        evals.load_item_scores(LM_EVAL / "model-a", filter="strict-match,none")
    with pytest.raises(LabcoatError, match="several filters"):
        evals.load_item_scores(LM_EVAL / "model-a", metric="acc,exact_match")


def test_inspect_json_and_eval_logs(tmp_path):
    a = evals.load_item_scores(INSPECT_JSON)
    assert (a.format, a.metric, set(a.tasks)) == ("inspect", "match", {"addition"})
    assert len(a.items) == 24  # sample 25 errored: left out, and said so
    assert any("1 sample(s) without a 'match' score" in n for n in a.notes)
    assert any("2 epochs per sample averaged" in n for n in a.notes)
    # even ids correct; ids divisible by 6 were partial (P = 0.5) in epoch 2: 0.75
    expected = {i: (0.75 if i % 6 == 0 else 1.0 if i % 2 == 0 else 0.0) for i in range(1, 25)}
    assert dict(zip(a.items, a.scores, strict=True)) == {str(i): v for i, v in expected.items()}
    values = [True if i % 3 else 0 for i in range(1, 25)]
    b = evals.load_item_scores(_eval_zip(tmp_path / "b.eval", values))
    assert b.scores.mean() == pytest.approx(16 / 24)
    result = evals.compare_item_scores(a, b)
    d = np.array([b.scores[b.items.index(i)] - a.scores[k] for k, i in enumerate(a.items)])
    t = sps.ttest_rel([b.scores[b.items.index(i)] for i in a.items], a.scores)
    assert result.overall.estimate == pytest.approx(d.mean())
    assert result.overall.se == pytest.approx(d.mean() / t.statistic)


def test_bad_inspect_logs(tmp_path):
    (tmp_path / "x.eval").write_bytes(b"not a zip")
    with pytest.raises(LabcoatError, match="not a zip file"):
        evals.load_item_scores(tmp_path / "x.eval")
    bad = _eval_zip(tmp_path / "bad.eval", ["maybe"] * 24)
    with pytest.raises(LabcoatError, match="'maybe' is not a number"):
        evals.load_item_scores(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(LabcoatError, match="no lm-eval-harness samples"):
        evals.load_item_scores(tmp_path / "empty")


def test_imported_results_are_paired_by_compare_and_the_report(home):
    from labcoat import store
    from labcoat.report import stored_item_scores
    from labcoat.runner import import_results

    out = cli("import", str(LM_EVAL / "model-a"), "--experiment", "ext", "--arm", "model-a",
              "--metric", "acc,exact_match", "--filter", "strict-match,none",
              check=True).stdout
    assert "imported 70 item scores" in out and "arc_easy (40), gsm8k (30)" in out
    import_results([LM_EVAL / "model-b"], experiment="ext", arm="model-b",
                   metric="acc,exact_match", filter="strict-match,none")
    data = json.loads(cli("compare", "model-a", "model-b", "--experiment", "ext", "--json",
                          check=True).stdout)
    assert data["paired"] is True
    arc = next(t for t in data["tasks"] if t["task"] == "arc_easy")
    # b right unless doc_id % 5 == 0, a right on even ids: mean difference 12/40
    assert arc["difference"]["estimate"] == pytest.approx(0.3)
    a = np.array([float(i % 2 == 0) for i in range(40)])
    b = np.array([float(i % 5 != 0) for i in range(40)])
    t = sps.ttest_rel(b, a)
    assert arc["difference"]["se"] == pytest.approx(0.3 / t.statistic)
    report = cli("report", "ext", check=True).stdout
    assert "evaluations" in report and "model-b - model-a" in report
    with store.open_store().session() as session:
        with pytest.raises(LabcoatError, match="no finished arm or trial 'model-c'"):
            stored_item_scores(session, store.find_experiment(session, "ext"), "model-c")


def test_results_are_not_imported_into_a_designed_experiment(home):
    from labcoat import store
    from labcoat.runner import import_results

    db = store.open_store()
    with db.session() as session:
        store.get_or_create_experiment(session, name="designed", design_yaml="name: designed",
                                       design_hash="abc")
        session.commit()
    db.close()
    with pytest.raises(LabcoatError, match="created by `labcoat run` from a design"):
        import_results([INSPECT_JSON], experiment="designed", arm="a")
    done = import_results([INSPECT_JSON], experiment="outside", arm="a", seed=3)
    assert (done.trial, done.tasks) == ("a-s3", {"addition": 24})


def test_a_task_run_twice_in_one_tree_is_refused(tmp_path):
    import shutil

    for model in ("model-a", "model-b"):  # same task names, different runs
        shutil.copytree(LM_EVAL / model, tmp_path / "out" / model)
    with pytest.raises(LabcoatError, match=r"item '0' is in both .*model-a.* and .*model-b"):
        evals.load_item_scores(tmp_path / "out", metric="acc,exact_match",
                               filter="strict-match,none")
