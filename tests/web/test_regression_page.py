"""The dashboard's regression pages (issue 35 point 2): /regression lists the suites in
$LABCOAT_HOME/suites, /regression/NAME shows one suite's history with its plot, and the
JSON is the file's own history; names are escaped, unknown suites are one 404 message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from helpers import XSS, shared_home, use_home


def _outcomes(model: str, step: int, passed: dict[str, list[int]]) -> list:
    from labcoat import evals

    return [evals.Outcome(task="t", item=item, score=float(x), model=model, sample=f"s{s}",
                          seed=s, step=step)
            for item, seeds in passed.items() for s, x in enumerate(seeds)]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A suite of 12 items scored at three checkpoints; the third breaks items 0-5."""
    from labcoat import evals

    root = tmp_path_factory.mktemp("regression-ui")
    with shared_home(root / "home") as home:
        texts = {("t", f"i{i}"): evals.EvalItem(task="t", id=f"i{i}",
                                                input=f"question number {i} about {i * 7} "
                                                      f"things", target=str(i))
                 for i in range(12)}
        suite = evals.RegressionSuite(name="ui")
        evals.harvest(_outcomes("m@0", 0, {f"i{i}": [0, 1] for i in range(12)}), texts, suite)
        for step, broken in ((100, set()), (200, set()), (300, set(range(6)))):
            scores = {f"i{i}": [0, 0] if i in broken else [1, 1] for i in range(12)}
            label = XSS if step == 300 else f"ckpt {step}"
            evals.record_entry(suite, evals.score_entry(
                suite, _outcomes(f"m@{step}", step, scores), label=label))
        evals.save_regression_suite(suite, "ui")
        (evals.suites_dir() / "notes.json").write_text('{"not": "a suite"}')
    yield home


@pytest.fixture
def app(home: Path, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    from labcoat.web import UIConfig, create_app

    use_home(monkeypatch, home)
    return TestClient(create_app(UIConfig()), base_url="http://127.0.0.1:8000")


def test_regression_api_is_the_suite_file(app: TestClient, home: Path) -> None:
    from labcoat import evals

    rows = app.get("/api/regression").json()
    assert [r["name"] for r in rows] == ["ui"]  # notes.json is not a suite
    assert rows[0]["entries"] == 3 and rows[0]["decision"] == "regressed"
    data = app.get("/api/regression/ui").json()
    suite = evals.load_regression_suite(home / "suites" / "ui.json")
    assert data["history"] == suite.history and data["items"] == 12
    assert data["history"][2]["versus"]["regressed_items"] == [["t", f"i{i}"] for i in range(6)]


def test_regression_page_shows_the_history_escaped(app: TestClient) -> None:
    listing = app.get("/regression")
    assert listing.status_code == 200 and "/regression/ui" in listing.text
    page = app.get("/regression/ui")
    assert page.status_code == 200
    assert "ckpt 100" in page.text and "regressed" in page.text and "history-plot" in page.text
    assert XSS not in page.text and "&lt;script&gt;" in page.text


def test_unknown_suite_is_one_message(app: TestClient) -> None:
    response = app.get("/api/regression/nope")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error.startswith("no regression suite 'nope' in ") and error.endswith(
        "(suites: ui); see /regression")
    page = app.get("/regression/notes")  # a .json file there that is not a suite
    assert page.status_code == 404 and "suites: ui" in page.text


@pytest.mark.needs("ui")
def test_regression_page_draws_in_a_browser(app: TestClient, home: Path) -> None:
    """plotly draws the history in Debian's chromium, and the label script never runs."""
    from .test_browser import CHROMIUM  # noqa: TID252

    if CHROMIUM is None:
        pytest.skip("chromium is not installed (see tests/web/test_browser.py)")
    from playwright.sync_api import sync_playwright

    page_html = app.get("/regression/ui").text
    plotly = app.get("/static/plotly.min.js").text
    out = home.parent / "page.html"
    out.write_text(page_html.replace("<script src='/static/plotly.min.js'></script>",
                                     f"<script>{plotly}</script>"), encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:")
                   else r.abort())
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(out.as_uri())
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        assert page.locator("#history tr").count() == 4
        assert XSS in page.inner_text("#history") and dialogs == []
        browser.close()
