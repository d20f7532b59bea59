"""`labcoat evals harvest` and `regress` on a planted scenario (issue 35, "Done when"):
per-item results of 3 checkpoints x 3 seeds in a real SQLite store, 50 planted failures
among 200 items (10 exact duplicates, 10 near duplicates, 10 failing in 1 of 3 seeds,
5 regressions at the last checkpoint). Dedup is scored against the planted truth,
pass@k against brute-force enumeration of k-subsets and Inspect's own reducers."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from helpers import cli, shared_home, use_home

STEPS = (100, 200, 300)
SEEDS = (0, 1, 2)
TEMPLATES = (
    "{name} has {a} {obj}s and buys {b} more. How many {obj}s does {name} have now?",
    "A box holds {a} {obj}s. {name} takes {b} of them out. How many {obj}s are left in the box?",
    "{name} reads {a} pages of a book about {obj}s on Monday and {b} pages on Tuesday. How many "
    "pages did {name} read in all?",
    "Each of {b} shelves holds {a} {obj}s. How many {obj}s does {name} keep on the shelves?",
)
ANSWERS = (lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a + b, lambda a, b: a * b)
NAMES = ("Ann", "Bob", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivo", "Jun")
OBJECTS = ("apple", "pear", "marble", "stamp", "coin", "shell", "card", "pencil", "brick")
NEAR_EDITS = (  # small rewrites a human would call "the same question"
    lambda t: t.replace(" now?", "?"),
    lambda t: "Question: " + t,
    lambda t: t + " Answer with a number.",
    lambda t: t.replace("How many", "how many").replace(".", " ."),
    lambda t: t.replace(" of them", ""),
)


def scenario(seed: int = 35) -> dict:
    """200 items; per-item scores at 3 steps x 3 seeds; the planted truth."""
    rng = np.random.default_rng(seed)
    combos = [(t, a, b) for t in range(len(TEMPLATES)) for a in range(12, 60)
              for b in range(2, 10)]
    chosen = rng.choice(len(combos), size=160, replace=False)
    items = {}
    for n, index in enumerate(chosen):
        t, a, b = combos[index]
        text = TEMPLATES[t].format(name=NAMES[rng.integers(len(NAMES))],
                                   obj=OBJECTS[rng.integers(len(OBJECTS))], a=a, b=b)
        items[f"q{n:03d}"] = (text, str(ANSWERS[t](a, b)))
    ids = list(items)
    base, flaky, regress = ids[:15], ids[15:25], ids[25:30]
    truth_pairs = set()
    for i in range(10):  # exact duplicates of base 0-9: 5 byte-identical, 5 recased/spaced
        text, target = items[base[i]]
        copy = text if i < 5 else "  " + text.upper().replace(" ", "  ") + " "
        items[f"x{i:02d}"] = (copy, target)
        truth_pairs.add(frozenset((f"x{i:02d}", base[i])))
    for i in range(10):  # near duplicates of base 5-14
        text, target = items[base[5 + i]]
        items[f"n{i:02d}"] = (NEAR_EDITS[i % len(NEAR_EDITS)](text), target)
        truth_pairs.add(frozenset((f"n{i:02d}", base[5 + i])))
    for i in range(5, 10):  # base 5-9 have an exact and a near copy: all three are one item
        truth_pairs.add(frozenset((f"x{i:02d}", f"n{i - 5:02d}")))
    for i in range(20):  # fill to 200 items with passing free-text ones
        words = rng.choice(["river", "stone", "light", "north", "paper", "glass", "cloud",
                            "field", "metal", "story", "green", "quiet"], size=9)
        items[f"s{i:02d}"] = ("Which word comes first in: " + " ".join(words) + "?", words[0])
    failing = set(base) | {k for k in items if k[0] in "xn"}
    scores = {}
    for step, seed_ in itertools.product(STEPS, SEEDS):
        for item in items:
            passed = item not in failing
            if item in flaky and seed_ == 1:
                passed = False
            if item in regress and step == STEPS[-1]:
                passed = False
            scores[(step, seed_, item)] = float(passed)
    assert len(failing | set(flaky) | set(regress)) == 50
    return {"items": items, "scores": scores, "base": base, "flaky": flaky,
            "regress": regress, "truth_pairs": truth_pairs,
            "failing": failing | set(flaky) | set(regress)}


def write_store(plan: dict, suite_file: Path) -> None:
    from labcoat import store

    db = store.open_store()
    with db.session() as session:
        exp = store.Experiment(name="harvest-demo", design_path=str(suite_file.parent /
                                                                     "design.yaml"),
                               design_yaml=f"name: harvest-demo\neval:\n  suite: "
                                           f"{suite_file.name}\n", design_hash="0" * 64)
        session.add(exp)
        session.flush()
        for seed in SEEDS:
            trial = store.Trial(key=f"base-s{seed}", arm="base", seed=seed, params={},
                                status="pending")
            exp.trials.append(trial)
            session.flush()
            attempt = store.start_attempt(session, trial, run_dir="/nonexistent", host="test")
            store.record_provenance(session, attempt, {"code": {"commit": f"c0ffee{seed}"}})
            store.upsert_eval_items(session, [
                {"trial_id": trial.id, "attempt_id": attempt.id, "step": step, "task": "arith",
                 "item": item, "variant": "", "score": plan["scores"][(step, seed, item)]}
                for step in STEPS for item in plan["items"]])
            if seed == 2:  # an input recorded with a crash event and one with a guard alert
                store.insert_events(session, [{
                    "trial_id": trial.id, "attempt_id": attempt.id, "stream": "journal",
                    "seq": 1, "step": 250, "level": "error", "kind": "crash.input",
                    "message": "tokenizer crashed", "time": time.time(),
                    "data": {"input": "Summarize: \u0000\ufffd weird bytes", "task": "crash"}}])
                store.insert_alerts(session, [{
                    "trial_id": trial.id, "attempt_id": attempt.id, "seq": 2, "step": 260,
                    "rule": "loss.spike", "severity": "error", "message": "spike",
                    "time": time.time(), "evidence": {"input": "A prompt that spiked the loss"}}])
            attempt.last_step = STEPS[-1]
            store.end_attempt(session, attempt, exit_code=0, cause="exit 0", trial_status="done")
        session.commit()
    db.close()


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("harvest")
    plan = scenario()
    suite_file = root / "suite.jsonl"
    suite_file.write_text("".join(json.dumps({"task": "arith", "id": k, "input": t,
                                              "target": a}) + "\n"
                                  for k, (t, a) in plan["items"].items()), encoding="utf-8")
    with shared_home(root / "home") as home:
        write_store(plan, suite_file)
        out = cli("evals", "harvest", "harvest-demo", "--name", "arith", "--json", check=True)
        plan["report"] = json.loads(out.stdout)
        for step in STEPS:
            cli("evals", "regress", "arith", "harvest-demo", "--step", str(step), check=True)
    plan["home"] = home
    yield plan


@pytest.fixture
def suite(planted: dict, monkeypatch: pytest.MonkeyPatch):
    from labcoat import evals

    use_home(monkeypatch, planted["home"])
    return evals.load_regression_suite("arith")


def test_dedup_finds_the_planted_duplicates(planted: dict, suite) -> None:
    """Precision and recall over pairs of harvested items judged to be one item."""
    harvested = {i["id"] for i in suite.items if i["task"] == "arith"} | \
        {d["id"] for d in suite.duplicates}
    assert harvested == planted["failing"]  # every failure harvested, nothing else
    group = {i["id"]: i["id"] for i in suite.items}
    group |= {d["id"]: d["kept"][1] for d in suite.duplicates}
    predicted = {frozenset((a, b)) for a, b in itertools.combinations(sorted(group), 2)
                 if group[a] == group[b]}
    truth = planted["truth_pairs"]
    precision = len(predicted & truth) / len(predicted)
    recall = len(predicted & truth) / len(truth)
    assert precision >= 0.95 and recall >= 0.95, (precision, recall, predicted ^ truth)
    from labcoat.evals import normalize_text

    text = {k: normalize_text(t) for k, (t, _) in planted["items"].items()}
    for d in suite.duplicates:  # "exact" exactly when the normalized texts are equal
        assert (d["kind"] == "exact") == (text[d["id"]] == text[d["matched"][1]]), d
    report = planted["report"]  # which copy is kept decides exact vs near for the others
    assert report["exact_duplicates"] + report["near_duplicates"] == 20 == len(suite.duplicates)
    assert report["exact_duplicates"] >= 10


def test_provenance_and_flakiness(planted: dict, suite) -> None:
    items = {i["id"]: i for i in suite.items}
    for item in planted["flaky"]:
        record = items[item]
        assert record["flaky"], item
        first = record["first_failure"]
        assert (first["step"], first["seed"], first["trial"]) == (100, 1, "base-s1")
        assert first["commit"] == "c0ffee1" and first["experiment"] == "harvest-demo"
        assert record["answers"]["harvest-demo/base@300"] == [3, 2]
        assert record["pass_at"] == {"1": pytest.approx(2 / 3), "2": 1.0, "3": 1.0}
        assert record["pass_hat"] == {"1": pytest.approx(2 / 3), "2": pytest.approx(1 / 3),
                                      "3": 0.0}
    flagged = {k for k, v in items.items() if v["flaky"]}
    assert flagged == set(planted["flaky"])
    for item in planted["regress"]:
        assert items[item]["first_failure"]["step"] == 300
        assert items[item]["failures"] == 3 and items[item]["observations"] == 9
    recorded = [i for i in suite.items if i["kind"] == "recorded_input"]
    assert {r["first_failure"]["source"] for r in recorded} == {"event:crash.input",
                                                               "alert:loss.spike"}
    assert all(r["first_failure"]["trial"] == "base-s2" for r in recorded)


def test_holdout_split_is_by_item_hash(planted: dict, suite) -> None:
    """Every item's split follows from the sha256 of its normalized text alone: the same
    in a second suite harvested from the items in another order."""
    import hashlib

    from labcoat import evals
    from labcoat.evals import normalize_text

    for item in suite.items:
        if item["kind"] != "scored":
            continue
        text = "\n".join([item["input"], item["target"]])
        digest = hashlib.sha256(normalize_text(text).encode()).hexdigest()
        assert item["hash"] == digest
        assert item["split"] == ("holdout" if int(digest[:16], 16) / 16**16 < 0.2 else "tune")
    arith = [i for i in suite.items if i["task"] == "arith"]
    shuffled = [evals.Outcome(task="arith", item=i["id"], score=0.0, model="m", sample="0")
                for i in reversed(arith)]
    texts = {("arith", i["id"]): evals.EvalItem(task="arith", id=i["id"], input=i["input"],
                                                target=i["target"]) for i in arith}
    other = evals.RegressionSuite(name="other")
    evals.harvest(shuffled, texts, other)
    assert {i["id"]: i["split"] for i in other.items} == {i["id"]: i["split"] for i in arith}
    tune = suite.eval_items("tune")
    assert tune and all(i["split"] == "tune" for i in suite.items
                        if (i["task"], i["id"]) in {(t.task, t.id) for t in tune})


def test_planted_regressions_are_detected(planted: dict, suite) -> None:
    history = suite.history
    assert [e["label"] for e in history] == [f"harvest-demo/base@{s}" for s in STEPS]
    assert history[0]["versus"] is None
    assert history[1]["versus"]["decision"] == "no change"
    last = history[2]["versus"]
    assert last["decision"] == "regressed" and last["high"] < 0
    assert {i for _, i in last["regressed_items"]} == set(planted["regress"])
    assert last["fixed_items"] == []
    # the interval is stats.paired_difference's on per-item pass@1: checked by hand here
    before = {i: c / n for _, i, n, c in history[1]["items"]}
    now = {i: c / n for _, i, n, c in history[2]["items"]}
    d = np.array([now[i] - before[i] for i in now])
    assert last["estimate"] == pytest.approx(d.mean(), abs=1e-12)
    assert last["items"] == len(d) == len(suite.items) - 2  # recorded inputs have no score


def test_pass_at_k_equals_brute_force_and_inspect() -> None:
    from labcoat import stats

    for n in range(1, 9):
        for c in range(n + 1):
            answers = [1] * c + [0] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(answers, k))
                any_pass = sum(max(s) for s in subsets) / len(subsets)
                all_pass = sum(min(s) for s in subsets) / len(subsets)
                assert abs(stats.pass_at_k(n, c, k) - any_pass) <= 1e-12
                assert abs(stats.pass_hat_k(n, c, k) - all_pass) <= 1e-12
    with pytest.raises(ValueError, match="k=4 must be between 1 and n=3"):
        stats.pass_at_k(3, 1, 4)


def test_pass_at_k_equals_inspect_reducers() -> None:
    scorer = pytest.importorskip("inspect_ai.scorer", reason="inspect-ai (dev extra) absent")
    from labcoat import stats

    for n in (1, 2, 3, 5, 10, 40, 200):
        for c in sorted({0, 1, n // 3, n // 2, n - 1, n} - {-1}):
            values = [scorer.Score(value=1.0)] * c + [scorer.Score(value=0.0)] * (n - c)
            for k in sorted({1, 2, 5, n // 2, n} & set(range(1, n + 1))):
                ours = stats.pass_at_k(n, c, k)
                theirs = scorer.pass_at(k)(values).value
                assert abs(ours - theirs) <= 1e-12, (n, c, k, ours, theirs)
                assert abs(stats.pass_hat_k(n, c, k) - scorer.pass_k(k)(values).value) <= 1e-12


def test_store_flags_and_dry_run(planted: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from labcoat import evals

    use_home(monkeypatch, planted["home"])
    bad = cli("evals", "harvest", "harvest-demo", "--arm", "nope")
    assert bad.returncode != 0 and "has no arm 'nope' (arms: base)" in bad.stderr
    bad = cli("evals", "harvest", "harvest-demo", "--step", "150")
    assert "no item results at step 150 (steps with items: 100, 200, 300)" in bad.stderr
    out = cli("evals", "regress", "arith", "harvest-demo", "--step", "300", "--split",
              "holdout", "--dry-run", "--json", check=True)
    entry = json.loads(out.stdout)["entries"][0]
    suite = evals.load_regression_suite("arith")
    held = {i["id"] for i in suite.items if i["split"] == "holdout" and i["kind"] == "scored"}
    assert {i for _, i, _, _ in entry["items"]} == held and entry["versus"] is None
    assert len(suite.history) == 3  # --dry-run recorded nothing


def test_newer_format_is_refused(tmp_path: Path) -> None:
    from labcoat import evals
    from labcoat.errors import LabcoatError

    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "labcoat.regression_suite", "version": 2,
                                "items": []}))
    with pytest.raises(LabcoatError, match="format version 2; this labcoat reads version 1"):
        evals.load_regression_suite(path)
