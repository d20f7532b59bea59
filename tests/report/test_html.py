"""`labcoat report EXP --html`: one self-contained page drawn from the same analysis as
`labcoat report --json` (checked number for number), every user string escaped."""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from helpers import XSS, cli, fake_design, stored_experiment, xss_experiment


def figures(html: str) -> dict[str, list[dict]]:
    """{title: traces} of every Plotly figure in the page, parsed from its JSON."""
    decoder = json.JSONDecoder()
    out = {}
    for match in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', html):
        data, end = decoder.raw_decode(html, match.end())
        layout, _ = decoder.raw_decode(html, end + html[end:].index("{"))
        out[layout["title"]["text"]] = data
    return out


def render(name: str) -> tuple[str, dict]:
    """The HTML report of `name` and its `report --json` data, computed in this process."""
    from labcoat import report, store

    db = store.open_store()
    try:
        with db.session() as session:
            exp = store.find_experiment(session, name)
            page = report.report_page(session, exp)
            return report.render_html(page), report.analysis_dict(page.analysis)
    finally:
        db.close()


def commands(name: str) -> list[list[str]]:
    from labcoat import store

    db = store.open_store()
    try:
        with db.session() as session:
            return [t.command for t in store.find_experiment(session, name).trials]
    finally:
        db.close()


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A real run: 2 arms x 3 seeds of the fake trial, each with a guard alert at step 3."""
    tmp = tmp_path_factory.mktemp("html")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABCOAT_HOME", str(tmp / "home"))
        mp.delenv("LABCOAT_DB", raising=False)
        design = fake_design(tmp / "d", steps=8, seeds=3, parallelism=6, variant_quality=0.8,
                             extra="--alert-at 3")
        cli("run", str(design), "--plain", check=True)
        out = tmp / "report.html"
        printed = cli("report", "fake", "--html", str(out), check=True).stdout
        _, data = render("fake")  # what `labcoat report --json` prints, in this process
        yield {"html": out.read_text(encoding="utf-8"), "printed": printed, "tmp": tmp,
               "json": data, "commands": commands("fake")}


def test_the_page_is_self_contained_and_says_so(experiment: dict) -> None:
    html = experiment["html"]
    assert "self-contained" in experiment["printed"]
    assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)=['\"]?(https?:)?//", html)
    assert html.count("<script>") >= 1 and "Plotly.newPlot" in html
    assert html.count("plotly.js v") == 1  # the bundle, inlined once
    assert "@media print" in html


def test_verdict_and_tables_are_the_json_reports_numbers(experiment: dict) -> None:
    html, report = experiment["html"], experiment["json"]
    (comparison,) = report["results"][0]["comparisons"]
    assert comparison["verdict"] == "supported"
    verdict = re.search(r"data-verdict='(\w+)'>.*?<b class='word'>(\w+)</b> &mdash; ([^<]*)",
                        html)
    assert verdict.group(1) == "supported" and verdict.group(2) == "SUPPORTED"
    assert html_lib.unescape(verdict.group(3)) == comparison["reason"]
    for arm in report["results"][0]["arms"]:
        o = arm["overall"]
        assert f"{o['point']:.3f} [{o['low']:.3f}, {o['high']:.3f}]" in html
        for name, i in arm["aggregates"].items():
            assert f"{i['point']:.3f} [{i['low']:.3f}, {i['high']:.3f}]" in html, name


def test_forest_plot_draws_the_adjusted_per_task_differences(experiment: dict) -> None:
    report = experiment["json"]
    (c,) = report["results"][0]["comparisons"]
    (forest,) = [v for k, v in figures(experiment["html"]).items() if "per task" in k]
    seeds = next(t for t in forest if t["name"].startswith("seeds"))
    tasks = report["results"][0]["tasks"]
    expected = [c["per_task"][t][0]["difference"] for t in tasks] + [c["seeds"]]
    assert seeds["x"] == pytest.approx([d["estimate"] for d in expected])
    assert seeds["error_x"]["array"] == pytest.approx([d["high"] - d["estimate"]
                                                       for d in expected])
    pooled = next(t for t in forest if t["name"].startswith("pooled"))
    assert pooled["x"] == pytest.approx([c["generalization"]["pooled"]["estimate"]])


def test_curves_band_and_mean_match_the_exported_points(experiment: dict, monkeypatch) -> None:
    from labcoat import store

    monkeypatch.setenv("LABCOAT_HOME", str(experiment["tmp"] / "home"))
    db = store.open_store()
    with db.session() as session:  # every raw point, as `labcoat export` lists them
        trials = {t.id: t for t in store.find_experiment(session, "fake").trials}
        rows = [{"trial": trials[p.trial_id].key, "arm": trials[p.trial_id].arm,
                 "step": p.step, "value": p.value}
                for p in store.metric_points(session, list(trials), "loss")]
    db.close()
    (curves,) = [v for k, v in figures(experiment["html"]).items() if k.startswith("loss over")]
    for arm in ("base", "better"):  # 8 steps: every step is drawn
        by_step: dict[int, list[float]] = {}
        for r in rows:
            if r["arm"] == arm:
                by_step.setdefault(r["step"], []).append(r["value"])
        steps = sorted(by_step)
        line = next(t for t in curves if t["name"].startswith(f"{arm} (n=3)"))
        assert line["x"] == steps
        assert line["y"] == pytest.approx([np.mean(by_step[s]) for s in steps])
        band = next(t for t in curves if t["name"].startswith(f"{arm} seed range"))
        assert band["y"] == pytest.approx([max(by_step[s]) for s in steps]
                                          + [min(by_step[s]) for s in steps][::-1])


def test_every_section_is_there_or_says_why_not(experiment: dict) -> None:
    html = experiment["html"]
    for section in ("verdicts", "design", "review", "hypotheses", "curves", "scaling",
                    "incidents", "trials"):
        assert f"<section id='{section}'>" in html
    assert "no scales in this design" in html
    assert "Pre-registered analysis plan" in html and "claim: higher quality helps" in html
    assert "few-seeds" in html  # the design review's finding on 3 seeds
    assert "update.param_unchanged" in html and "timeline: attempts and guard alerts" in html
    assert "no restarts." in html
    assert "goodput" in html
    for command in experiment["commands"]:  # the command that reproduces each trial
        assert f"<code>{shlex.join(command)}</code>".replace("'", "&#x27;") in html


def test_user_strings_are_escaped_everywhere(home: Path) -> None:
    xss_experiment()
    html, _ = render(XSS)
    assert XSS not in html and "<script>alert" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 8  # name, claim, arm, ...


def test_scaling_section_draws_the_reports_fit_and_band(home: Path, tmp_path: Path) -> None:
    widths = [16, 32, 64, 128, 256]
    scales = "\n".join(f"  - {{name: w{w}, params: {{width: {w}}}}}" for w in widths)
    design = f"""name: scaled
hypothesis: {{claim: wider is better, metric: loss, direction: decrease}}
command: "python train.py --width {{width}}"
params: {{width: 16}}
arms:
  base: {{control: true}}
  other: {{params: {{}}}}
seeds: 2
scales:
{scales}
"""
    rng = np.random.default_rng(0)
    trials = [{"key": f"{arm}-w{w}-s{s}", "arm": arm, "seed": s, "params": {"width": w},
               "scale": f"w{w}",
               "metrics": {"loss": [(10, (1.5 + 8 * w**-0.5) * np.exp(rng.normal(0, .005)))]}}
              for arm in ("base", "other") for w in widths for s in range(2)]
    stored_experiment("scaled", design, trials)
    html, data = render("scaled")
    band = data["scales"]["arms"][0]
    assert band["fit"]["params"]["alpha"]["low"] <= 0.5 <= band["fit"]["params"]["alpha"]["high"]
    figure = next(v for k, v in figures(html).items() if k.startswith("base: loss"))
    fit = next(t for t in figure if t["name"] == "fit")
    assert fit["x"] == pytest.approx(band["band"]["grid"])
    assert fit["y"] == pytest.approx(band["band"]["fit"])
    held = next(t for t in figure if t["name"].startswith("backtest"))
    assert held["y"] == pytest.approx([r["predicted"] for r in band["backtest"]["table"]])


def test_bad_targets_and_missing_plotly_end_in_one_message(experiment: dict, monkeypatch,
                                                           tmp_path: Path) -> None:
    from labcoat import report, store
    from labcoat.errors import LabcoatError

    monkeypatch.setenv("LABCOAT_HOME", str(experiment["tmp"] / "home"))
    db = store.open_store()
    with db.session() as session:
        exp = store.find_experiment(session, "fake")
        with pytest.raises(LabcoatError, match="is a directory"):
            report.write_html_report(session, exp, tmp_path)
        with pytest.raises(LabcoatError, match="no/such does not exist"):
            report.write_html_report(session, exp, tmp_path / "no" / "such" / "x.html")
    db.close()
    blocker = tmp_path / "blocker" / "plotly"  # an environment without plotly
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named plotly')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(blocker.parent),
                                                      os.environ.get("PYTHONPATH", "")]))
    result = cli("report", "fake", "--html", str(tmp_path / "x.html"))
    assert result.returncode == 2 and "pip install 'labcoat[ui]'" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x.html").exists()
