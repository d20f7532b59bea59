"""The eval engine against independent references on a real (briefly trained) tinylm.

References: tinylm's own token-by-token greedy decoding (`score_examples`) and
`naive_scores`, which evaluates one item at a time with text comparison and
Python sums of log-probabilities.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from labcoat import evals
from labcoat.errors import LabcoatError
from labcoat.evals import EvalEngine, EvalItem, EvalSuite, InTrainingEval, Scorer, Tokenizer
from labcoat.sdk import Run, read_journal
from labcoat.workloads.tinylm import TOKENIZER, Config, eval_suite, make_eval_set, train
from labcoat.workloads.tinylm._tasks import EOS_ID, PAD_ID, TOKEN_ID, decode
from labcoat.workloads.tinylm._train import score_examples

EVAL_SET = make_eval_set(12)  # 120 items over ten tasks


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    """A tinylm trained just enough to get some items right and others wrong."""
    torch.set_num_threads(1)
    result = train(Config(width=32, depth=2, heads=4, steps=100, batch_size=16, warmup=20,
                          lr=1e-2, eval_every=0, eval_items=1, threads=1, seed=4))
    return result.model.eval()


def test_exact_match_equals_greedy_decoding_item_by_item(model: torch.nn.Module) -> None:
    suite = eval_suite(EVAL_SET)
    result = EvalEngine(model, TOKENIZER, suite).score()
    greedy = torch.cat([score_examples(model, xs) for xs in EVAL_SET.items.values()]).numpy()
    assert 0 < result.scores.mean() < 1  # a mix, or the comparison proves little
    assert (result.scores == greedy).all()
    assert (result.scores == evals.naive_scores(model, TOKENIZER, suite)).all()
    assert result.items == [i.id for i in suite.items] and result.metric == "exact_match"
    per_task = result.per_task()
    assert result.macro == pytest.approx(np.mean([s.mean() for s in per_task.values()]))


def test_subsets_and_batch_sizes_do_not_change_scores(model: torch.nn.Module) -> None:
    suite = eval_suite(EVAL_SET)
    full = EvalEngine(model, TOKENIZER, suite).score().scores
    small_batches = EvalEngine(model, TOKENIZER, suite, batch_tokens=40)
    picked = np.array([5, 77, 3, 119, 64])
    part = small_batches.score(picked)
    assert (part.scores == full[picked]).all() and (part.indices == picked).all()
    assert part.tasks == [suite.items[i].task for i in picked]
    assert (small_batches.score().scores == full).all()


def _multiple_choice_suite(rng: random.Random) -> EvalSuite:
    items = []
    for task, examples in EVAL_SET.items.items():
        for k, ex in enumerate(examples):
            answer = " ".join(ex.target)
            wrong = {" ".join(rng.choices(("0", "1", "a", "b", "yes", "no", "is", "are"),
                                          k=len(ex.target))) for _ in range(4)} - {answer}
            choices = [answer, *sorted(wrong)]
            rng.shuffle(choices)
            items.append(EvalItem(task=task, id=str(k), input=" ".join(ex.prompt),
                                  target=answer, choices=tuple(choices)))
    return EvalSuite("mc", tuple(items), Scorer(kind="multiple_choice"))


def test_multiple_choice_by_log_likelihood_matches_the_item_loop(model: torch.nn.Module) -> None:
    suite = _multiple_choice_suite(random.Random(0))
    result = EvalEngine(model, TOKENIZER, suite, batch_tokens=200).score()
    assert 0 < result.scores.mean() < 1 and result.metric == "acc"
    assert (result.scores == evals.naive_scores(model, TOKENIZER, suite)).all()


def test_one_token_choices_share_one_forward_row(model: torch.nn.Module) -> None:
    """An item whose choices are single tokens (A/B/C/D answers) runs one row, not one per
    choice; the scores still equal the one-forward-per-choice item loop's."""
    suite = _multiple_choice_suite(random.Random(1))
    fed: list[int] = []
    hook = model.register_forward_pre_hook(lambda _, args: fed.append(args[0].shape[0]))
    try:
        result = EvalEngine(model, TOKENIZER, suite, batch_tokens=200).score()
    finally:
        hook.remove()
    one_token = [len(TOKENIZER.encode(" " + item.target)) == 1 for item in suite.items]
    assert 40 < sum(one_token) < len(suite.items)  # both kinds of item
    expected = sum(1 if one else len(item.choices)
                   for one, item in zip(one_token, suite.items, strict=True))
    assert sum(fed) == expected
    assert (result.scores == evals.naive_scores(model, TOKENIZER, suite)).all()


def _compact(ids: list[int]) -> str:
    return "".join(decode(ids))


def _words_or_characters(text: str) -> list[int]:
    return [TOKEN_ID[t] for word in text.split()
            for t in ([word] if word in TOKEN_ID else list(word))]


def test_generated_answers_with_numeric_and_user_scorers(model: torch.nn.Module, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = Tokenizer(encode=_words_or_characters, decode=_compact, pad_id=PAD_ID,
                          eos_id=EOS_ID)
    items = tuple(EvalItem(task=task, id=str(k), input=" ".join(ex.prompt),
                           target="".join(ex.target))
                  for task in ("add", "count", "parity", "sort")
                  for k, ex in enumerate(EVAL_SET.items[task]))
    (tmp_path / "starts_right.py").write_text(
        "def first_char(item, text):\n    return float(text[:1] == item.target[:1])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for scorer in (Scorer(kind="numeric"), evals.parse_scorer("starts_right:first_char")):
        suite = EvalSuite("gen", items, scorer)
        engine = EvalEngine(model, tokenizer, suite, max_new_tokens=6, batch_tokens=64)
        scores = engine.score().scores
        assert (scores == evals.naive_scores(model, tokenizer, suite, max_new_tokens=6)).all()
    assert 0 < scores.mean() < 1


def test_too_long_items_and_empty_inputs_are_user_errors(model: torch.nn.Module) -> None:
    long = EvalItem(task="t", id="1", input=" ".join(["a"] * 40), target="a")
    with pytest.raises(LabcoatError, match="needs 42 tokens but the model takes 32"):
        EvalEngine(model, TOKENIZER, EvalSuite("s", (long,), Scorer())).score()
    empty = EvalItem(task="t", id="1", input=" ", target="a")
    with pytest.raises(LabcoatError, match="input tokenizes to nothing"):
        EvalEngine(model, TOKENIZER, EvalSuite("s", (empty,), Scorer())).score()
    with pytest.raises(LabcoatError, match="is not a tokenizer"):
        EvalEngine(model, object(), EvalSuite("s", (long,), Scorer()))


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _TimedModel(torch.nn.Module):
    """The model, with a fake clock advanced by a fixed cost per scored row."""

    def __init__(self, inner: torch.nn.Module, clock: _Clock, per_row: float) -> None:
        super().__init__()
        self.inner, self.clock, self.per_row = inner, clock, per_row
        self.max_len = inner.max_len

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        self.clock.now += self.per_row * tokens.shape[0]
        return self.inner(tokens)


def test_in_training_evals_fit_the_budget_on_one_fixed_subset(model: torch.nn.Module,
                                                              tmp_path: Path) -> None:
    clock = _Clock()
    step_seconds, per_item, every, steps, budget = 0.5, 0.002, 10, 30, 0.05
    suite = eval_suite(EVAL_SET)
    engine = EvalEngine(_TimedModel(model, clock, per_item), TOKENIZER, suite)
    run = Run(journal=tmp_path / "journal.jsonl", experiment="e", trial="t", attempt=1,
              arm=None, seed=None, params={}, adhoc=True)
    evaluator = InTrainingEval(engine, run, every=every, total_steps=steps, budget=budget,
                               seed=3, clock=clock)
    for step in range(1, steps + 1):
        clock.now += step_seconds  # one training step
        evaluator.after_step(step)
    run.finish()
    # 5% of 10 steps x 0.5 s = 0.25 s per evaluation; at 2 ms per item all 120 items fit.
    assert evaluator.subset_size == 120
    clock2 = _Clock()  # slower items (1/128 s each) and a 1/16 budget: exact binary fractions
    engine2 = EvalEngine(_TimedModel(model, clock2, 1 / 128), TOKENIZER, suite)
    evaluator2 = InTrainingEval(engine2, None, every=every, total_steps=steps, budget=1 / 16,
                                seed=3, clock=clock2)
    for step in range(1, steps + 1):
        clock2.now += step_seconds
        evaluator2.after_step(step)
    assert evaluator2.subset_size == 40  # (1/16 x 10 steps x 0.5 s) / (1/128 s per item)
    subsets = [evaluator2.results[s].items for s in (10, 20)]
    assert subsets[0] == subsets[1] and len(subsets[0]) == 40
    tasks = [evaluator2.results[10].tasks.count(t) for t in suite.tasks]
    assert max(tasks) - min(tasks) <= 1  # stratified by task
    assert len(evaluator2.results[30].items) == 120  # the last step scores everything

    records = [record for _, record in read_journal(tmp_path / "journal.jsonl").records]
    items = [r for r in records if r["kind"] == "items"]
    assert {r["step"] for r in items} == {10, 20, 30}
    assert sum(len(r["items"]) for r in items if r["step"] == 30) == 120
    logged = {r["step"]: r["metrics"] for r in records if r["kind"] == "log"}
    assert logged[10]["eval/items"] == 120 and logged[10]["exact_match"] == pytest.approx(
        evaluator.results[10].macro)
    events = {r["event"]: r for r in records if r["kind"] == "event"}
    assert events["eval.subset"]["data"]["seconds_per_item"] == pytest.approx(per_item)
    assert events["eval.subset"]["data"]["training_seconds_per_interval"] == pytest.approx(5.0)
    budget = events["eval.budget"]["data"]  # 3 evals of 120 items; 30 steps of training
    assert budget["eval_seconds"] == pytest.approx(3 * 120 * per_item)
    assert budget["fraction"] == pytest.approx(3 * 120 * per_item / (steps * step_seconds))


def test_budget_floor_and_bad_settings(model: torch.nn.Module) -> None:
    clock = _Clock()
    engine = EvalEngine(_TimedModel(model, clock, 1.0), TOKENIZER, eval_suite(EVAL_SET))
    evaluator = InTrainingEval(engine, None, every=1, total_steps=5, budget=0.05, clock=clock)
    clock.now += 0.01
    evaluator.after_step(1)
    assert evaluator.subset_size == 10  # never fewer than one item per task
    with pytest.raises(LabcoatError, match="eval budget 1.5 must be a fraction"):
        InTrainingEval(engine, None, every=1, total_steps=5, budget=1.5)


def test_in_training_evals_on_a_chosen_subset_file(tmp_path: Path) -> None:
    """tinylm with --eval-subset: cadence evals score exactly the file's items, the last all."""
    chosen = [("copy", "copy/0001"), ("agree", "agree/0000"), ("sort", "sort/0002")]
    path = tmp_path / "subset.json"
    path.write_text(json.dumps({"format": "labcoat.eval_subset", "version": 1, "items": [
        {"task": t, "item": i} for t, i in chosen]}))
    assert evals.load_subset_file(path) == chosen
    run = Run(journal=tmp_path / "journal.jsonl", experiment="e", trial="t", attempt=1,
              arm=None, seed=None, params={}, adhoc=True)
    train(Config(width=16, depth=1, heads=2, batch_size=8, steps=6, eval_every=3, eval_items=3,
                 threads=1, eval_subset=str(path)), run)
    run.finish()
    records = [r for _, r in read_journal(tmp_path / "journal.jsonl").records
               if r["kind"] == "items"]
    at_3 = {(r["task"], i) for r in records if r["step"] == 3 for i in r["items"]}
    assert at_3 == set(chosen)
    assert sum(len(r["items"]) for r in records if r["step"] == 6) == 30
    path.write_text(json.dumps({"format": "labcoat.eval_subset", "version": 1,
                                "items": [{"task": "copy", "item": "copy/9999"}]}))
    with pytest.raises(LabcoatError, match="1 of 1 items are not in suite 'tinylm' .*copy/9999"):
        train(Config(width=16, depth=1, heads=2, batch_size=8, steps=2, eval_every=1,
                     eval_items=3, threads=1, eval_subset=str(path)))
    path.write_text("{}")
    with pytest.raises(LabcoatError, match="not a labcoat eval subset"):
        evals.load_subset_file(path)
