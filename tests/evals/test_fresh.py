"""Fresh items from templates: labels checked by independent solvers (the rendered text
parsed back and solved with sympy), seeds that regenerate each item, the difficulty knobs,
the file format, the CLI, and errors that name the template and the fix."""

from __future__ import annotations

import json
import re

import pytest
import sympy

from helpers import cli
from labcoat import evals
from labcoat.errors import LabcoatError
from labcoat.evals import Difficulty, TemplateError

TEMPLATES = """\
templates:
  - id: apples
    task: arithmetic
    text: >-
      {name} has {a} apples. {name} buys {b} more and eats {c}.
      How many apples does {name} have now?
    slots:
      name: [Ann, Bob, Carla, Dev, Ema]
      a: {min: 5, max: 40}
      b: {min: 2, max: 30}
      c: {min: 1, max: 5}
      other: [Finn, Gus, Hana]
      d: {min: 2, max: 9}
    answer: "a + b - c"
    constraints: ["c < a"]
    original: {name: Ann, a: 12, b: 7, c: 3, other: Finn, d: 4}
    distractors:
      - "{other} has {d} pears."
      - "{other}'s basket is {d + 1} years old."
  - id: speed
    task: physics
    text: "A train travels {distance} km in {hours} hours. What is its average speed in km/h?"
    slots:
      distance: {min: 20, max: 400}
      hours: {min: 2, max: 8}
    answer: "distance / hours"
    constraints: ["distance % hours == 0"]
    choices: ["distance / hours", "distance * hours", "distance + hours", "distance - hours"]
    original: {distance: 120, hours: 3}
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> evals.TemplateSuite:
    path = tmp_path_factory.mktemp("templates") / "math.yaml"
    path.write_text(TEMPLATES, encoding="utf-8")
    return evals.load_templates(path)


# --- independent solvers: read the question back from the text, solve with sympy ------------

def solve_apples(text: str) -> sympy.Integer:
    """Only the sentences about apples count; distractor sentences (pears, baskets) do not."""
    has = re.search(r"(\w+) has (\d+) apples\.", text)
    buys = re.search(r"buys (\d+) more and eats (\d+)\.", text)
    assert has and buys, text
    a, b, c = (sympy.Integer(x) for x in (has[2], buys[1], buys[2]))
    return a + b - c


def solve_speed(text: str) -> sympy.Rational:
    m = re.search(r"travels (\d+) km in (\d+) hours", text)
    assert m, text
    return sympy.Rational(int(m[1]), int(m[2]))


def test_labels_agree_with_an_independent_solver(suite):
    items = evals.fresh_items(suite, k=40, seed=3, difficulty=Difficulty(distractors=2))
    assert len(items) == 2 * 41
    for item in items:
        if item.task == "arithmetic":
            assert sympy.Integer(item.target) == solve_apples(item.input)
        else:
            speed = solve_speed(item.input)
            assert sympy.Rational(item.target) == speed
            # The options hold the right answer once, and the wrong ones as computed.
            m = re.search(r"travels (\d+) km in (\d+) hours", item.input)
            d, h = int(m[1]), int(m[2])
            assert sorted(map(sympy.Rational, item.choices)) == sorted(
                [speed, sympy.Integer(d * h), sympy.Integer(d + h), sympy.Integer(d - h)])
            assert item.choices.count(item.target) == 1


def test_originals_reproduce_the_published_values(suite):
    apples, speed = (evals.original_item(t) for t in suite.templates)
    assert apples.input == ("Ann has 12 apples. Ann buys 7 more and eats 3. How many apples "
                            "does Ann have now?")
    assert apples.target == "16" and apples.id == "apples"
    assert speed.target == "40" and speed.choices == ("40", "360", "123", "117")


def test_twins_reinstantiate_numbers_and_names_and_record_their_seed(suite):
    template = suite.templates[0]
    items = evals.twins(template, 30, seed=0)
    assert [i.id for i in items] == [f"apples~{j}" for j in range(30)]
    names = {i.metadata["slots"]["name"] for i in items}
    numbers = {i.metadata["slots"]["a"] for i in items}
    assert len(names) >= 4 and len(numbers) >= 15
    assert all(i.metadata["parent"] == "apples" for i in items)
    for item in items:  # the recorded seed and knobs give the item back, whole
        again = evals.instantiate(template, item.metadata["seed"], Difficulty(
            **item.metadata["knobs"]), item_id=item.id, parent="apples")
        assert (again.input, again.target, again.metadata) == (item.input, item.target,
                                                               item.metadata)
    assert [i.input for i in evals.twins(template, 30, seed=0)] == [i.input for i in items]
    assert [i.input for i in evals.twins(template, 30, seed=1)] != [i.input for i in items]


def test_difficulty_knobs(suite):
    apples, speed = suite.templates
    plain = evals.twins(apples, 50, seed=0)
    noisy = evals.twins(apples, 50, seed=0, difficulty=Difficulty(distractors=2))
    assert all("pears" not in i.input for i in plain)
    assert all("pears" in i.input and "basket" in i.input for i in noisy)
    assert all(i.input.endswith("How many apples does " + i.metadata["slots"]["name"]
                                + " have now?") for i in noisy)  # the question stays last
    big = evals.twins(apples, 50, seed=0, difficulty=Difficulty(magnitude=10))
    assert max(i.metadata["slots"]["a"] for i in big) > 40
    assert max(i.metadata["slots"]["a"] for i in plain) <= 40
    positions = {i.choices.index(i.target) for i in evals.twins(speed, 40, seed=0)}
    assert len(positions) == 4  # shuffled: the answer is not always first
    fixed = evals.twins(speed, 20, seed=0, difficulty=Difficulty(shuffle=False))
    assert {i.choices.index(i.target) for i in fixed} == {0}


def test_items_file_is_a_suite_labcoat_reads(suite, tmp_path):
    items = evals.fresh_items(suite, k=2, seed=0)
    path = tmp_path / "fresh.jsonl"
    assert evals.write_items(items, path) == 6
    loaded = evals.load_suite(path)
    assert [(i.task, i.id) for i in loaded.items] == [(i.task, i.id) for i in items]
    record = json.loads(path.read_text().splitlines()[1])
    assert record["parent"] == "apples" and isinstance(record["seed"], int)
    assert record["knobs"] == {"distractors": 0, "magnitude": 1.0, "shuffle": True}


def test_expressions_are_interpreted_not_evaluated():
    from labcoat.evals._fresh import evaluate  # a private helper of the module under test

    assert evaluate("max(a, b) // 2 if a > 1 else -a", {"a": 7, "b": 3}) == 3
    assert evaluate("str(a) + 'x'", {"a": 2}) == "2x"
    for bad in ("__import__('os').system('true')", "a.__class__", "open('f')",
                "[x for x in a]", "lambda: 1", "2 ** 1000"):
        with pytest.raises(TemplateError):
            evaluate(bad, {"a": [1]})


@pytest.mark.parametrize(("old", "new"), [
    ("answer: \"a + b - c\"", "answer: \"a + z\""),
    ("c: {min: 1, max: 5}", "c: {min: 9, max: 5}"),
    ("constraints: [\"c < a\"]", "constraints: [\"a > 1000\"]"),
    ("task: physics", "task: physics\n    colour: red"),
])
def test_bad_templates_name_the_template_and_the_fix(tmp_path, old, new):
    path = tmp_path / "bad.yaml"
    path.write_text(TEMPLATES.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(TemplateError) as info:
        evals.fresh_items(evals.load_templates(path), k=1)
    text = str(info.value)
    assert str(path) in text
    assert any(w in text for w in ("'z'", "min 9 > max 5", "constraint", "unknown field"))


def test_too_many_distractors_and_bad_knobs(suite):
    # A template with no distractors gets none, and records that it used none.
    item = evals.twins(suite.templates[1], 1, difficulty=Difficulty(distractors=2))[0]
    assert item.metadata["knobs"]["distractors"] == 0
    with pytest.raises(LabcoatError, match="magnitude"):
        Difficulty(magnitude=0.5)


def test_cli_writes_fresh_items_and_refuses_bad_flags(tmp_path):
    templates = tmp_path / "math.yaml"
    templates.write_text(TEMPLATES, encoding="utf-8")
    out = tmp_path / "fresh.jsonl"
    done = cli("evals", "fresh", str(templates), "--twins", "3", "--distractors", "1",
               "--out", str(out), "--json", check=True)
    summary = json.loads(done.stdout)
    assert summary == {"out": str(out), "items": 8, "original": 2, "fresh": 6, "seed": 0,
                       "tasks": ["arithmetic", "physics"]}
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    for record in lines:
        if record["task"] == "arithmetic":
            assert sympy.Integer(record["target"]) == solve_apples(record["input"])
    bad = cli("evals", "fresh", str(tmp_path / "none.yaml"), "--out", str(out))
    assert bad.returncode == 2 and "no such template file" in bad.stderr
    assert "Traceback" not in bad.stderr
    bad = cli("evals", "fresh", str(templates), "--magnitude", "0.5", "--out", str(out))
    assert bad.returncode == 2 and "magnitude=0.5 must be a number >= 1" in bad.stderr
    bad = cli("evals", "fresh", "--out", str(out))
    assert bad.returncode == 2 and "--tinylm" in bad.stderr
