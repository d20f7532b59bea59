"""Reading per-item results: CSV, JSON, JSONL, lm-eval-harness samples; bad files named by line."""

import gzip
import json

import numpy as np
import pytest

from labcoat.errors import LabcoatError
from labcoat.evals import load_item_scores


def _lm_eval_lines(scores, *, filters=("none",), metrics=("acc",)):
    lines = []
    for doc_id, score in enumerate(scores):
        for f in filters:
            record = {"doc_id": doc_id, "doc": {"q": f"question {doc_id}"}, "target": "A",
                      "arguments": [["ctx", " A"]], "resps": [[[-1.0, False]]],
                      "filtered_resps": [[-1.0, False]], "filter": f, "metrics": list(metrics),
                      "doc_hash": "h", "prompt_hash": "p", "target_hash": "t"}
            for m in metrics:
                record[m] = score
            lines.append(json.dumps(record))
    return "\n".join(lines) + "\n"


def test_csv_with_task_and_cluster_columns(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("task,item,score,cluster\nmath,q1,1,p1\nmath,q2,0,p1\ncode,q1,0.5,p2\n")
    scores = load_item_scores(path)
    assert scores.keys() == [("math", "q1"), ("math", "q2"), ("code", "q1")]
    assert scores.scores.tolist() == [1.0, 0.0, 0.5]
    assert scores.clusters == ["p1", "p1", "p2"]


def test_json_list_and_jsonl_with_a_named_metric(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"items": [{"id": 1, "score": True},
                                                           {"id": 2, "score": False}]}))
    assert load_item_scores(tmp_path / "r.json").scores.tolist() == [1.0, 0.0]
    (tmp_path / "r.jsonl").write_text('{"item": "a", "f1": 0.25}\n\n{"item": "b", "f1": 0.75}\n')
    scores = load_item_scores(tmp_path / "r.jsonl", metric="f1")
    assert (scores.metric, scores.items, scores.scores.tolist()) == ("f1", ["a", "b"],
                                                                     [0.25, 0.75])


def test_lm_eval_samples_take_task_from_the_file_name_and_metric_from_metrics(tmp_path):
    path = tmp_path / "samples_arc_easy_2024-05-01T12-00-00.123456.jsonl"
    path.write_text(_lm_eval_lines([1.0, 0.0, 1.0]))
    scores = load_item_scores(path)
    assert (scores.format, scores.metric) == ("lm-eval-harness", "acc")
    assert scores.keys() == [("arc_easy", "0"), ("arc_easy", "1"), ("arc_easy", "2")]
    np.testing.assert_array_equal(scores.scores, [1.0, 0.0, 1.0])


def test_lm_eval_gzip_with_several_filters_needs_a_choice(tmp_path):
    path = tmp_path / "samples_gsm8k_2024-05-01T12-00-00.jsonl.gz"
    path.write_bytes(gzip.compress(_lm_eval_lines([1, 0], filters=("strict-match",
                                                                   "flexible-extract"),
                                                  metrics=("exact_match",)).encode()))
    with pytest.raises(LabcoatError, match="several filters .*flexible-extract, strict-match.*"
                                           "--filter"):
        load_item_scores(path)
    scores = load_item_scores(path, filter="strict-match")
    assert scores.items == ["0", "1"] and scores.metric == "exact_match"
    with pytest.raises(LabcoatError, match="no samples with filter 'nope'"):
        load_item_scores(path, filter="nope")


def test_lm_eval_several_metrics_need_a_choice(tmp_path):
    path = tmp_path / "samples_hellaswag_2024-05-01T12-00-00.jsonl"
    path.write_text(_lm_eval_lines([1, 0], metrics=("acc", "acc_norm")))
    with pytest.raises(LabcoatError, match=r"several metrics per sample \(acc, acc_norm\)"):
        load_item_scores(path)
    assert load_item_scores(path, metric="acc_norm").metric == "acc_norm"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("r.csv", "item,score\nq1,1\nq2,abc\n", r"r.csv:3: score 'abc' is not a number"),
        ("r.csv", "item,score\nq1,1\nq1,0\n", r"r.csv:3: item 'q1' of task '-' appears twice "
                                              r"\(first at .*r.csv:2\)"),
        ("r.csv", "name,value\nq1,1\n", "needs an item column"),
        ("r.jsonl", '{"item": "a", "score": 1}\n{oops\n', r"r.jsonl:2: not valid JSON"),
        ("r.jsonl", '{"item": "a", "score": NaN}\n', r"r.jsonl:1: score is nan"),
        ("r.json", '{"a": 1}', "expected a list of objects"),
        ("r.txt", "x", "unknown result format"),
    ],
)
def test_bad_files_name_the_place_and_the_fix(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(LabcoatError, match=message):
        load_item_scores(path)


def test_missing_file(tmp_path):
    with pytest.raises(LabcoatError, match="no such file"):
        load_item_scores(tmp_path / "absent.csv")
