"""The terminal report and the HTML report say the same things (issue 30, point 1): here the
prompt-format sensitivity section, which only the terminal printed."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import labcoat
from helpers import cli
from labcoat import evals
from labcoat.evals import EvalItem

ITEMS = [EvalItem("qa", f"q{i}", f"What is {i} + 1?", str(i + 1)) for i in range(40)]
RATES = {"a": {"plain": 0.75, "json": 0.30, "markdown": 0.55, "yaml": 0.75},
         "b": {"plain": 0.35, "json": 0.80, "markdown": 0.55, "yaml": 0.35}}


def _model(arm: str):
    def model(prompt: str, item: EvalItem) -> float:
        kind = ("json" if prompt.startswith("{") else "markdown" if prompt.startswith("#")
                else "yaml" if prompt.startswith("question:") else "plain")
        return float(int(item.id[1:]) < RATES[arm][kind] * len(ITEMS))
    return model


def _text(html: str) -> str:
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_prompt_sensitivity_is_in_both_reports(home: Path, tmp_path: Path) -> None:
    for arm in ("a", "b"):
        run = labcoat.init(experiment="formats", arm=arm, seed=0)
        evals.evaluate_templates(ITEMS, _model(arm), run=run, step=1)
        run.finish()
    printed = cli("report", "formats", check=True).stdout
    out = tmp_path / "formats.html"
    cli("report", "formats", "--html", str(out), check=True)
    page = _text(out.read_text(encoding="utf-8"))
    assert "prompt-format sensitivity" in printed.lower()
    assert "Prompt-format sensitivity" in page
    # every interval the terminal prints for a template, and the template check, in the page
    intervals = re.findall(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", printed)
    assert len(intervals) >= 4 and all(i in page for i in intervals), (intervals, page)
    check = " ".join(next(line for line in printed.splitlines()
                          if line.startswith("template check")).split())
    assert check in page
