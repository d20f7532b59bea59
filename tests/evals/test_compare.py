"""`labcoat compare A B`: paired differences checked by hand and against statsmodels."""

import json

import numpy as np
import pytest
import statsmodels.api as sm
from statsmodels.stats.multitest import multipletests

from helpers import cli
from labcoat.evals import compare_item_scores, load_item_scores


def _write(path, tasks, items, scores, clusters=None):
    header = "task,item,score" + (",cluster" if clusters is not None else "")
    rows = [header]
    for i, (t, it, s) in enumerate(zip(tasks, items, scores, strict=True)):
        rows.append(f"{t},{it},{s}" + (f",{clusters[i]}" if clusters is not None else ""))
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def pair(tmp_path):
    rng = np.random.default_rng(3)
    n = 200
    a = (rng.random(n) < 0.55).astype(float)
    b = np.where(rng.random(n) < 0.85, a, 1 - a)  # correlated with a
    tasks = ["t1"] * 120 + ["t2"] * 80
    items = [f"q{i}" for i in range(n)]
    order = rng.permutation(n)  # B's file lists items in another order
    pa = _write(tmp_path / "a.csv", tasks, items, a)
    pb = _write(tmp_path / "b.csv", [tasks[i] for i in order], [items[i] for i in order],
                b[order])
    return pa, pb, a, b, tasks


def test_per_task_paired_differences_match_a_hand_computation(pair):
    pa, pb, a, b, tasks = pair
    result = compare_item_scores(load_item_scores(pa), load_item_scores(pb))
    mask = np.array(tasks) == "t1"
    d = b[mask] - a[mask]
    t1 = result.tasks[0]
    assert (t1.task, t1.n_a, t1.n_b) == ("t1", 120, 120)
    assert t1.difference.estimate == pytest.approx(d.mean())
    assert t1.difference.se == pytest.approx(d.std(ddof=1) / np.sqrt(d.size))
    assert t1.difference.correlation == pytest.approx(np.corrcoef(a[mask], b[mask])[0, 1])
    per_task = [b[np.array(tasks) == t].mean() - a[np.array(tasks) == t].mean()
                for t in ("t1", "t2")]
    assert result.overall.estimate == pytest.approx(np.mean(per_task))
    assert result.warnings == []


def test_clustered_items_use_cluster_robust_errors(tmp_path):
    rng = np.random.default_rng(5)
    clusters = np.repeat(np.arange(30), 5)
    shared = rng.normal(size=30)[clusters]  # passage effect shared within a cluster
    a = rng.normal(size=150)
    b = a + 0.2 + shared + rng.normal(scale=0.5, size=150)
    items = [f"q{i}" for i in range(150)]
    pa = _write(tmp_path / "a.csv", ["t"] * 150, items, a, clusters)
    pb = _write(tmp_path / "b.csv", ["t"] * 150, items, b, clusters)
    result = compare_item_scores(load_item_scores(pa), load_item_scores(pb))
    # The default is CR2 (Bell-McCaffrey); for a mean over equal clusters its variance is
    # CR0 x G/(G-1), which is statsmodels' CR1 here ((N-1)/(N-k) = 1 with k = 1).
    ols = sm.OLS(b - a, np.ones(150)).fit(cov_type="cluster",
                                           cov_kwds={"groups": clusters, "use_correction": True})
    assert result.overall.se == pytest.approx(ols.bse[0])


def test_different_item_sets_warn_and_use_the_shared_items(tmp_path):
    pa = _write(tmp_path / "a.csv", ["t"] * 4, ["q1", "q2", "q3", "q4"], [1, 0, 1, 0])
    pb = _write(tmp_path / "b.csv", ["t"] * 3, ["q2", "q3", "q9"], [1, 1, 0])
    result = compare_item_scores(load_item_scores(pa), load_item_scores(pb))
    assert result.tasks[0].n_a == 2 and (result.only_a, result.only_b) == (2, 1)
    assert "different items (2 only in A, 1 only in B)" in result.warnings[0]


def test_cli_prints_json_and_refuses_files_without_shared_items(pair, tmp_path):
    pa, pb, a, b, _ = pair
    data = json.loads(cli("compare", str(pa), str(pb), "--json", check=True).stdout)
    assert [t["task"] for t in data["tasks"]] == ["t1", "t2"]
    assert data["overall"]["method"].startswith("macro")
    text = cli("compare", str(pa), str(pb), check=True).stdout
    assert "macro" in text and "t2" in text
    assert data["tasks"][0]["family"] == {"method": "holm", "size": 2}
    p_holm = multipletests([t["difference"]["p_value"] for t in data["tasks"]], method="holm")[1]
    assert [t["adjusted"]["p_value"] for t in data["tasks"]] == pytest.approx(p_holm)


def test_files_without_shared_items_are_compared_unpaired_with_a_warning(tmp_path):
    rng = np.random.default_rng(11)
    a, b = rng.random(50), rng.random(60) + 0.1
    pa = _write(tmp_path / "a.csv", ["t"] * 50, [f"a{i}" for i in range(50)], a)
    pb = _write(tmp_path / "b.csv", ["t"] * 60, [f"b{i}" for i in range(60)], b)
    result = compare_item_scores(load_item_scores(pa), load_item_scores(pb))
    assert not result.paired
    se = np.sqrt(a.var(ddof=1) / 50 + b.var(ddof=1) / 60)
    assert result.overall.estimate == pytest.approx(b.mean() - a.mean())
    assert result.overall.se == pytest.approx(se)
    assert "share no items" in result.warnings[0]
    assert "UNPAIRED" in cli("compare", str(pa), str(pb), check=True).stdout
