"""mlruns/ metric files written by hand with what MLflow's own parser accepts (signs,
exponents, infinities, NaN, subnormals, two-field lines, steps out of order or written
twice, CRLF), read by labcoat's fast path (PyArrow) and its line-by-line path, each against
`MlflowClient.get_metric_history` on the same files."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from helpers import cli

pytest.importorskip("mlflow")

FILES = {
    # exponents, signs, infinities, the largest double, a subnormal, -0.0; steps unordered
    "tokens": "1000 0.1 5\n1001 -2.5E-3 1\n1002 inf 3\n1003 -inf 2\n"
              "1004 1.7976931348623157e308 4\n1005 4.9e-324 0\n1006 -0.0 6\n1007 1. 7\n"
              "1008 0.30000000000000004 9\n1009 123456789012345678 8\n",
    "nan": "1000 nan 0\n1001 NaN 1\n1002 0.5 2\n",
    "two_fields": "1000 0.5\n",
    "repeated": "1000 0.5 0\n1003 0.75 1\n1001 0.6 0\n1002 0.7 1\n",
    "crlf": "1000 0.5 0\r\n1001 0.25 1\r\n",
    "plus": "+1000 0.5 +3\n1001 0.25 4\n",
    "large_steps": "1000 0.5 9223372036854775807\n1001 0.25 -9223372036854775808\n",
}


# MLflow 3 writes "timestamp value step dataset digest" for a metric logged with a dataset
WITH_DATASET = [(0.5, 1000, 3), (0.25, 1001, 4)]  # value, timestamp, step


@pytest.fixture(scope="module")
def mlruns(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """Runs created by MLflow's client (meta.yaml, params, metrics with a dataset), most
    metric files by hand. Run a has a param run b lacks, with Windows line endings; the
    run of a second experiment lost its meta.yaml, as a deleted one that was copied does."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    root = tmp_path_factory.mktemp("mlruns") / "mlruns"
    uri = f"file://{root}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        client = MlflowClient(tracking_uri=uri)
        exp = client.create_experiment("hand")
        ids = []
        for arm in ("a", "b"):
            run = client.create_run(exp)
            extra = [Param("extra", "x\r\ny")] if arm == "a" else []
            client.log_batch(run.info.run_id,
                             params=[Param("arm", arm), Param("seed", "0"), *extra],
                             metrics=[Metric("with_dataset", v, t, s, dataset_name="eval",
                                             dataset_digest="abc") for v, t, s in WITH_DATASET])
            client.set_terminated(run.info.run_id)
            folder = next(root.glob(f"*/{run.info.run_id}")) / "metrics"
            for name, text in FILES.items():
                (folder / name).write_bytes(text.encode())
            ids.append(run.info.run_id)
        gone = client.create_experiment("gone")
        client.set_terminated(client.create_run(gone).info.run_id)
        (root / gone / "meta.yaml").unlink()
    return root, uri, ids


def _client(uri: str):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _mlflows(uri: str, run_id: str, name: str) -> dict[int, float]:
    """step -> value as MLflow's client returns it: the latest timestamp at each step."""
    history = _client(uri).get_metric_history(run_id, name)
    ordered = sorted(history, key=lambda m: (m.step, m.timestamp))
    return {m.step: m.value for m in ordered}


@pytest.mark.parametrize("path", ["arrow", "lines"])
def test_every_hand_written_file_reads_as_mlflows_client_reads_it(mlruns, path, monkeypatch,
                                                                  equal_points):
    from labcoat.runner import _import_mlflow

    if path == "arrow":
        pytest.importorskip("pyarrow")
        monkeypatch.setattr(_import_mlflow, "ARROW_FROM", 0)  # these files are small
    else:
        monkeypatch.setattr(_import_mlflow, "_arrow_columns", lambda data: None)
    root, uri, ids = mlruns
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    runs = {run.id: run for run in _import_mlflow.read_mlflow(root)}
    assert set(runs) == set(ids)
    for run_id in ids:
        for name in FILES:  # as MLflow's client reads them
            got = {step: value for step, (value, _) in runs[run_id].metrics[name].items()}
            equal_points(got, _mlflows(uri, run_id, name))
        assert runs[run_id].repeated == {"repeated": 2}
        assert runs[run_id].metrics["tokens"][0] == (5e-324, 1.005)  # time: ms / 1000
        # the steps written (MLflow's file client reads these lines' steps as 0)
        assert dict(runs[run_id].metrics["with_dataset"].items()) == {
            s: (v, t / 1000) for v, t, s in WITH_DATASET}
        assert runs[run_id].keys["params.arm"] == _client(uri).get_run(run_id).data.params["arm"]
    held = runs[ids[0]].metrics["tokens"]
    assert math.copysign(1, held[6][0]) == -1  # -0.0 kept as itself
    assert runs[ids[0]].keys["params.extra"] == "x\r\ny"  # as MLflow keeps it
    assert _client(uri).get_run(ids[0]).data.params["extra"] == "x\r\ny"


def test_a_value_python_cannot_read_is_damage_on_either_path(mlruns, tmp_path, home):
    """PyArrow reads "nan(1)" as NaN; MLflow's `float` refuses it, and so does labcoat."""
    import shutil

    root = tmp_path / "mlruns"
    shutil.copytree(mlruns[0], root)
    victim = sorted(root.glob("*/*/metrics/tokens"))[1]
    victim.write_text("1000 0.5 0\n1001 nan(1) 1\n")
    done = cli("import", "mlflow", str(root), "--experiment", "ml", "--arm-by", "arm",
               "--seed-by", "seed", "--metric", "tokens", "--direction", "decrease",
               "--control", "a")
    assert done.returncode != 0
    assert f"{victim}:2: not an MLflow metric line" in done.stderr
    assert "no experiment named 'ml'" in cli("show", "ml").stderr


def test_the_import_says_what_it_left_out_and_lists_keys_most_runs_have(mlruns, home):
    root, _, ids = mlruns
    flags = ["--metric", "tokens", "--direction", "decrease", "--control", "a"]
    unmapped = cli("import", "mlflow", str(root), "--experiment", "ml", *flags)
    assert unmapped.returncode != 0
    assert f"run_id (2 values: {ids[0][:23]!r}" not in unmapped.stderr  # cut ids are marked
    assert f"{ids[0][:23] + chr(0x2026)!r}" in unmapped.stderr or \
        f"{ids[1][:23] + chr(0x2026)!r}" in unmapped.stderr
    assert "Keys most runs have: params.extra (1 of 2 runs)" in unmapped.stderr
    done = cli("import", "mlflow", str(root), "--experiment", "ml", "--arm-by", "arm",
               "--seed-by", "seed", *flags)
    assert done.returncode == 0, done.stderr
    gone = next(p for p in root.iterdir() if p.is_dir() and not (p / "meta.yaml").exists()
                and not p.name.startswith("."))
    assert f"{gone}: 1 run(s) left out: their experiment folder has no meta.yaml" \
        in done.stdout
    # one line per metric for all runs that logged a step again
    assert done.stdout.count("repeated was logged") == 1
    assert "(and in 1 more run(s), 4 times in all)" in done.stdout
    report = cli("report", "ml")
    assert report.returncode == 0 and "goodput" not in report.stdout  # time spent elsewhere
