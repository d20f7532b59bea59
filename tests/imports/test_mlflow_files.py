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


@pytest.fixture(scope="module")
def mlruns(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """Runs created by MLflow's client (meta.yaml, params), their metric files by hand."""
    from mlflow import MlflowClient
    from mlflow.entities import Param

    root = tmp_path_factory.mktemp("mlruns") / "mlruns"
    uri = f"file://{root}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        client = MlflowClient(tracking_uri=uri)
        exp = client.create_experiment("hand")
        ids = []
        for arm in ("a", "b"):
            run = client.create_run(exp)
            client.log_batch(run.info.run_id, params=[Param("arm", arm), Param("seed", "0")])
            client.set_terminated(run.info.run_id)
            folder = next(root.glob(f"*/{run.info.run_id}")) / "metrics"
            folder.mkdir(exist_ok=True)
            for name, text in FILES.items():
                (folder / name).write_bytes(text.encode())
            ids.append(run.info.run_id)
    return root, uri, ids


def _mlflows(uri: str, run_id: str, name: str) -> dict[int, float]:
    """step -> value as MLflow's client returns it: the latest timestamp at each step."""
    from mlflow import MlflowClient

    history = MlflowClient(tracking_uri=uri).get_metric_history(run_id, name)
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
        for name in FILES:
            got = {step: value for step, (value, _) in runs[run_id].metrics[name].items()}
            equal_points(got, _mlflows(uri, run_id, name))
        assert runs[run_id].repeated == {"repeated": 2}
        assert runs[run_id].metrics["tokens"][0] == (5e-324, 1.005)  # time: ms / 1000
    held = runs[ids[0]].metrics["tokens"]
    assert math.copysign(1, held[6][0]) == -1  # -0.0 kept as itself


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
