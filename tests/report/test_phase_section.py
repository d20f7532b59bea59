"""The step-time-by-phase section (issue 32, point 4) on a real run: two tinylm trials run by
`labcoat run`, one whose data loading sleeps 15 ms a batch from step 300 (the slow-step
alarm names it). Its numbers are checked against numpy medians of the phase records the
trials journaled (the store and the analysis in between); the terminal report, `labcoat
status`, the HTML report and the dashboard show them. A two-rank experiment written
straight into the store covers the rank menu; an experiment that timed nothing has no
section."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from helpers import (
    XSS,
    cli,
    plotly_figures,
    shared_home,
    slow_data_design,
    stored_experiment,
    use_home,
)

pytestmark = pytest.mark.needs("torch")  # the trials train tinylm

STEPS, SLOW_FROM = 330, 300
DESIGN = slow_data_design("phases", STEPS, SLOW_FROM)
PLAIN = """name: plain
hypothesis: {claim: c, metric: loss, direction: decrease}
command: "python train.py --seed {seed} --lr {lr}"
params: {lr: 0.1}
arms: {a: {control: true}, b: {params: {lr: 0.2}}}
seeds: 1
"""
# two ranks, written straight into the store: rank 1's data phase 3 ms slower from step 50
RANKED = PLAIN.replace("name: plain", "name: ranked")
RANKED_STEPS = 80


def _ranked_points() -> dict[str, list[tuple[int, float]]]:
    points: dict[str, list[tuple[int, float]]] = {}
    for rank in (0, 1):
        for s in range(1, RANKED_STEPS + 1):
            data = 0.001 + (0.003 if rank == 1 and s >= 50 else 0.0) + 1e-5 * (s % 3)
            phases = {"data": data, "forward": 0.002, XSS: 0.0005, "other": 0.0001}
            phases["total"] = sum(phases.values())
            for name, v in phases.items():
                points.setdefault(f"phase_s/{name}/rank{rank}", []).append((s, v))
    points["loss"] = [(s, 1.0 / s) for s in range(1, RANKED_STEPS + 1)]
    return points


@pytest.fixture(scope="module")
def phased(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("phases")
    (tmp / "design.yaml").write_text(DESIGN)
    with shared_home(tmp / "home") as home:
        cli("run", str(tmp / "design.yaml"), "--plain", check=True, cwd=tmp, timeout=600)
        stored_experiment("plain", PLAIN, [{"key": "a-s0", "arm": "a", "metrics": {
            "loss": [(s, 1.0 / s) for s in range(1, 11)]}}])
        stored_experiment("ranked", RANKED, [{
            "key": "a-s0", "arm": "a", "metrics": _ranked_points(),
            "alerts": [(50, "phase.slow", "warning", "data +3 ms/step on rank 1 from step 50"),
                       (50, "phase.slow", "info", "comm +3 ms/step on rank 0 from step 50: "
                        "waiting for rank 1")]}])
        _name_the_rank("ranked", "data +3 ms/step", {"phase": "data", "rank": 1, "step": 50})
        stored_experiment("many", PLAIN.replace("name: plain", "name: many"), [{
            "key": f"a-s{i}", "arm": "a", "seed": i, "metrics": {
                f"phase_s/{p}/rank0": [(s, 0.001 * (i + 1)) for s in range(1, 6)]
                for p in ("data", "total")},
            "alerts": [(3, "phase.slow", "warning", "data +1 ms/step")] if i == 13 else []}
            for i in range(14)])
        yield home


@pytest.fixture
def home(phased: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(monkeypatch, phased)


def _journaled(home: Path, key: str) -> dict[str, dict[int, float]]:
    """phase -> step -> seconds, as the trial wrote them (its journal's phases records)."""
    out: dict[str, dict[int, float]] = {}
    for journal in sorted((home / "runs" / "phases" / key).glob("attempt-*/journal.jsonl")):
        for line in journal.read_text().splitlines():
            record = json.loads(line)
            if record["kind"] == "phases":
                for name, seconds in record["s"].items():
                    out.setdefault(name, {})[record["step"]] = seconds
    assert out, f"no phases records in {key}'s journal"
    return out


def _analysis(name: str):
    from labcoat import analysis, store

    db = store.open_store()
    try:
        with db.session() as s:
            return analysis.analyze(s, store.find_experiment(s, name))
    finally:
        db.close()


def _med_ms(values) -> float:
    return float(np.median(list(values))) * 1e3


def test_medians_shares_and_alarm_split_match_the_journaled_phase_times(home: Path) -> None:
    phases = _analysis("phases").phases
    trials = {t["key"]: t for t in phases["trials"]}
    assert set(trials) == {"base-s0", "slow-s0"}
    for key, t in trials.items():
        times = _journaled(home, key)
        (row,) = t["ranks"]
        assert row["rank"] == 0 and row["steps"] == STEPS
        timed = [p for p in times if p not in ("total", "cpu_wait")]
        assert set(row["median_ms"]) == set(timed) and set(timed) <= set(phases["phases"])
        assert "cpu_wait" in times and "cpu_wait" not in phases["phases"]  # not a phase
        whole = sum(times["total"].values())
        for p in timed:
            assert row["median_ms"][p] == pytest.approx(_med_ms(times[p].values()), rel=1e-9)
            assert row["share"][p] == pytest.approx(sum(times[p].values()) / whole, rel=1e-9)
        assert row["total_ms"] == pytest.approx(_med_ms(times["total"].values()), rel=1e-9)
        # the per-step series: medians of consecutive steps, at most 200 points
        series = t["series"][0]
        size = -(-STEPS // 200)
        assert len(series["step"]) == -(-STEPS // size) <= 200
        for p in ("data", "checkpoint", "total"):
            dense = np.array([times[p].get(s, 0.0) for s in range(1, STEPS + 1)]) * 1e3
            want = [np.median(dense[i:i + size]) for i in range(0, STEPS, size)]
            np.testing.assert_allclose(series[p], want, rtol=1e-9)
    # the alarm itself is tests/torch_phases' subject; here: it is there, and split right
    alarm = next(a for a in trials["slow-s0"]["alarms"] if (a["phase"], a["rank"]) == (
        "data", 0))
    assert alarm["waits_for"] is None and alarm["step"] <= SLOW_FROM < alarm["detected"]
    for key, t in trials.items():
        times = _journaled(home, key)
        for a in t["alarms"]:
            for p, by_step in times.items():
                before = [v for s, v in by_step.items() if s < a["step"]]
                after = [v for s, v in by_step.items() if s >= a["step"]]
                assert a["before_ms"][0].get(p) == (
                    pytest.approx(_med_ms(before), rel=1e-9) if before else None)
                assert a["after_ms"][0].get(p) == (
                    pytest.approx(_med_ms(after), rel=1e-9) if after else None)
    assert alarm["after_ms"][0]["data"] > alarm["before_ms"][0]["data"]


def test_terminal_report_and_status_show_the_table_and_the_alarm(home: Path) -> None:
    phases = _analysis("phases").phases
    said = cli("report", "phases", check=True).stdout
    assert "Step time by phase" in said and "guard alerts" not in said
    for t in phases["trials"]:
        (row,) = t["ranks"]
        line = next(x for x in said.splitlines() if x.strip().startswith(t["key"]))
        for p in ("data", "forward", "backward", "optimizer"):
            assert f"{row['median_ms'][p]:.3g} {100 * row['share'][p]:.0f}%" in line, (p, line)
        assert line.rstrip().endswith(f"{row['total_ms']:.3g}")
    alarms = {t["key"]: t["alarms"] for t in phases["trials"]}["slow-s0"]
    alarm = next(a for a in alarms if a["phase"] == "data")
    assert f"slow-s0 step {alarm['step']}: {alarm['severity']} {alarm['message']}" in said
    assert (f"data {alarm['before_ms'][0]['data']:.3g} -> {alarm['after_ms'][0]['data']:.3g} ms"
            in said)
    assert said.index("Step time by phase") < said.index("slow steps (") < said.index("Verdict")
    status = cli("status", "phases", check=True).stdout
    assert f"slow steps ({sum(len(t['alarms']) for t in phases['trials'])}):" in status
    assert alarm["message"][:40] in status and "guard alerts" not in status
    # the JSON report carries the table and the alarms, not the charts' points
    data = json.loads(cli("report", "phases", "--json", check=True).stdout)["phases"]
    assert [t["key"] for t in data["trials"]] == [t["key"] for t in phases["trials"]]
    assert "series" not in data["trials"][0]
    assert data["trials"][0]["ranks"][0]["total_ms"] == pytest.approx(
        phases["trials"][0]["ranks"][0]["total_ms"])


def _phase_figures(html: str) -> list[tuple[list, dict]]:
    return [(traces, layout) for traces, layout in plotly_figures(html)
            if any(tr.get("stackgroup") for tr in traces)]


def test_html_report_stacks_each_trials_phases_and_marks_the_alarm(home: Path,
                                                                    tmp_path: Path) -> None:
    phases = _analysis("phases").phases
    out = tmp_path / "r.html"
    cli("report", "phases", "--html", str(out), check=True)
    html = out.read_text()
    assert "<section id='phases'><h2>Step time by phase</h2>" in html
    figures = _phase_figures(html)
    assert len(figures) == 2
    by_title = {layout["title"]["text"].split(":")[0]: (traces, layout)
                for traces, layout in figures}
    for t in phases["trials"]:
        traces, layout = by_title[t["key"]]
        series = t["series"][0]
        stacked = [tr for tr in traces if tr.get("stackgroup")]
        assert [tr["name"] for tr in stacked] == [p for p in phases["phases"] if p in series]
        for tr in stacked:
            np.testing.assert_allclose(tr["y"], series[tr["name"]])
            assert tr["x"] == series["step"]
        marked = [s["x0"] for s in layout.get("shapes", [])]
        assert marked == [a["step"] for a in t["alarms"]]
        assert "updatemenus" not in layout  # one rank: no menu
    # the phase points are drawn here, not as curves of their own
    curves = [tr for traces, _ in plotly_figures(html) for tr in traces]
    assert not any("phase_s/" in json.dumps(tr.get("name", "")) for tr in curves)
    assert "phase_s/" not in html.split("<section id='curves'>")[1].split("</section>")[0]
    incidents = html.split("<section id='incidents'>")[1].split("</section>")[0]
    assert "Guard alerts" not in incidents and "href='#phases'" in incidents


def test_dashboard_page_has_the_section_and_plain_experiments_have_none(home: Path) -> None:
    from fastapi.testclient import TestClient

    from labcoat.web import UIConfig, create_app

    app = TestClient(create_app(UIConfig()), base_url="http://127.0.0.1:8000")
    page = app.get("/experiments/phases")
    assert page.status_code == 200
    assert "<section id='phases'>" in page.text and "href='#phases'" in page.text
    assert len(_phase_figures(page.text)) == 2
    # a trial's page: its phases stacked (not one curve per phase and rank), alarm marked
    trial = app.get("/trial", params={"experiment": "phases", "key": "slow-s0"}).text
    ((traces, layout),) = _phase_figures(trial)
    phases = _analysis("phases").phases
    (t,) = [t for t in phases["trials"] if t["key"] == "slow-s0"]
    np.testing.assert_allclose([tr["y"] for tr in traces if tr.get("stackgroup")],
                               [t["series"][0][p] for p in phases["phases"]
                                if p in t["series"][0]])
    assert [s["x0"] for s in layout["shapes"]] == [a["step"] for a in t["alarms"]]
    assert "phase_s/" not in trial.split("<h2>Curves</h2>")[1].split("<h2")[0]
    plain = app.get("/experiments/plain").text
    assert "Step time by phase" not in plain and "id='phases'" not in plain
    assert "Step time by phase" not in cli("report", "plain", check=True).stdout
    assert "Step time by phase" not in app.get(
        "/trial", params={"experiment": "plain", "key": "a-s0"}).text
    assert _analysis("plain").phases == {}


def _name_the_rank(experiment: str, message: str, evidence: dict) -> None:
    """Give a stored alert the evidence the slow-step monitor records (stored_experiment
    writes none)."""
    from labcoat import store

    db = store.open_store()
    with db.session() as s:
        ids = [t.id for t in store.find_experiment(s, experiment).trials]
        (alert,) = [a for a in store.alerts(s, ids) if a.message.startswith(message)]
        alert.evidence = evidence
        s.commit()
    db.close()


def test_several_ranks_get_a_row_each_and_a_rank_menu(home: Path, tmp_path: Path) -> None:
    phases = _analysis("ranked").phases
    assert phases["phases"] == ["data", "forward", XSS, "other"]
    (t,) = phases["trials"]
    assert [r["rank"] for r in t["ranks"]] == [0, 1]
    assert t["ranks"][0]["median_ms"]["data"] == pytest.approx(1.01)  # 1 ms + 0.01 (s % 3)
    alarm, wait = t["alarms"]
    assert (alarm["rank"], alarm["phase"], alarm["step"]) == (1, "data", 50)
    assert wait["severity"] == "info" and wait["rank"] is None  # stored without evidence
    # rank 1's data from step 50 on: 4 ms (+ 0, 0.01 or 0.02); before: 1 ms (+ ...)
    assert alarm["after_ms"][1]["data"] == pytest.approx(4.01)
    assert alarm["before_ms"][1]["data"] == pytest.approx(1.01)
    assert alarm["after_ms"][0]["data"] == pytest.approx(1.01)
    said = cli("report", "ranked", check=True).stdout
    # a wait (level info) is listed as such, by status too
    for text in (said, cli("status", "ranked", check=True).stdout):
        assert "slow steps (2):" in text and "a-s0 step 50: info comm +3 ms/step" in text
    # the named rank's medians before and from the alarm's step: data 1 -> 4 ms; the step
    # 3.6 -> 6.6 ms (forward 2, the XSS phase 0.5, other 0.1 ms)
    assert "rank 1 median before -> from step 50: data 1.01 -> 4.01 ms, total 3.61 -> 6.61 ms" \
        in said
    rows = [x.split() for x in said.splitlines() if re.match(r"\s*a-s0\s+[01]\s+80\s", x)]
    assert [r[1] for r in rows] == ["0", "1"]
    out = tmp_path / "r.html"
    cli("report", "ranked", "--html", str(out), check=True)
    html = out.read_text()
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    ((traces, layout),) = _phase_figures(html)
    (menu,) = layout["updatemenus"]
    assert [b["label"] for b in menu["buttons"]] == ["rank 0", "rank 1"]
    assert menu["active"] == 1  # the rank the alarm names is shown first
    assert [tr["visible"] for tr in traces] == menu["buttons"][1]["args"][0]["visible"]
    assert layout["shapes"] == menu["buttons"][1]["args"][1]["shapes"]
    for index, button in enumerate(menu["buttons"]):
        shown = [tr for tr, on in zip(traces, button["args"][0]["visible"], strict=True) if on]
        assert {tr.get("stackgroup") for tr in shown} == {f"rank{index}", None}
        # the data alarm on rank 1's chart; the wait, naming no rank, on both
        assert [s["x0"] for s in button["args"][1]["shapes"]] == [50] * (1 + index)
    rank1 = [tr for tr in traces if tr.get("stackgroup") == "rank1" and tr["name"] == "data"]
    assert max(rank1[0]["y"]) == pytest.approx(4.02) and min(rank1[0]["y"]) == pytest.approx(1.0)


def test_charts_are_capped_with_alarmed_trials_first(home: Path, tmp_path: Path) -> None:
    from labcoat.report._phases import CHARTS

    out = tmp_path / "r.html"
    cli("report", "many", "--html", str(out), check=True)
    html = out.read_text()
    titles = [layout["title"]["text"].split(":")[0] for _, layout in _phase_figures(html)]
    assert titles == ["a-s13", *[f"a-s{i}" for i in range(CHARTS - 1)]]
    assert f"charts for {CHARTS} of 14 trials" in html
    table = html.split("<table id='phase-table'>")[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + 14  # the table lists every trial
    # data: (i + 1) ms every step, the whole step; share 100%
    assert "<td>a-s4</td><td>0</td><td>5</td><td>5 <span class='muted'>100%</span>" in table
