"""`labcoat scaling fit FILE.csv`: the real CLI as a subprocess.

Expected numbers come from the generating law (noise-free points are fitted back
to it), from a brute-force minimization of the fitted law along an isoFLOP line
(the compute-optimal allocation), and from the fixture's published parameters.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from helpers import cli


def _write(path: Path, header: str, rows: list[tuple]) -> Path:
    path.write_text(header + "\n" + "".join(",".join(str(v) for v in r) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def _power_rows(n_sizes: int = 10, lo: float = 1e6, hi: float = 1e9, noise: float = 0.0,
                seed: int = 0) -> list[tuple[float, float]]:
    rng = np.random.default_rng(seed)
    N = np.geomspace(lo, hi, n_sizes)
    loss = (1.5 + 300 * N**-0.3) * np.exp(rng.normal(0, noise, N.size))
    return [(f"{n:.10g}", f"{v:.10g}") for n, v in zip(N, loss, strict=True)]


def test_power_fit_recovers_the_law_with_json(tmp_path: Path) -> None:
    csv = _write(tmp_path / "runs.csv", "size,val_loss", _power_rows())
    result = cli("scaling", "fit", str(csv), "--n", "size", "--loss", "val_loss",
                 "--bootstrap", "200", "--json", check=True)
    out = json.loads(result.stdout)
    assert out["form"] == "power" and out["n_points"] == 10
    for name, true in {"E": 1.5, "A": 300.0, "alpha": 0.3}.items():
        assert out["params"][name]["point"] == pytest.approx(true, rel=1e-3), name
    # Predictions at the largest N and 10x it (noise-free points: a band of ~zero width).
    preds = out["derived"]["predictions"]
    assert [p["extrapolation"] for p in preds] == pytest.approx([1.0, 10.0])
    for p in preds:
        true = 1.5 + 300 * p["N"] ** -0.3
        assert p["point"] == pytest.approx(true, rel=1e-3)
        assert p["low"] <= p["point"] <= p["high"]
        assert p["high"] - p["low"] < 1e-6 * true
    # Leave-largest-out: one held-out size, predicted from the other nine.
    bt = out["backtest"]
    assert bt["scheme"] == "leave-largest-out" and len(bt["table"]) == 1
    row = bt["table"][0]
    assert row["N"] == pytest.approx(1e9) and row["covered"]
    assert abs(row["error"]) < 1e-3
    assert out["warnings"] == []


def test_chinchilla_fit_table_and_allocation(tmp_path: Path, epoch: dict, law: Callable,
                                             grid: Callable) -> None:
    N, D = grid(sizes=8)
    rng = np.random.default_rng(3)
    loss = law(N, D, epoch) * np.exp(rng.normal(0, 0.005, N.size))
    csv = _write(tmp_path / "chin.csv", "N,D,C,loss",
                 [(f"{a:.10g}", f"{b:.10g}", f"{6 * a * b:.12g}", f"{c:.10g}")
                  for a, b, c in zip(N, D, loss, strict=True)])
    # --c gives compute instead of tokens (D = C / 6N); the text run below uses --d.
    result = cli("scaling", "fit", str(csv), "--n", "N", "--c", "C", "--loss", "loss",
                 "--bootstrap", "200", "--compute", "1e22", "--json", check=True)
    out = json.loads(result.stdout)
    assert out["form"] == "chinchilla" and out["columns"]["C"] == "C"
    assert out["range"]["D"] == pytest.approx([D.min(), D.max()], rel=1e-9)
    p = {k: v["point"] for k, v in out["params"].items()}
    for name in ("alpha", "beta"):
        iv = out["params"][name]
        assert iv["low"] <= epoch[name] <= iv["high"], name
    # The allocation at C = 1e22, checked by minimizing the fitted law along N D = C / 6.
    (alloc,) = out["derived"]["allocation"]
    C = 1e22

    def on_isoflop(log_n: float) -> float:
        n = np.exp(log_n)
        return p["E"] + p["A"] * n ** -p["alpha"] + p["B"] * (C / (6 * n)) ** -p["beta"]

    best = minimize_scalar(on_isoflop, bounds=(np.log(1e6), np.log(1e13)), method="bounded",
                           options={"xatol": 1e-9})
    assert alloc["N"]["point"] == pytest.approx(np.exp(best.x), rel=1e-4)
    assert alloc["tokens_per_parameter"]["point"] == pytest.approx(
        C / (6 * np.exp(best.x) ** 2), rel=1e-3)
    assert alloc["loss"]["point"] == pytest.approx(best.fun, rel=1e-6)
    a = out["derived"]["a"]
    assert a["point"] == pytest.approx(p["beta"] / (p["alpha"] + p["beta"]))
    assert len(out["backtest"]["table"]) == 5  # the largest size, at its 5 token counts

    text = cli("scaling", "fit", str(csv), "--n", "N", "--d", "D", "--loss", "loss",
               "--bootstrap", "200", check=True).stdout
    for expected in ("chinchilla fit", "alpha", "compute-optimal allocation",
                     "backtest (leave-largest-out)", "coverage"):
        assert expected in text, expected


def test_narrow_range_is_warned(tmp_path: Path) -> None:
    csv = _write(tmp_path / "narrow.csv", "n,loss", _power_rows(6, 1e8, 4e8, noise=0.01))
    text = " ".join(cli("scaling", "fit", str(csv), "--n", "n", "--loss", "loss",
                        "--bootstrap", "200", check=True).stdout.split())
    assert "warning: N spans only 4x" in text and "less than one order of magnitude" in text


@pytest.mark.parametrize(("case", "expected"), [
    ("missing-file", ["nope.csv not found"]),
    ("missing-column", ["no column 'loss_x'", "--loss", "size, val_loss"]),
    ("non-numeric", ["line 3", "'val_loss'", "'abc'", "not a number"]),
    ("non-positive", ["line 4", "'size'", "> 0"]),
    ("empty-cell", ["line 2", "'val_loss'", "empty"]),
    ("too-few", ["3 data row(s)", "at least 4"]),
    ("chinchilla-without-d", ["--form chinchilla", "--d"]),
    ("d-and-c", ["either --d", "--c", "not both"]),
])
def test_bad_input_is_one_clear_message(tmp_path: Path, case: str, expected: list[str]) -> None:
    good = _power_rows()
    rows = {"non-numeric": [good[0], ("1e7", "abc"), *good[2:]],
            "non-positive": [*good[:2], ("-5", "2.0"), *good[3:]],
            "empty-cell": [("1e6", ""), *good[1:]],
            "too-few": good[:3]}.get(case, good)
    csv = _write(tmp_path / "runs.csv", "size,val_loss", rows)
    args = ["scaling", "fit", str(csv), "--n", "size", "--loss", "val_loss"]
    if case == "missing-file":
        args[2] = str(tmp_path / "nope.csv")
    if case == "missing-column":
        args[-1] = "loss_x"
    if case == "chinchilla-without-d":
        args += ["--form", "chinchilla"]
    if case == "d-and-c":
        args += ["--d", "size", "--c", "size"]
    result = cli(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    message = " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr and message.startswith("error:"), result.stderr
    for part in expected:
        assert part in message, (part, message)
    if case not in ("chinchilla-without-d", "d-and-c"):  # flag errors: no file read
        assert str(csv if case != "missing-file" else tmp_path / "nope.csv") in message
