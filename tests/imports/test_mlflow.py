"""`labcoat import mlflow`: runs MLflow's own client wrote, into its SQLite tracking store
and into the legacy mlruns/ file layout, read back point for point against
`MlflowClient.get_metric_history`, and the report's per-arm means against the runs'
latest metrics as MLflow returns them."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from helpers import cli

pytest.importorskip("mlflow")

ARMS, SEEDS, STEPS = ("sgd", "adam"), (0, 1, 2), 40


def _write(uri: str) -> dict[str, tuple[str, int]]:
    """2 arms x 3 seeds of val_loss; adam seed 1 logs its last step twice (the later one
    wins in MLflow's latest metric) and sgd seed 2 has a NaN at step 5."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("sweep")
    rng = np.random.default_rng(0)
    runs = {}
    for arm in ARMS:
        for seed in SEEDS:
            run = client.create_run(exp, run_name=f"{arm}-{seed}")
            base = 2.0 if arm == "sgd" else 1.8
            values = base + rng.normal(0, 0.05, STEPS) - np.linspace(0, 0.5, STEPS)
            if (arm, seed) == ("sgd", 2):
                values[5] = math.nan
            metrics = [Metric("val_loss", float(v), 1_000_000 + s, s) for s, v in
                       enumerate(values)]
            metrics.append(Metric("lr", 0.1, 1_000_000, 0))
            if (arm, seed) == ("adam", 1):
                metrics.append(Metric("val_loss", 1.25, 2_000_000, STEPS - 1))
            client.log_batch(run.info.run_id, metrics=metrics,
                             params=[Param("optimizer", arm), Param("seed", str(seed))],
                             tags=[RunTag("team", "nlp")])
            client.set_terminated(run.info.run_id)
            runs[run.info.run_id] = (arm, seed)
    return runs


@pytest.fixture(scope="module")
def tracked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    where = tmp_path_factory.mktemp("mlflow")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        sqlite_runs = _write(f"sqlite:///{where / 'mlflow.db'}")
        file_runs = _write(f"file://{where / 'mlruns'}")
    return {"sqlite": (where / "mlflow.db", f"sqlite:///{where / 'mlflow.db'}", sqlite_runs),
            "file": (where / "mlruns", f"file://{where / 'mlruns'}", file_runs)}


def _import(path: Path, experiment: str, *extra: str):
    return cli("import", "mlflow", str(path), "--experiment", experiment, "--arm-by",
               "optimizer", "--seed-by", "seed", "--metric", "val_loss", "--direction",
               "decrease", "--control", "sgd", *extra)


@pytest.mark.parametrize("layout", ["sqlite", "file"])
def test_every_point_and_each_arms_mean_equal_mlflows_own(home, tracked, layout, stored,
                                                         report_means, equal_points):
    from mlflow import MlflowClient

    path, uri, runs = tracked[layout]
    done = _import(path, "ml", "--where", "experiment=sweep")
    assert done.returncode == 0, done.stderr
    assert "imported 6 mlflow runs" in done.stdout
    assert "val_loss was logged 1 more time(s)" in done.stdout  # adam seed 1, said
    client = MlflowClient(tracking_uri=uri)
    held = stored("ml")
    latest: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for run_id, (arm, seed) in runs.items():
        for name in ("val_loss", "lr"):
            history = sorted(client.get_metric_history(run_id, name),
                             key=lambda m: (m.step, m.timestamp))
            want = {m.step: m.value for m in history}  # the latest timestamp at each step
            equal_points(held[f"{arm}-s{seed}"][name], want)
        latest[arm].append(client.get_run(run_id).data.metrics["val_loss"])
    assert held["adam-s1"]["val_loss"][STEPS - 1] == 1.25
    assert math.isnan(held["sgd-s2"]["val_loss"][5])
    assert report_means("ml") == pytest.approx({a: float(np.mean(v)) for a, v in latest.items()},
                                               rel=1e-12)


def test_reimporting_is_idempotent_and_a_different_run_is_not_replaced_silently(
        home, tracked, stored):
    path, uri, runs = tracked["sqlite"]
    assert _import(path, "ml").returncode == 0
    first = stored("ml")
    again = _import(uri, "ml")  # the same store named by its tracking URI
    assert again.returncode == 0 and "6 again" in again.stdout
    assert stored("ml") == first
    # the file store's runs are other runs mapped to the same arms and seeds
    other = _import(tracked["file"][0], "ml")
    assert other.returncode != 0 and "Nothing was imported. Pass --replace" in other.stderr
    assert stored("ml") == first
    replaced = _import(tracked["file"][0], "ml", "--replace")
    assert replaced.returncode == 0 and "6 replaced" in replaced.stdout


def test_a_damaged_store_names_the_file_and_imports_nothing(home, tracked, tmp_path):
    import shutil

    broken = tmp_path / "mlruns"
    shutil.copytree(tracked["file"][0], broken)
    victim = sorted(broken.glob("*/*/metrics/val_loss"))[3]
    lines = victim.read_text().splitlines()
    lines[7] = lines[7][: len(lines[7]) // 2] + " x"
    victim.write_text("\n".join(lines) + "\n")
    done = _import(broken, "ml")
    assert done.returncode != 0
    assert f"{victim}:8: not an MLflow metric line" in done.stderr
    assert "Traceback" not in done.stderr
    assert "no experiment named 'ml'" in cli("show", "ml").stderr  # nothing half-way

    db = tmp_path / "mlflow.db"
    shutil.copy(tracked["sqlite"][0], db)
    with sqlite3.connect(db) as c:
        page = c.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(db.read_bytes())
    data[page * 2: page * 6] = b"\xff" * (page * 4)  # pages of the tables, overwritten
    db.write_bytes(bytes(data))
    done = _import(db, "ml")
    assert done.returncode != 0 and f"{db}: the MLflow database is damaged" in done.stderr
    assert "no experiment named 'ml'" in cli("show", "ml").stderr


def test_a_missing_or_ambiguous_mapping_lists_the_keys(home, tracked, tmp_path):
    path = tracked["sqlite"][0]
    done = cli("import", "mlflow", str(path), "--experiment", "ml", "--seed-by", "seed")
    assert done.returncode != 0
    assert "--arm-by is missing" in done.stderr
    assert "params.optimizer (2 values: 'adam', 'sgd')" in done.stderr
    done = cli("import", "mlflow", str(path), "--experiment", "ml", "--arm-by", "optimiser",
               "--seed-by", "seed")
    assert "has no key 'optimiser'" in done.stderr and "params.optimizer" in done.stderr
    # a tag and a param both called "seed", with different values: ambiguous
    copy = tmp_path / "two.db"
    copy.write_bytes(path.read_bytes())
    with sqlite3.connect(copy) as c:
        c.execute("INSERT INTO tags (key, value, run_uuid) SELECT 'seed', 'x' || value, "
                  "run_uuid FROM params WHERE key = 'seed'")
    done = cli("import", "mlflow", str(copy), "--experiment", "ml", "--arm-by", "optimizer",
               "--seed-by", "seed", "--metric", "val_loss", "--direction", "decrease",
               "--control", "sgd")
    assert done.returncode != 0 and "--seed-by seed is ambiguous" in done.stderr
    assert "params.seed=" in done.stderr and "tags.seed=" in done.stderr
    assert "no experiment named 'ml'" in cli("show", "ml").stderr
