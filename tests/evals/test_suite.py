"""Eval suites as data: items with choices and metadata, scorers, lm-eval-harness task YAML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labcoat import evals
from labcoat.errors import LabcoatError
from labcoat.evals import EvalItem, Scorer, parse_scorer, score_text


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_items_keep_choices_and_metadata_and_pick_the_scorer(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "arc.jsonl", [
        {"id": "q1", "input": "Sky colour?", "choices": ["red", "blue"], "target": "blue",
         "source": "web", "difficulty": 2},
        {"id": "q2", "input": "2+2?", "choices": ["3", "4"], "target": 1, "cluster": "math"},
    ])
    suite = evals.load_suite(path)
    assert suite.scorer == Scorer(kind="multiple_choice") and suite.name == "arc"
    q1, q2 = suite.items
    assert q1.choices == ("red", "blue") and q1.metadata == {"source": "web", "difficulty": 2}
    assert q2.target == "1" and q2.cluster == "math" and q2.task == "arc"
    free = _write_jsonl(tmp_path / "free.jsonl", [{"id": "a", "input": "x", "target": "0"}])
    assert evals.load_suite(free).scorer.kind == "exact_match"
    assert evals.load_suite(free).items[0].target == "0"  # a falsy target is kept
    assert evals.load_suite(free, "numeric:0.5").scorer == Scorer(kind="numeric", abs_tol=0.5)


def test_csv_choices_as_json_or_bars(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('id,input,choices,target\n1,pick,"[""a"", ""b""]",a\n2,pick,c|d|e,2\n',
                    encoding="utf-8")
    items = evals.load_eval_items(path)
    assert [i.choices for i in items] == [("a", "b"), ("c", "d", "e")]
    path.write_text('id,input,choices,target\n1,pick,"[""a"", ",a\n', encoding="utf-8")
    with pytest.raises(LabcoatError, match=r"t\.csv:2: choices .* not a valid JSON list"):
        evals.load_eval_items(path)


@pytest.mark.parametrize(("text", "target", "scorer", "expected"), [
    (" Paris\n", "Paris", "exact_match", 1.0),
    ("paris", "Paris", "exact_match", 0.0),
    ("The answer is 1,234.", "1234", "numeric", 1.0),
    ("about 3.14159", "3.1416", "numeric:0.001", 1.0),
    ("about 3.14159", "3.1416", "numeric", 0.0),
    ("-2e3 apples", "-2000", "numeric", 1.0),
    ("no number here", "7", "numeric", 0.0),
])
def test_text_scorers_on_worked_examples(text: str, target: str, scorer: str,
                                         expected: float) -> None:
    item = EvalItem(task="t", id="1", input="q", target=target)
    assert score_text(parse_scorer(scorer), item, text) == expected


def test_user_function_scorer_is_imported_by_path(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_scoring.py").write_text(
        "def judge(item, text):\n    return float(item.target.lower() in text.lower())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    scorer = parse_scorer("my_scoring:judge")
    assert scorer.kind == "function" and scorer.metric == "score"
    item = EvalItem(task="t", id="1", input="q", target="Rome")
    assert score_text(scorer, item, "it is rome") == 1.0
    with pytest.raises(LabcoatError, match="my_scoring has no function 'nope'"):
        parse_scorer("my_scoring:nope")
    with pytest.raises(LabcoatError, match="cannot import 'no_such_module_xyz'"):
        parse_scorer("no_such_module_xyz:f")
    with pytest.raises(LabcoatError, match="choose between exact_match, multiple_choice"):
        parse_scorer("bleu")


def test_multiple_choice_suite_needs_choices_everywhere(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "input": "x", "target": "y"}])
    with pytest.raises(LabcoatError, match="item 'a' of task 't' has no choices"):
        evals.load_suite(path, "multiple_choice")


def test_stratified_order_is_balanced_seeded_and_nested() -> None:
    items = [EvalItem(task=t, id=str(i), input="x", cluster=f"c{i % c}")
             for t, n, c in (("a", 30, 3), ("b", 6, 2), ("c", 12, 1)) for i in range(n)]
    suite = evals.EvalSuite("s", tuple(items), Scorer())
    order = suite.stratified_order(seed=1)
    assert sorted(order.tolist()) == list(range(len(items)))  # a permutation
    assert (order == suite.stratified_order(seed=1)).all()
    assert not (order == suite.stratified_order(seed=2)).all()
    for k in (3, 9, 15):  # every prefix: tasks equally represented while they have items
        tasks = [items[i].task for i in order[:k]]
        assert tasks.count("a") == tasks.count("b") == tasks.count("c") == k // 3
    first_a = [items[i].cluster for i in order[:30] if items[i].task == "a"][:3]
    assert sorted(first_a) == ["c0", "c1", "c2"]  # clusters take turns within a task


# --- lm-eval-harness task YAML ---------------------------------------------------------------


def _task(tmp_path: Path, yaml_text: str) -> Path:
    path = tmp_path / "task.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    return path


def test_lm_eval_multiple_choice_task_with_templates(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "test.jsonl", [
        {"question": "Which is a fruit?", "options": ["carrot", "apple"], "label": 1},
        {"question": "Which is a colour?", "options": ["green", "table"], "label": 0},
    ])
    path = _task(tmp_path, """
task: tiny_mc
dataset_path: json
dataset_kwargs:
  data_files: {test: test.jsonl}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_target: label
doc_to_choice: "{{options}}"
metric_list:
  - metric: acc
""")
    suite = evals.load_suite(path)
    assert suite.name == "tiny_mc" and suite.scorer.kind == "multiple_choice"
    assert suite.delimiter == " "
    first, second = suite.items
    assert (first.task, first.id, first.input) == ("tiny_mc", "0",
                                                   "Question: Which is a fruit?\nAnswer:")
    assert first.choices == ("carrot", "apple") and first.target == "apple"
    assert second.target == "green" and second.id == "1"


def test_lm_eval_generation_task_from_csv_with_rendered_target(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("a,b,sum\n2,3,5\n10,4,14\n", encoding="utf-8")
    path = _task(tmp_path, """
task: adding
dataset_path: csv
dataset_kwargs: {data_files: data.csv}
output_type: generate_until
doc_to_text: "{{a}} + {{b}} ="
doc_to_target: "{{sum}}"
generation_kwargs: {until: ["\\n"]}
""")
    suite = evals.load_suite(path)
    # no target_delimiter between prompt and answer: lm-eval-harness compares a
    # generation with the bare target (its delimiter only joins log-likelihood requests)
    assert suite.scorer.kind == "exact_match" and suite.delimiter == ""
    assert [(i.input, i.target) for i in suite.items] == [("2 + 3 =", "5"), ("10 + 4 =", "14")]


@pytest.mark.parametrize(("body", "message"), [
    ("process_docs: !function utils.process_docs\n", "unsupported lm-eval-harness keys: "
     "process_docs"),
    ("include: base.yaml\nfilter_list: []\n", "unsupported lm-eval-harness keys: filter_list, "
     "include"),
    ("num_fewshot: 5\n", "num_fewshot > 0"),
])
def test_lm_eval_unsupported_keys_end_in_one_message(tmp_path: Path, body: str,
                                                     message: str) -> None:
    path = _task(tmp_path, "task: t\ndataset_path: json\ndataset_kwargs: {data_files: x.jsonl}\n"
                 "doc_to_text: q\ndoc_to_target: a\n" + body)
    with pytest.raises(LabcoatError, match=message) as err:
        evals.load_suite(path)
    assert "documented subset" in str(err.value)


def test_lm_eval_bad_inputs(tmp_path: Path) -> None:
    path = _task(tmp_path, "task: t\ndataset_path: cais/mmlu\ndoc_to_text: q\ndoc_to_target: a\n")
    with pytest.raises(LabcoatError, match="dataset_path 'cais/mmlu' is not a local format"):
        evals.load_suite(path)
    path = _task(tmp_path, "task: t\ndataset_path: json\ndataset_kwargs: {data_files: x.jsonl}\n"
                 "doc_to_text: q\ndoc_to_target: a\n")
    with pytest.raises(LabcoatError, match=r"x\.jsonl: data file not found"):
        evals.load_suite(path)
    _write_jsonl(tmp_path / "x.jsonl", [{"q": "hi", "a": "yo"}])
    path = _task(tmp_path, "task: t\ndataset_path: json\ndataset_kwargs: {data_files: x.jsonl}\n"
                 "doc_to_text: '{{ question }}'\ndoc_to_target: a\n")
    with pytest.raises(LabcoatError, match=r"doc_to_text template .* failed: 'question' is "
                       "undefined; fields are a, q"):
        evals.load_suite(path)
    path = _task(tmp_path, "task: t\n  bad: [\n")
    with pytest.raises(LabcoatError, match=r"task\.yaml:2: not valid YAML"):
        evals.load_suite(path)
    path = _task(tmp_path, "task: t\ndataset_path: json\ndataset_kwargs: {data_files: x.jsonl}\n"
                 "doc_to_text: q\ndoc_to_target: a\noutput_type: loglikelihood\n")
    with pytest.raises(LabcoatError, match="output_type 'loglikelihood' is not supported"):
        evals.load_suite(path)


def test_numeric_suite_needs_numbers_in_targets(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "input": "x", "target": "12"},
                                               {"id": "b", "input": "y", "target": "twelve"}])
    with pytest.raises(LabcoatError, match="item 'b' of task 't' has target 'twelve', which "
                       "holds no number"):
        evals.load_suite(path, "numeric")


def test_tokenizer_adapter_reads_hugging_face_style_ids() -> None:
    class HFStyle:  # the attribute names of a Hugging Face tokenizer
        eos_token_id = 7
        pad_token_id = None

        def encode(self, text: str) -> list[int]:
            return [ord(c) for c in text]

        def decode(self, ids: list[int]) -> str:
            return "".join(map(chr, ids))

    tok = evals.as_tokenizer(HFStyle())
    assert (tok.eos_id, tok.pad_id) == (7, 7)  # no pad id: EOS pads (padding is never judged)
    assert tok.decode(tok.encode("hi")) == "hi"
    with pytest.raises(LabcoatError, match="int is not a tokenizer"):
        evals.as_tokenizer(3)
