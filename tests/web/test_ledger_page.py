"""The dashboard's ledger page (issue 33): the store's predictions scored, with a
reliability diagram drawn by plotly, the same numbers as `labcoat ledger --json`."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from helpers import XSS, cli, plotly_figures, stored_experiment, use_home

from .conftest import DESIGN  # noqa: TID252


def _predicted(name: str, prior: float, better: float, author: str, **more: float) -> None:
    """Two arms, three seeds; `better` scores higher on every item when better > 0.3."""
    trials = [{"key": f"{arm}-s{seed}", "arm": arm, "seed": seed, "params": {"quality": q},
               "items": {"t": {f"i{i}": float((i * 7 + seed) % 10 < 10 * q)
                               for i in range(40)}}}
              for arm, q in (("base", 0.3), ("better", better)) for seed in range(3)]
    plan = {"hash": "0" * 64, "frozen_at": "2026-01-01T00:00:00", "amendments": [],
            "plan": {"predictions": {"H1": {"supported": prior, "author": author, **more}}},
            "original_predictions": {"H1": {"supported": prior, "author": author, **more}}}
    stored_experiment(name, DESIGN.replace("name: demo", f"name: {name}"), trials, plan)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    from labcoat.web import UIConfig, create_app

    use_home(monkeypatch, tmp_path / "home")
    _predicted("wins", 0.8, 0.8, XSS)
    _predicted("loses", 0.7, 0.3, "bo", refuted=0.2)
    return TestClient(create_app(UIConfig()), base_url="http://127.0.0.1:8000")


def test_ledger_page_scores_the_store(app: TestClient) -> None:
    data = app.get("/api/ledger").json()
    got = {e["experiment"]: e for e in data["entries"]}
    assert got["wins"]["outcome"] == "supported"
    assert got["loses"]["outcome"] == "not supported"
    assert got["loses"]["surprise"] == pytest.approx(-math.log2(0.3))
    everyone = data["scores"][0]
    assert everyone["brier"]["brier"] == pytest.approx(((0.8 - 1) ** 2 + 0.7 ** 2) / 2)
    # "loses" also stated refuted 0.2 (so other 0.1); its verdict is inconclusive: "other"
    assert got["loses"]["three"] == pytest.approx([0.7, 0.2, 0.1])
    assert everyone["brier3"] == pytest.approx(0.7 ** 2 + 0.2 ** 2 + 0.9 ** 2)
    page = app.get("/ledger")
    assert page.status_code == 200
    assert XSS not in page.text  # the author's name arrives escaped
    figures = plotly_figures(page.text)
    assert figures and figures[0][1]["yaxis"]["title"]["text"] == "observed frequency"
    assert "/ledger" in app.get("/").text


@pytest.mark.needs("ui")
def test_ledger_html_draws_its_reliability_diagram_offline(app: TestClient,
                                                          tmp_path: Path) -> None:
    """`labcoat ledger --html`: plotly draws the diagram in Debian's chromium with no
    network, and no script in an author's name runs."""
    from .test_browser import CHROMIUM  # noqa: TID252

    if CHROMIUM is None:
        pytest.fail("chromium is required for the browser tests (see tests/web/test_browser.py)")
    from playwright.sync_api import sync_playwright

    out = tmp_path / "ledger.html"
    cli("ledger", "--html", str(out), check=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:")
                   else r.abort())
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(out.as_uri())
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        assert page.locator(".js-plotly-plot").count() >= 1
        assert XSS in page.inner_text("body") and dialogs == []
        browser.close()
