"""Harvest from Inspect and lm-eval-harness logs (epochs are repeated answers), regress a
second model's log against the suite, and the CLI's one-line errors for bad input; the
dedup checked against exact all-pairs Jaccard computed with Python sets."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import cli

QUESTIONS = [f"What is {a} plus {b}? Write the number only." for a, b in
             [(2, 2), (3, 9), (14, 5), (7, 7), (21, 13), (8, 30)]]


def inspect_log(path: Path, model: str, correct: dict[int, list[bool]]) -> Path:
    """An Inspect .json log: sample i answered once per epoch, right where correct[i][e]."""
    samples = [{"id": i, "epoch": e + 1, "input": QUESTIONS[i], "target": str(i),
                "scores": {"match": {"value": "C" if ok else "I"}}}
               for i, epochs in correct.items() for e, ok in enumerate(epochs)]
    path.write_text(json.dumps({"version": 2, "status": "success",
                                "eval": {"task": "arith", "model": model,
                                         "revision": {"type": "git", "commit": "abc123"}},
                                "samples": samples}), encoding="utf-8")
    return path


def test_harvest_and_regress_inspect_logs(tmp_path: Path, home: Path) -> None:
    first = inspect_log(tmp_path / "first.json", "m1", {
        0: [True, True, True], 1: [False, False, False], 2: [True, False, True],
        3: [False, False, False], 4: [True, True, True], 5: [False, True, False]})
    samples = tmp_path / "lm" / "m1" / "samples_arith_lm_2026-01-01T00-00-00.jsonl"
    samples.parent.mkdir(parents=True)
    samples.write_text("".join(json.dumps({
        "doc_id": i, "doc": {"q": q}, "target": target, "filter": "none",
        "arguments": {"gen_args_0": {"arg_0": q, "arg_1": {"until": ["\n"]}}},
        "resps": [["x"]], "filtered_resps": ["x"], "metrics": ["exact_match"],
        "exact_match": score}) + "\n"
        for i, (q, target, score) in enumerate([("A new question about lm-eval", "0", 1.0),
                                                (QUESTIONS[3], "3", 0.0)])),
        encoding="utf-8")
    out = cli("evals", "harvest", str(first), str(samples.parent), "--name", "logs", "--json",
              check=True)
    report = json.loads(out.stdout)
    # failed: Inspect 1, 2, 3, 5 and lm-eval's doc 1, the same text as Inspect's sample 3
    assert (report["failed_items"], report["added"], report["exact_duplicates"]) == (5, 4, 1)
    assert report["flaky"] == 2
    from labcoat import evals

    suite = evals.load_regression_suite("logs")
    items = {i["id"]: i for i in suite.items}
    assert items["2"]["flaky"] and items["2"]["answers"] == {"m1": [3, 2]}
    assert items["2"]["first_failure"]["commit"] == "abc123"
    assert items["5"]["pass_at"]["2"] == pytest.approx(1 - 1 / 3)  # 1 - C(2,2)/C(3,2)
    assert items["1"]["input"] == QUESTIONS[1] and not items["1"]["flaky"]
    second = inspect_log(tmp_path / "second.json", "m2", {
        i: [False] * 3 for i in range(6)})
    out = cli("evals", "regress", "logs", str(second), "--json", check=True)
    entry = json.loads(out.stdout)["entries"][0]
    assert entry["label"] == "m2" and entry["versus"] is None  # the first entry
    assert entry["pass_at"]["3"]["point"] == 0.0
    text = cli("evals", "history", "logs").stdout
    assert "m2" in text and "1 entries" in text


@pytest.mark.parametrize(("args", "message"), [
    (["evals", "harvest", "missing.json"], "no experiment named 'missing.json'"),
    (["evals", "harvest", "x.json", "--holdout", "1"], "--holdout 1.0 must be a share"),
    (["evals", "regress", "nosuite", "e"], "nosuite.json: no such regression suite"),
    (["evals", "history", "nosuite", "--json"], "build one with `labcoat evals harvest`"),
])
def test_bad_input_is_one_line(args: list[str], message: str, home: Path) -> None:
    result = cli(*args)
    assert result.returncode != 0 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_dedup_against_all_pairs_jaccard() -> None:
    """Every pair at or above the threshold (exact Jaccard of shingle sets built with
    Python sets, independent of the MinHash code) ends in one group, and no group joins
    texts whose numbers differ."""
    from labcoat.evals import find_duplicates, normalize_text

    rng = np.random.default_rng(1)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    texts = []
    for _ in range(60):
        base = " ".join(rng.choice(words, size=10))
        texts.append(f"{base} {rng.integers(3)}")
        if rng.random() < 0.5:  # an edited copy
            texts.append(f"{base} extra {texts[-1].split()[-1]}")

    def grams(t: str) -> set[bytes]:
        raw = normalize_text(t).encode()
        return {raw[i:i + 5] for i in range(max(1, len(raw) - 4))}

    found = find_duplicates(texts, threshold=0.7)
    sets = [grams(t) for t in texts]
    for i, j in itertools.combinations(range(len(texts)), 2):
        similarity = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
        numbers_equal = texts[i].split()[-1] == texts[j].split()[-1]
        if similarity >= 0.7 and numbers_equal:
            assert found.group[i] == found.group[j], (texts[i], texts[j], similarity)
    for i in range(len(texts)):
        assert texts[i].split()[-1] == texts[found.group[i]].split()[-1]
