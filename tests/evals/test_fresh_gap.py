"""The contamination gap on per-item scores (pairing by id, verdicts, errors) and the
`labcoat evals gap` and `labcoat evals irt` commands on result files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from helpers import cli
from labcoat import evals
from labcoat.errors import LabcoatError


def _write(path: Path, rows: list[tuple[str, str, float]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["task", "item", "score"])
        writer.writerows(rows)
    return path


def _memorizer(n: int = 120, seed: int = 0) -> tuple[dict, dict]:
    """A model that knows 40% of items' answers by heart and solves 50% of the rest."""
    rng = np.random.default_rng(seed)
    original, fresh = {}, {}
    for i in range(n):
        task = "a" if i % 2 else "b"
        skill = rng.random() < 0.5
        original[(task, f"q{i}")] = float(skill or rng.random() < 0.4)
        for j in range(3):
            fresh[(task, f"q{i}~{j}")] = float(rng.random() < 0.5)
    return original, fresh


def test_pairs_twins_by_id_and_finds_the_gap():
    original, fresh = _memorizer()
    gap = evals.gap_from_scores(original, fresh)
    assert gap.items == 120 and gap.twins == 3 and gap.decision == "gap"
    # Independent arithmetic: per item, original minus the mean of its 3 twins.
    d = np.array([original[k] - np.mean([fresh[(k[0], f"{k[1]}~{j}")] for j in range(3)])
                  for k in original])
    assert gap.difference.estimate == pytest.approx(d.mean())
    assert gap.difference.se == pytest.approx(d.std(ddof=1) / np.sqrt(d.size))
    assert gap.difference.p_value == pytest.approx(
        2 * sps.norm.sf(abs(d.mean()) / (d.std(ddof=1) / np.sqrt(d.size))))
    assert {t.task: t.items for t in gap.tasks} == {"b": 60, "a": 60}
    data = gap.as_dict()
    assert data["decision"] == "gap" and data["line"] == gap.line
    json.dumps(data)


def test_one_twin_of_0_1_scores_uses_mcnemar_and_no_gap_includes_zero():
    rng = np.random.default_rng(1)
    original = {("t", f"q{i}"): float(rng.random() < 0.6) for i in range(80)}
    fresh = {("t", f"q{i}~0"): float(rng.random() < 0.6) for i in range(80)}
    gap = evals.gap_from_scores(original, fresh)
    assert gap.difference.method == "paired-mcnemar"
    assert gap.decision == "no-gap" and gap.line.startswith("no contamination gap")
    # The exact McNemar p-value, from the discordant pairs by hand (binomial test).
    x = np.array(list(original.values()))
    y = np.array([fresh[("t", f"q{i}~0")] for i in range(80)])
    n10, n01 = int(np.sum((x == 1) & (y == 0))), int(np.sum((x == 0) & (y == 1)))
    assert gap.difference.p_value == pytest.approx(
        sps.binomtest(n10, n10 + n01, 0.5).pvalue)


def test_easier_twins_and_unpaired_originals():
    original = {("t", f"q{i}"): 0.0 for i in range(30)}
    original[("t", "alone")] = 1.0
    fresh = {("t", f"q{i}~0"): 1.0 for i in range(30)}
    gap = evals.gap_from_scores(original, fresh)
    assert gap.decision == "fresh-easier" and gap.unpaired == ("t/alone",)
    assert gap.line.startswith("fresh items easier")


def test_bad_pairings_name_the_item():
    with pytest.raises(LabcoatError, match="names no original item"):
        evals.gap_from_scores({("t", "q1"): 1.0, ("t", "q2"): 0.0}, {("t", "other"): 1.0})
    with pytest.raises(LabcoatError, match="twin of t/q9"):
        evals.gap_from_scores({("t", "q1"): 1.0, ("t", "q2"): 0.0}, {("t", "q9~0"): 1.0})
    with pytest.raises(LabcoatError, match="only 1 original items"):
        evals.gap_from_scores({("t", "q1"): 1.0, ("t", "q2"): 0.0}, {("t", "q1~0"): 1.0})
    with pytest.raises(LabcoatError, match="no twin scored"):
        evals.contamination_gap([1, 0], [[1.0], []])


def test_cli_gap_reads_result_files_and_a_fresh_items_file(tmp_path):
    original, fresh = _memorizer()
    a = _write(tmp_path / "original.csv", [(t, i, s) for (t, i), s in original.items()])
    b = _write(tmp_path / "fresh.csv", [(t, i, s) for (t, i), s in fresh.items()])
    data = json.loads(cli("evals", "gap", str(a), str(b), "--json", check=True).stdout)
    assert data["decision"] == "gap" and data["items"] == 120
    assert data["difference"]["estimate"] == pytest.approx(
        evals.gap_from_scores(original, fresh).difference.estimate)
    text = cli("evals", "gap", str(a), str(b), check=True).stdout
    assert "contamination gap:" in text and "original" in text
    # Twins with any ids, paired through the items file's parent field.
    renamed = {(t, f"x{n}"): s for n, ((t, _), s) in enumerate(fresh.items())}
    c = _write(tmp_path / "renamed.csv", [(t, i, s) for (t, i), s in renamed.items()])
    items = tmp_path / "fresh.jsonl"
    items.write_text("".join(json.dumps({"task": t, "id": f"x{n}", "input": "?",
                                         "parent": i.split("~")[0]}) + "\n"
                             for n, (t, i) in enumerate(fresh)))
    again = json.loads(cli("evals", "gap", str(a), str(c), "--items", str(items), "--json",
                           check=True).stdout)
    assert again["difference"] == data["difference"]
    bad = cli("evals", "gap", str(a), str(c))
    assert bad.returncode == 2 and "names no original item" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_cli_irt_fits_models_and_selects_items(tmp_path):
    """Eight models of known abilities on 60 items of known difficulty; the fitted abilities
    keep their order, and --select writes an eval subset file in-training evals read."""
    rng = np.random.default_rng(2)
    theta = np.linspace(-1.5, 1.5, 8)
    b = rng.normal(0, 1, 60)
    files = []
    for m, t in enumerate(theta):
        p = 1 / (1 + np.exp(-1.7 * (t - b)))
        y = (rng.random(60) < p).astype(int)
        files.append(str(_write(tmp_path / f"model{m}.csv",
                                [("t", f"q{i}", float(v)) for i, v in enumerate(y)])))
    out = tmp_path / "subset.json"
    data = json.loads(cli("evals", "irt", *files, "--adaptive", "10", "--select", "12",
                          "--out", str(out), "--json", check=True).stdout)
    abilities = [m["ability"] for m in data["models"]]
    assert sps.spearmanr(abilities, theta).statistic > 0.9
    assert all(abs(m["adaptive"] - m["ability"]) < 1.0 for m in data["models"])
    assert len(data["items"]) + data["dropped_items"] == 60
    assert len(evals.load_subset_file(out)) == 12
    text = cli("evals", "irt", *files, check=True).stdout
    assert "2PL fit" in text and "ability" in text
    bad = cli("evals", "irt", *files, "--select", "3")
    assert bad.returncode == 2 and "--select N and --out FILE go together" in bad.stderr
    half = _write(tmp_path / "half.csv", [("t", "q0", 0.5), ("t", "q1", 1.0)])
    other = _write(tmp_path / "other.csv", [("t", "q0", 1.0), ("t", "q1", 0.0)])
    bad = cli("evals", "irt", str(half), str(other))
    assert bad.returncode == 2 and "0/1 item scores" in bad.stderr
