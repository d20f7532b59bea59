"""CSV files saved with ';' as separator (a spreadsheet where the decimal mark is a comma)
are read like ','-separated ones, by `labcoat scaling fit` and `labcoat compare` (issue 30
point 4: a ';' file said only "no column 'params'"). Through the real CLI."""

from __future__ import annotations

import json

import pytest

from helpers import cli

SIZES = [1e6 * 2**i for i in range(10)]


def _loss(n: float) -> float:
    return 1.5 + 300 * n ** -0.3


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_scaling_fit_reads_other_separators(tmp_path, sep):
    path = tmp_path / "runs.csv"
    path.write_text(f"params{sep}loss\n" + "".join(f"{n:.10g}{sep}{_loss(n):.10g}\n"
                                                   for n in SIZES), encoding="utf-8")
    out = json.loads(cli("scaling", "fit", str(path), "--n", "params", "--loss", "loss",
                         "--bootstrap", "50", "--json", check=True).stdout)
    assert out["n_points"] == len(SIZES)
    for name, true in {"E": 1.5, "A": 300.0, "alpha": 0.3}.items():  # the generating law
        assert out["params"][name]["point"] == pytest.approx(true, rel=1e-3), name


def test_a_decimal_comma_is_named(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("params;loss\n1000000;3,25\n", encoding="utf-8")
    result = cli("scaling", "fit", str(path), "--n", "params", "--loss", "loss")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "line 2" in result.stderr and "'3,25'" in result.stderr
    assert "decimal comma? write 3.25" in result.stderr


def test_compare_reads_semicolon_files(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("item;score\n" + "".join(f"q{i};{i % 2}\n" for i in range(20)),
                 encoding="utf-8")
    b.write_text("item;score\n" + "".join(f"q{i};1\n" for i in range(20)), encoding="utf-8")
    out = json.loads(cli("compare", str(a), str(b), "--json", check=True).stdout)
    task = out["tasks"][0]
    assert (task["items_a"], task["items_b"]) == (20, 20)
    assert (task["mean_a"], task["mean_b"]) == (0.5, 1.0)  # 10 of 20 right vs all 20
