"""`labcoat rate` end to end, as a real subprocess: battles files (CSV, JSONL), per-item
result files (labcoat CSV, lm-eval-harness samples), and one-line errors for bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import cli


def _battles(path: Path, m: int = 900, seed: int = 0, ties: bool = True) -> list[dict]:
    rng = np.random.default_rng(seed)
    theta = np.array([0.8, 0.0, -0.3, -0.9])
    special = rng.normal(0, 0.7, (4, 3))
    rows = []
    for q in range(m):
        a = int(rng.integers(0, 4))
        b = int((a + rng.integers(1, 4)) % 4)
        c = int(rng.integers(0, 3))
        p = 1 / (1 + np.exp(theta[b] + special[b, c] - theta[a] - special[a, c]))
        u = rng.random()
        winner = ("tie" if ties and u < 0.1 else "model_a" if rng.random() < p else "model_b")
        rows.append({"question_id": f"q{q}", "model_a": f"m{a}", "model_b": f"m{b}",
                     "winner": winner, "cluster": ["code", "math", "chat"][c]})
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return rows


def _json(*args: str) -> dict:
    done = cli("rate", *args, "--json", check=True)
    return json.loads(done.stdout)


def test_battles_csv_matches_choix_and_audits_clusters(tmp_path: Path) -> None:
    choix = pytest.importorskip("choix")
    rows = _battles(tmp_path / "battles.csv", ties=False)
    out = _json(str(tmp_path / "battles.csv"), "--bootstrap", "100", "--orders", "10")
    names = sorted({r["model_a"] for r in rows} | {r["model_b"] for r in rows})
    pairs = [(names.index(r["model_a"]), names.index(r["model_b"])) if r["winner"] == "model_a"
             else (names.index(r["model_b"]), names.index(r["model_a"])) for r in rows]
    ref = choix.ilsr_pairwise(len(names), pairs, alpha=0.0, tol=1e-12)
    ref -= ref.mean()
    got = {m["model"]: m for m in out["models"]}
    for i, name in enumerate(names):
        assert got[name]["bradley_terry"]["strength"] == pytest.approx(ref[i], abs=1e-4)
        bt = got[name]["bradley_terry"]
        assert bt["low"] < bt["rating"] < bt["high"]
    assert [m["rank"] for m in out["models"]] == [1, 2, 3, 4]
    assert out["battles"] == 900 and out["clusters"] == ["chat", "code", "math"]
    assert len(out["audit"]["rows"]) == 6
    for row in out["audit"]["rows"]:
        if row["change"] == "duplicate":
            assert max(abs(v) for v in row["shift_nash"].values()) <= 1e-6
            assert max(abs(v) for v in row["shift_bt"].values()) > 1


def test_jsonl_gives_what_csv_gives(tmp_path: Path) -> None:
    _battles(tmp_path / "b.csv", seed=1)
    _battles(tmp_path / "b.jsonl", seed=1)
    args = ("--bootstrap", "50", "--orders", "5", "--no-audit")
    one = _json(str(tmp_path / "b.csv"), *args)
    two = _json(str(tmp_path / "b.jsonl"), *args)
    assert one["models"] == two["models"] and one["davidson_nu"] > 0


def test_per_item_results_of_several_models(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    files = []
    for name, skill in (("strong", 0.8), ("mid", 0.6), ("weak", 0.3)):
        path = tmp_path / f"{name}.csv"
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["item", "task", "score"])
            for i in range(120):
                writer.writerow([f"i{i}", "arc" if i < 60 else "gsm", int(rng.random() < skill)])
        files.append(str(path))
    partial = tmp_path / "partial.csv"  # scored half the items: left out, and said so
    partial.write_text("item,task,score\n" + "".join(f"i{i},arc,1\n" for i in range(60)))
    out = _json(*files, str(partial), "--bootstrap", "50", "--orders", "5")
    assert [Path(m["model"]).stem for m in out["models"]] == ["strong", "mid", "weak"]
    assert out["dropped_models"] == [str(partial)]
    assert out["battles"] == 120 * 3 and out["clusters"] == ["arc", "gsm"]


def test_lm_eval_samples_files(tmp_path: Path) -> None:
    files = []
    for name, right in (("a", {0, 1, 2, 3}), ("b", {0, 1}), ("c", {0, 4})):
        path = tmp_path / name / "samples_arc_easy_2024-05-01T10-00-00.jsonl"
        path.parent.mkdir()
        path.write_text("".join(json.dumps({"doc_id": i, "filter": "none", "metrics": ["acc"],
                                            "acc": float(i in right)}) + "\n"
                                for i in range(6)))
        files.append(str(path))
    out = _json(*files, "--bootstrap", "0", "--orders", "3")
    assert Path(Path(out["models"][0]["model"]).parent).name == "a"


def _error(*args: str) -> str:
    done = cli("rate", *args)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_bad_battles_files_end_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("model_a,loser,result\nx,y,model_a\n")
    assert _error(str(bad)) == (f"error: {bad}: missing column(s) model_b, winner; found: "
                                "model_a, loser, result; a battles file needs model_a, "
                                "model_b, winner (Chatbot Arena's columns)")
    bad.write_text("model_a,model_b,winner\nx,y,model_a\ny,x,draw\n")
    assert _error(str(bad)) == (f"error: {bad} line 3: winner 'draw' is not one of model_a, "
                                "model_b, tie, tie (bothbad); fix the row or remove it")
    bad.write_text("model_a,model_b,winner\nx,x,tie\n")
    assert "'x' plays itself" in _error(str(bad))
    jl = tmp_path / "bad.jsonl"
    jl.write_text('{"model_a": "x", "model_b": "y", "winner": "tie"}\n{oops\n')
    assert _error(str(jl)).startswith(f"error: {jl} line 2: not JSON")
    bad.write_text("model_a,model_b,winner\nx,y,model_a\nx,z,model_a\n")
    assert "'x' never lost" in _error(str(bad), "--bootstrap", "0")
    assert "'x' never lost" not in cli("rate", str(bad), "--prior", "0.1", "--bootstrap",
                                       "0").stderr
    assert _error(str(tmp_path / "nope.csv")).endswith("no such file; give a battles file "
                                                       "(CSV or JSONL)")
    bad.write_text("model_a,model_b,winner\nx,y,tie\n")
    assert "no column 'topic' (given by --cluster)" in _error(str(bad), "--cluster", "topic")


def test_an_experiment_in_the_store(home, tmp_path: Path) -> None:
    """Per-item results imported into the store as arms of an experiment are its models."""
    rng = np.random.default_rng(3)
    for name, skill in (("strong", 0.85), ("mid", 0.6), ("weak", 0.3)):
        path = tmp_path / f"{name}.csv"
        path.write_text("item,task,score\n" + "".join(
            f"i{i},{'arc' if i < 50 else 'gsm'},{int(rng.random() < skill)}\n"
            for i in range(100)))
        cli("import", "items", str(path), "--experiment", "cmp", "--arm", name, check=True)
    out = _json("cmp", "--bootstrap", "50", "--orders", "5")
    assert [m["model"].split("@")[0] for m in out["models"]] == ["strong", "mid", "weak"]
    assert out["clusters"] == ["arc", "gsm"] and out["battles"] == 300
    assert _error("nosuch").startswith("error: ")


def test_one_per_item_file_says_what_is_needed(tmp_path: Path) -> None:
    one = tmp_path / "model.csv"
    one.write_text("item,score\ni1,1\n")
    assert _error(str(one)).endswith("; per-item results need two or more files, one per "
                                     "model")
