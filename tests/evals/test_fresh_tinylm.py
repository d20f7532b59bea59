"""tinylm's fresh items: every label checked by a solver written here, differently from the
generators (sympy for sums, numpy for sorting and parity, Counter for counts and majority,
string rewriting for brackets); twins keep their parent's knobs and never repeat an eval
input; seeds regenerate items; knobs reach beyond training lengths and fit MAX_LEN."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import sympy

from helpers import cli
from labcoat.errors import LabcoatError
from labcoat.workloads import tinylm
from labcoat.workloads.tinylm import Example

SINGULAR = {"cat", "dog", "bird", "fox"}
PLURAL = {"cats", "dogs", "birds", "foxes"}


def solve(task: str, x: tuple[str, ...]) -> tuple[str, ...]:
    """The answer to `x`, computed without tinylm's generators."""
    if task == "copy":
        return tuple(x[i] for i in range(len(x)))
    if task == "reverse":
        return tuple(x[len(x) - 1 - i] for i in range(len(x)))
    if task == "sort":
        return tuple(str(d) for d in np.sort(np.array([int(c) for c in x])))
    if task == "add":
        return tuple(str(sympy.sympify("".join(x))))
    if task == "parity":
        return (str(int(np.sum(np.array(x, dtype=int))) % 2),)
    if task == "count":
        *xs, mark, query = x
        assert mark == "?"
        return (str(Counter(xs)[query]),)
    if task == "majority":
        (top, n), *rest = Counter(x).most_common()
        assert not rest or rest[0][1] < n, "a majority item must have a unique winner"
        return (top,)
    if task == "recall":
        *pairs, mark, query = x
        assert mark == "?"
        table = dict(zip(pairs[0::2], pairs[1::2], strict=True))
        assert len(table) == len(pairs) // 2, "keys must be distinct"
        return (table[query],)
    if task == "brackets":
        text = "".join(x)
        while "()" in text or "[]" in text:
            text = text.replace("()", "").replace("[]", "")
        return ("yes" if text == "" else "no",)
    if task == "agree":
        head = x[1]  # NP -> the N ...: the subject is always the second word
        assert head in SINGULAR | PLURAL
        return ("is" if head in SINGULAR else "are",)
    raise AssertionError(task)


@pytest.fixture(scope="module")
def eval_set() -> tinylm.EvalSet:
    return tinylm.make_eval_set(30)


@pytest.fixture(scope="module")
def twins(eval_set) -> list[tinylm.FreshExample]:
    return tinylm.fresh_twins(eval_set, 3, seed=5)


def test_twin_labels_agree_with_independent_solvers(twins):
    assert len(twins) == 10 * 30 * 3
    for twin in twins:
        ex = twin.example
        assert ex.target == solve(ex.task, ex.input), twin.id


def test_twins_keep_their_parents_knobs_and_never_repeat_an_eval_input(eval_set, twins):
    parents = {i: ex for task in eval_set.items
               for i, ex in zip(eval_set.ids[task], eval_set.items[task], strict=True)}
    held = eval_set.held_out()
    for twin in twins:
        parent = parents[twin.parent]
        assert twin.id.startswith(f"{twin.parent}~")
        assert twin.knobs == tinylm.knobs_of(parent) == tinylm.knobs_of(twin.example)
        assert (twin.example.task, twin.example.input) not in held
        if twin.example.task == "agree":  # same sentence shape, fresh words
            shape = [w if w in ("the", "that") else "-" for w in parent.input]
            assert [w if w in ("the", "that") else "-" for w in twin.example.input] == shape
    # Fresh numbers and words: most twins differ from each other too.
    assert len({t.example.input for t in twins}) > 0.95 * len(twins)


def test_seeds_regenerate_twins_and_the_same_seed_gives_the_same_set(eval_set, twins):
    for twin in twins[::7]:
        shape = None
        if twin.example.task == "agree":
            shape = eval_set.items["agree"][int(twin.parent.split("/")[1])].input
        again = tinylm.regenerate(twin.example.task, twin.knobs, twin.seed, shape)
        assert again == twin.example
    assert tinylm.fresh_twins(eval_set, 3, seed=5) == twins
    assert tinylm.fresh_twins(eval_set, 3, seed=6) != twins


@pytest.mark.parametrize(("task", "knobs"), [
    ("copy", {"length": 14}), ("reverse", {"length": 12}), ("sort", {"length": 14}),
    ("add", {"digits_a": 5, "digits_b": 3, "carries": 2}), ("parity", {"length": 28}),
    ("count", {"length": 20}), ("majority", {"length": 25}), ("recall", {"keys": 8}),
    ("brackets", {"length": 28, "balanced": 0}), ("agree", {"attractors": 6}),
])
def test_new_items_beyond_training_difficulty(task, knobs):
    items = tinylm.fresh_examples(task, 25, seed=1, **knobs)
    assert len({f.example.input for f in items}) == 25
    for item in items:
        ex = item.example
        assert ex.target == solve(task, ex.input)
        assert tinylm.knobs_of(ex) == item.knobs == {**knobs}
        assert len(ex.tokens) <= tinylm.MAX_LEN
        tinylm.encode(ex.tokens)  # every token is in tinylm's vocabulary


def test_add_knobs_count_carries():
    for item in tinylm.fresh_examples("add", 40, seed=2, digits_a=4, digits_b=4, carries=3):
        a, b = "".join(item.example.input).split("+")
        carries, carry = 0, 0
        for da, db in zip(reversed(a), reversed(b), strict=True):  # long addition by hand
            carry = int(int(da) + int(db) + carry > 9)
            carries += carry
        assert carries == 3


def test_bad_knobs_name_the_range():
    with pytest.raises(LabcoatError, match=r"copy knob length=15 must be an integer in 1-14"):
        tinylm.fresh_examples("copy", 3, length=15)
    with pytest.raises(LabcoatError, match="has no knob 'depth'"):
        tinylm.fresh_examples("sort", 3, depth=2)
    with pytest.raises(LabcoatError, match="must be even"):
        tinylm.fresh_examples("brackets", 3, length=7, balanced=1)
    with pytest.raises(LabcoatError, match="carries cannot happen"):
        tinylm.fresh_examples("add", 3, digits_a=1, digits_b=1, carries=3)
    with pytest.raises(LabcoatError, match="too few inputs"):
        tinylm.fresh_twins(tinylm.EvalSet({"parity": [Example("parity", ("0",), ("0",)),
                                                      Example("parity", ("1",), ("1",))]}))


def test_cli_writes_tinylm_twins_and_new_items(tmp_path):
    out = tmp_path / "fresh.jsonl"
    summary = json.loads(cli("evals", "fresh", "--tinylm", "--items", "3", "--twins", "2",
                             "--task", "sort", "--task", "add", "--out", str(out), "--json",
                             check=True).stdout)
    assert summary["items"] == 18 and summary["original"] == 6 and summary["fresh"] == 12
    records = [json.loads(x) for x in out.read_text().splitlines()]
    for record in records[6:]:
        assert record["parent"] and isinstance(record["seed"], int)
        assert tuple(record["target"].split()) == solve(record["task"],
                                                         tuple(record["input"].split()[1:-1]))
    cli("evals", "fresh", "--tinylm", "--task", "sort", "--knob", "length=13", "--items", "4",
        "--out", str(out), check=True)
    assert all(len(json.loads(x)["target"].split()) == 13 for x in out.read_text().splitlines())
    bad = cli("evals", "fresh", "--tinylm", "--task", "nope", "--out", str(out))
    assert bad.returncode == 2 and "no such tinylm task" in bad.stderr
    bad = cli("evals", "fresh", "--tinylm", "--knob", "length", "--out", str(out))
    assert bad.returncode == 2 and "NAME=INTEGER" in bad.stderr
