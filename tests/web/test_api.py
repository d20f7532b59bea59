"""The dashboard's HTTP surface with a real app over a real SQLite store: JSON checked
against the report and brute force, read-only, token, host check, escaping."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from helpers import XSS, cli, fake_design

from .conftest import STEPS, loss  # noqa: TID252


def client(**config) -> TestClient:
    from labcoat.web import UIConfig, create_app

    return TestClient(create_app(UIConfig(**config)), base_url="http://127.0.0.1:8000")


@pytest.fixture(scope="module")
def app(ui_home: Path) -> TestClient:
    return client()


def test_experiments_list_and_report_are_the_analysis(app: TestClient, ui_home: Path) -> None:
    from labcoat import report, store

    rows = {r["name"]: r for r in app.get("/api/experiments").json()}
    assert set(rows) == {"demo", "other", XSS}
    assert rows["demo"]["verdicts"] == [{"hypothesis": "H1", "variant": "better",
                                         "control": "base", "verdict": "supported"}]
    db = store.open_store()
    with db.session() as session:
        expected = report.analysis_dict(report.analyze(session, store.find_experiment(
            session, "demo")))
    db.close()
    got = app.get("/api/experiments/demo").json()["report"]
    assert got["results"] == json.loads(json.dumps(expected["results"], default=str))
    page = app.get("/experiments/demo").text
    assert "data-verdict='supported'" in page and "<b class='word'>SUPPORTED</b>" in page


def test_arm_curves_are_means_over_seeds_at_lttb_steps(app: TestClient) -> None:
    data = app.get("/api/curves", params={"experiment": "demo", "metric": "loss",
                                          "points": 50}).json()["arms"]
    for arm in ("base", "better"):
        steps = [int(s) for s in data[arm]["step"]]
        assert len(steps) == 50 and steps[0] == 1 and steps[-1] == STEPS
        per_seed = np.array([[loss(s, arm, seed) for s in steps] for seed in range(3)])
        assert data[arm]["trials"] == 3
        assert data[arm]["mean"] == pytest.approx(per_seed.mean(axis=0).tolist())
        assert data[arm]["low"] == pytest.approx(per_seed.min(axis=0).tolist())
        assert data[arm]["high"] == pytest.approx(per_seed.max(axis=0).tolist())
    # the wiggle of period 7 makes LTTB pick different steps than every 8th
    assert steps != list(range(1, STEPS + 1, 8))


def test_trial_curve_is_thinned_to_real_points(app: TestClient) -> None:
    data = app.get("/api/trial", params={"experiment": "demo", "key": "base-s1",
                                         "points": 40}).json()
    curve = data["curves"]["loss"]
    assert len(curve["step"]) == 40 and curve["step"][0] == 1 and curve["step"][-1] == STEPS
    assert curve["value"] == pytest.approx([loss(int(s), "base", 1) for s in curve["step"]])
    assert data["alerts"][0]["rule"] == "update.param_unchanged"
    assert data["logs"][-1].endswith("step 3")
    page = app.get("/trial", params={"experiment": "demo", "key": "base-s1"}).text
    assert "fc1 did not change" in page and "LTTB, 1000 points" not in page  # 400 points
    assert "Plotly.newPlot" in page and "<h2>Checkpoints</h2>" in page


def test_compare_page_shows_both_verdicts_and_curves(app: TestClient) -> None:
    page = app.get("/compare", params={"a": "demo", "b": "other"}).text
    assert page.count("<b class='word'>SUPPORTED</b>") == 2
    assert "loss: mean over seeds per arm" in page and "Plotly.newPlot" in page


def test_every_write_method_is_refused_and_nothing_changes(app: TestClient,
                                                           ui_home: Path) -> None:
    def snapshot() -> list:
        with sqlite3.connect(ui_home / "labcoat.db") as db:
            return [db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()
                    for t in ("experiment", "trial", "attempt", "metric_point", "alert")]

    before = snapshot()
    for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
        for path in ("/", "/experiments/demo", "/api/experiments", "/api/experiments/demo",
                     "/trial?experiment=demo&key=base-s0"):
            response = app.request(method, path)
            assert response.status_code == 405, (method, path)
            assert response.headers["allow"] == "GET, HEAD"
    assert snapshot() == before


def test_a_token_is_required_off_loopback(ui_home: Path) -> None:
    from labcoat.web import UIConfig

    assert UIConfig(host="0.0.0.0").token  # generated when not given
    remote = client(host="0.0.0.0", token="correct-horse-battery")
    assert remote.get("/api/experiments").status_code == 401
    assert remote.get("/api/experiments?token=wrong-token-123").status_code == 401
    assert remote.get("/api/experiments", headers={"Authorization": "Bearer correct-horse-battery"}
                      ).status_code == 200
    first = remote.get("/experiments/demo?token=correct-horse-battery", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/experiments/demo"
    assert "labcoat_token" in first.headers["set-cookie"]
    assert "HttpOnly" in first.headers["set-cookie"]
    assert remote.get("/experiments/demo").status_code == 200  # the cookie carries it now
    assert remote.post("/", headers={"Authorization": "Bearer correct-horse-battery"}
                       ).status_code == 405


def test_loopback_answers_only_to_local_host_names(app: TestClient) -> None:
    assert app.get("/", headers={"host": "attacker.example:8000"}).status_code == 400
    assert app.get("/", headers={"host": "localhost:8000"}).status_code == 200
    assert app.get("/").headers["x-content-type-options"] == "nosniff"
    assert "default-src 'self'" in app.get("/").headers["content-security-policy"]


def test_user_strings_are_escaped_on_every_page(app: TestClient) -> None:
    pages = ["/", "/api/experiments", f"/experiments/{XSS}", "/compare?a=demo&b=" + XSS,
             f"/experiments/{XSS}-missing"]
    pages.append("/trial?" + "&".join(f"{k}={v}" for k, v in
                                       (("experiment", XSS), ("key", f"base-s0-{XSS}"))))
    for path in pages:
        response = app.get(path)
        assert response.status_code in (200, 404), path
        if response.headers["content-type"].startswith("text/html"):
            assert "<script>alert" not in response.text, path
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text, path
    trial = app.get("/trial", params={"experiment": XSS, "key": f"base-s0-{XSS}"}).text
    assert trial.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5  # key, alert, log, ...


def test_unknown_names_are_404_with_the_reason(app: TestClient) -> None:
    response = app.get("/experiments/nope")
    assert response.status_code == 404 and "no experiment named &#x27;nope&#x27;" in response.text
    response = app.get("/api/trial", params={"experiment": "demo", "key": "nope"})
    assert response.status_code == 404 and "has no trial 'nope'" in response.json()["error"]


def test_the_experiment_page_is_live_while_trials_run(home: Path, tmp_path: Path) -> None:
    """A real run in the background: the page reloads itself while a trial runs, then
    shows the verdict once every trial has finished."""
    # every trial waits after its step 1 until the test has seen the page live
    gate = tmp_path / "gate"
    design = fake_design(tmp_path, steps=6, seeds=2, parallelism=4, extra=f"--wait-for {gate}")
    run = subprocess.Popen([sys.executable, "-m", "labcoat.cli", "run", str(design), "--plain"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        app = client(refresh=3)
        deadline = time.monotonic() + 120
        page = ""
        while time.monotonic() < deadline and run.poll() is None:
            response = app.get("/experiments/fake")
            if response.status_code == 200 and ">running<" in response.text:
                page = response.text
                break
            time.sleep(0.2)
        assert "<meta http-equiv='refresh' content='3'>" in page, "never saw it running"
        gate.touch()
        assert run.wait(timeout=300) == 0, run.stderr.read()
        done = app.get("/experiments/fake").text
        assert "http-equiv='refresh'" not in done and ">done<" in done
        assert re.search(r"data-verdict='(supported|inconclusive)'", done)
    finally:
        run.kill()
        run.wait()


def test_ui_flags_and_missing_extra_end_in_one_message(home: Path, tmp_path: Path,
                                                       monkeypatch) -> None:
    result = cli("ui", "--port", "70000")
    assert result.returncode == 2 and "--port 70000 is not a TCP port" in result.stderr
    assert "Traceback" not in result.stderr
    blocker = tmp_path / "blocker" / "fastapi"  # an environment without the ui extra
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text(
        "raise ModuleNotFoundError('No module named fastapi', name='fastapi')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(blocker.parent),
                                                      os.environ.get("PYTHONPATH", "")]))
    result = cli("ui", "--port", "0")
    assert result.returncode == 2 and "pip install 'labcoat[ui]'" in result.stderr
    assert "fastapi is not installed" in result.stderr and "Traceback" not in result.stderr


def test_a_missing_or_unknown_parameter_is_one_message_with_the_choices(app: TestClient
                                                                        ) -> None:
    """What a user typing URLs by hand gets (issue 30, point 4): the parameter named, the
    valid choices listed, 400 for a missing or malformed one and 404 for an unknown name;
    never FastAPI's raw JSON and never a plausible empty answer."""
    keys = [f"{arm}-s{seed}" for arm in ("base", "better") for seed in range(3)]
    missing = app.get("/api/trial", params={"experiment": "demo"})
    assert missing.status_code == 400 and set(missing.json()) == {"error"}
    error = missing.json()["error"]
    assert "query parameter key=" in error and "'demo'" in error
    assert all(k in error for k in keys) and "detail" not in missing.text
    page = app.get("/trial", params={"experiment": "demo"})
    assert page.status_code == 400 and "query parameter key=" in page.text
    assert "base-s0, base-s1" in page.text and page.headers["content-type"].startswith(
        "text/html")
    no_experiment = app.get("/api/curves", params={"metric": "loss"})
    assert no_experiment.status_code == 400
    assert all(n in no_experiment.json()["error"] for n in ("experiment=", "demo", "other"))
    unknown = app.get("/api/curves", params={"experiment": "demo", "metric": "los"})
    assert unknown.status_code == 404 and "arms" not in unknown.json()
    error = unknown.json()["error"]
    assert "no metric 'los'" in error and "metric=" in error and "loss" in error
    no_metric = app.get("/api/curves", params={"experiment": "demo"})
    assert no_metric.status_code == 400 and "metric=" in no_metric.json()["error"]
    assert "loss" in no_metric.json()["error"]
    compare = app.get("/compare", params={"a": "demo"})
    assert compare.status_code == 400 and "query parameter b=" in compare.text
    points = app.get("/api/curves", params={"experiment": "demo", "metric": "loss",
                                            "points": "2"})
    assert points.status_code == 400 and set(points.json()) == {"error"}
    assert "points='2'" in points.json()["error"] and "3" in points.json()["error"]
    found = app.get("/api/curves", params={"experiment": "demo", "metric": "loss"})
    assert found.status_code == 200 and set(found.json()["arms"]) == {"base", "better"}
