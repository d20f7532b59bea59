"""README's "Your first experiment", run verbatim as a reader would (issue 30, point 1):
train.py and design.yaml copied from README.md, `labcoat run design.yaml`, then
`labcoat report quick-warmup` (terminal, --json, --html).

The hypothesis is on the scalar `loss`; the script's `run.log_items` accuracy is a metric
of its own ("item score"), shown in its own section with intervals inside [0, 1], never
in the loss table, the loss differences or the loss forest plot. Both reports say the
same things of the verdict, and the header counts every trial. Numbers are checked
against scipy on what `labcoat export` prints."""

from __future__ import annotations

import html as html_lib
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as sps

from helpers import cli, plotly_figures, shared_home

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_file(name: str) -> str:
    """The block of README.md marked `<!-- file: NAME -->`, verbatim."""
    found = re.search(rf"<!-- file: {re.escape(name)} -->\n```\w*\n(.*?)```",
                      README.read_text(encoding="utf-8"), re.S)
    assert found, f"README.md has no `<!-- file: {name} -->` block"
    return found[1]


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("readme")
    with shared_home(tmp / ".labcoat"):
        for name in ("train.py", "design.yaml"):
            (tmp / name).write_text(readme_file(name), encoding="utf-8")
        cli("run", "design.yaml", cwd=tmp, check=True)
        printed = cli("report", "quick-warmup", cwd=tmp, check=True).stdout
        data = json.loads(cli("report", "quick-warmup", "--json", cwd=tmp, check=True).stdout)
        cli("report", "quick-warmup", "--html", "report.html", cwd=tmp, check=True)
        items = [json.loads(line) for line in cli("export", "quick-warmup", "--items",
                                                  cwd=tmp, check=True).stdout.splitlines()]
        loss = [json.loads(line) for line in cli("export", "quick-warmup", "--metric", "loss",
                                                 cwd=tmp, check=True).stdout.splitlines()]
        yield {"tmp": tmp, "printed": printed, "json": data, "items": items, "loss": loss,
               "html": (tmp / "report.html").read_text(encoding="utf-8")}


def _t_interval(x: list[float]) -> tuple[float, float, float]:
    x = np.asarray(x, dtype=float)
    half = sps.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    return x.mean(), x.mean() - half, x.mean() + half


def test_the_loss_hypothesis_shows_only_loss(first: dict) -> None:
    printed, result = first["printed"], first["json"]["results"][0]
    assert result["hypothesis"]["metric"] == "loss" and result["tasks"] == []
    c = result["comparisons"][0]
    assert c["items"] is None and c["per_task"] == {}
    loss_part = printed[printed.index("loss by arm"):printed.index("evaluations")]
    assert "addition" not in loss_part and "macro" not in loss_part
    assert "paired item CIs" not in loss_part  # no item column to explain
    # the loss difference is Welch's on each trial's last loss (scipy, on the exported points)
    last: dict[str, tuple[int, float]] = {}
    for p in first["loss"]:
        if p["trial"] not in last or p["step"] > last[p["trial"]][0]:
            last[p["trial"]] = (p["step"], p["value"])
    arm = {p["trial"]: p["arm"] for p in first["loss"]}
    xa = [v for t, (_, v) in last.items() if arm[t] == "control"]
    xb = [v for t, (_, v) in last.items() if arm[t] == "warmup"]
    ref = sps.ttest_ind(xb, xa, equal_var=False)
    assert c["seeds"]["estimate"] == pytest.approx(np.mean(xb) - np.mean(xa))
    assert c["seeds"]["p_value"] == pytest.approx(ref.pvalue, rel=1e-6)


def test_the_html_forest_plot_of_loss_draws_only_the_loss_difference(first: dict) -> None:
    forests = [(traces, layout) for traces, layout in plotly_figures(first["html"])
               if "difference in" in json.dumps(layout.get("xaxis", {}))]
    assert len(forests) == 1
    traces, layout = forests[0]
    assert layout["xaxis"]["title"]["text"] == "difference in loss"
    labels = {y for t in traces for y in t["y"]}
    assert labels == {"overall (verdict)"}, labels
    (x,), = [t["x"] for t in traces]
    assert x == pytest.approx(first["json"]["results"][0]["comparisons"][0]["seeds"]["estimate"])


def test_eval_items_are_their_own_metric_inside_0_1(first: dict) -> None:
    """Per arm, the mean item score on `addition` with a t interval across seeds cut to
    [0, 1] (scipy on `export --items`), and the paired item difference; named as the item
    score, not as loss."""
    ev = first["json"]["evaluations"]
    assert ev["metric"] == "item score" and ev["judged_by"] == ["loss"]
    assert ev["bounds"] == [0, 1] and ev["tasks"] == ["addition"]
    per_trial: dict[str, list[float]] = defaultdict(list)
    arm_of = {}
    for row in first["items"]:
        per_trial[row["trial"]].append(row["score"])
        arm_of[row["trial"]] = row["arm"]
    for arm in ev["arms"]:
        means = [np.mean(s) for t, s in per_trial.items() if arm_of[t] == arm["arm"]]
        point, low, high = _t_interval(means)
        got = arm["tasks"]["addition"]
        assert got["point"] == pytest.approx(point)
        assert got["low"] == pytest.approx(max(low, 0.0))
        assert got["high"] == pytest.approx(min(high, 1.0))
        assert 0 <= got["low"] <= got["high"] <= 1
    assert any(a["tasks"]["addition"]["high"] == 1.0 for a in ev["arms"])  # was 1.070
    (comparison,) = ev["comparisons"]
    assert comparison["arm"] == "warmup" and ev["control"] == "control"
    d = comparison["tasks"][0]["difference"]
    assert -1 <= d["low"] <= d["estimate"] <= d["high"] <= 1
    section = words(first["printed"][first["printed"].index("evaluations"):])
    assert "item score by arm" in section and "cut to [0, 1]" in section
    assert "not the hypothesis's metric (loss)" in section
    bounds = re.findall(r"\[([-+]?\d\.\d+), ([-+]?\d\.\d+)\]",
                        section.split("each arm minus")[0])
    assert len(bounds) == 2 and all(0 <= float(n) <= 1 for pair in bounds for n in pair)
    html_section = first["html"][first["html"].index("<section id='evaluations'>"):]
    html_section = html_section[:html_section.index("</section>")]
    assert "addition" in html_section and "item score by arm" in html_section
    assert "1.070" not in first["html"] and "1.070" not in first["printed"]


def _html_verdicts(html: str) -> list[str]:
    """Each statement of each verdict box: the sentence after the word, then each line."""
    out = []
    for box in re.findall(r"<div class='verdict [^']*' data-verdict='[^']*'>(.*?)</div>", html):
        for part in box.split("<br>"):
            text = html_lib.unescape(re.sub(r"<[^>]+>", "", part))
            out.append(words(text.replace(" \u2014 ", " - ")))
    return out


def _terminal_verdicts(printed: str) -> list[str]:
    """The lines of the verdict block: "Verdict for ..." and the lines indented under it."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Verdict for "))
    out = []
    for line in lines[start:]:
        if line.startswith("Verdict for "):
            out.append(words(line[len("Verdict for "):]))
        elif line.startswith("  ") and out:
            out.append(words(line))
        else:
            break
    return out


def test_both_reports_say_the_same_things_of_the_verdict(first: dict) -> None:
    html, terminal = _html_verdicts(first["html"]), _terminal_verdicts(first["printed"])
    assert set(html) == set(terminal), (html, terminal)
    assert len(terminal) >= 2 and any(s.startswith("power ") for s in terminal)
    statements = first["json"]["results"][0]["comparisons"][0]["statements"]
    assert [words(s) for s in statements][1:] == terminal[1:]


def test_the_header_counts_every_trial(first: dict) -> None:
    assert first["printed"].splitlines()[0] == ("Experiment quick-warmup - done "
                                                "(10/10 trials finished)")
    assert "10/10 trials finished" in first["html"]


ADHOC = """import labcoat
run = labcoat.init(experiment="adhoc-one", seed=0)
for step in range(1, 11):
    run.log(step, loss=1.0 / step)
run.finish()
"""


def test_an_ad_hoc_run_is_counted_as_one(home: Path, tmp_path: Path) -> None:
    """labcoat.init(experiment=...) outside `labcoat run`: the header says one ad-hoc run
    finished, not "(0/0 trials finished)"."""
    import subprocess

    script = tmp_path / "adhoc.py"
    script.write_text(ADHOC, encoding="utf-8")
    subprocess.run([sys.executable, str(script)], check=True, capture_output=True, text=True)
    printed = cli("report", "adhoc-one", check=True).stdout
    assert printed.splitlines()[0] == "Experiment adhoc-one - done (1 ad-hoc run, finished)"
    out = tmp_path / "adhoc.html"
    cli("report", "adhoc-one", "--html", str(out), check=True)
    assert "1 ad-hoc run, finished" in out.read_text(encoding="utf-8")
    assert json.loads(cli("report", "adhoc-one", "--json", check=True).stdout)[
        "trials_line"] == "1 ad-hoc run, finished"
