"""End to end in a real browser: `labcoat ui` in a subprocess on a free port, Debian's
chromium driven by Playwright (executable_path; no `playwright install`). Screenshots
are kept in test-artifacts/ at the repository root.

Chromium missing is a failure, not a skip: CI installs it (.ci/run).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import XSS

pytestmark = pytest.mark.needs("ui")  # the dashboard and the HTML report's plots

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "")
                 if p and os.path.exists(p)), None)
INSTALL = ("Debian's chromium is required for the browser tests: apt-get update && "
           "apt-get install -y chromium (as root; .ci/run does it)")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if CHROMIUM is None:
        pytest.fail(f"chromium not found at /usr/bin/chromium or on PATH. {INSTALL}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[dev]' (no `playwright "
                    "install`: the tests use Debian's chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def server(ui_home: Path) -> Iterator[str]:
    """The real `labcoat ui` on a free port, until the module's tests are done."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "LABCOAT_HOME": str(ui_home)}
    proc = subprocess.Popen([sys.executable, "-m", "labcoat.cli", "ui", "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # a loaded machine starts slowly
    while True:
        try:
            with urllib.request.urlopen(url + "/api/experiments", timeout=10):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"labcoat ui did not start: {proc.stdout.read()}")
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_dashboard_opens_an_experiment_with_its_verdict_and_plots(browser, server) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(server + "/")
    assert page.locator("#experiments").is_visible()
    shot(page, "dashboard")
    page.click("#experiments a:text-is('demo')")
    page.wait_for_url("**/experiments/demo")
    verdict = page.locator("[data-verdict]").first
    assert verdict.get_attribute("data-verdict") == "supported"
    assert "better vs base: SUPPORTED" in " ".join(verdict.inner_text().split())
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    assert page.locator(".js-plotly-plot").count() >= 5  # arms, aggregates, forest, ...
    assert page.locator(".js-plotly-plot").first.locator("svg .point").count() > 0
    shot(page, "experiment")
    page.click("#trials a:text-is('base-s0')")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    assert "Trial base-s0" in page.inner_text("h1")
    shot(page, "trial")
    page.goto(server + "/compare?a=demo&b=other")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    shot(page, "compare")
    assert errors == []
    page.close()


def test_a_script_in_a_name_is_shown_as_text_never_run(browser, server) -> None:
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(server + "/")
    assert XSS in page.inner_text("#experiments")
    page.locator("#experiments a", has_text=XSS).click()
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    assert page.inner_text("h1") == f"Experiment {XSS}"
    assert XSS in page.inner_text("#hypotheses")  # the claim, as text
    shot(page, "xss-experiment")
    page.locator("#trials a", has_text=f"base-s0-{XSS}").click()
    page.wait_for_selector("#logs")
    assert f"printed {XSS}" in page.inner_text("#logs")
    assert dialogs == []
    page.close()


def test_the_html_report_renders_offline_and_prints(browser, ui_home: Path,
                                                    monkeypatch) -> None:
    from labcoat import report, store

    monkeypatch.setenv("LABCOAT_HOME", str(ui_home))
    out = ARTIFACTS / "report-demo.html"
    ARTIFACTS.mkdir(exist_ok=True)
    db = store.open_store()
    with db.session() as session:
        report.write_html_report(session, store.find_experiment(session, "demo"), out)
    db.close()
    context = browser.new_context()
    requests: list[str] = []

    def offline(route) -> None:  # no network: anything but the file itself fails
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            requests.append(route.request.url)
            route.abort()

    context.route("**/*", offline)
    page = context.new_page()
    page.goto(out.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    assert page.locator(".js-plotly-plot").count() >= 5 and requests == []
    assert page.locator("[data-verdict='supported']").count() == 1
    page.emulate_media(media="print")
    assert not page.locator("nav").is_visible()
    page.pdf(path=str(ARTIFACTS / "report-demo.pdf"))
    context.close()


def _overlaps(a: dict, b: dict) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


def _toolbar_clashes(page, name: str) -> tuple[int, list[str]]:
    """Hover each figure (Plotly shows its toolbar then) and compare the toolbar's box with
    the legend's: (figures with a legend checked, the titles of those where they overlap).
    A screenshot of each clash is kept in test-artifacts/."""
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    plots = page.locator(".js-plotly-plot")
    checked, clashes = 0, []
    for i in range(plots.count()):
        plot = plots.nth(i)
        plot.scroll_into_view_if_needed()
        plot.hover(position={"x": 5, "y": 5})
        toolbar = plot.locator(".modebar").first
        toolbar.wait_for(state="visible", timeout=10_000)
        if plot.locator("g.legend").count() == 0:
            continue
        checked += 1
        if _overlaps(toolbar.bounding_box(), plot.locator("g.legend").first.bounding_box()):
            ARTIFACTS.mkdir(exist_ok=True)
            plot.screenshot(path=str(ARTIFACTS / f"toolbar-over-legend-{name}-{i}.png"))
            clashes.append(plot.locator(".gtitle").first.text_content())
    return checked, clashes


@pytest.mark.parametrize("width", [1280, 760])
def test_the_toolbar_never_covers_a_legend(browser, server, ui_home: Path, width: int) -> None:
    """Plotly's toolbar, drawn on hover at a figure's top right, leaves every legend
    readable on the dashboard's pages and in the HTML report, wide or narrow (issue 30,
    point 1: it covered the curves' legend)."""
    from labcoat import report, store

    out = ARTIFACTS / "report-toolbar.html"
    ARTIFACTS.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABCOAT_HOME", str(ui_home))
        db = store.open_store()
        with db.session() as session:
            report.write_html_report(session, store.find_experiment(session, "demo"), out)
        db.close()
    page = browser.new_page(viewport={"width": width, "height": 900})
    found = {}
    for name, url in (("experiment", server + "/experiments/demo"),
                      ("trial", server + "/trial?experiment=demo&key=base-s0"),
                      ("compare", server + "/compare?a=demo&b=other"),
                      ("report", out.as_uri())):
        page.goto(url)
        found[name] = _toolbar_clashes(page, f"{name}-{width}")
    page.close()
    # legends were there to check (a trial's curves have one line each: no legend)
    assert all(found[name][0] for name in ("experiment", "compare", "report")), found
    assert {name: clashes for name, (_, clashes) in found.items() if clashes} == {}


def test_a_missing_parameter_is_said_on_the_page(browser, server) -> None:
    """/trial without key=: the page names the parameter and lists the trials (400)."""
    page = browser.new_page()
    response = page.goto(server + "/trial?experiment=demo")
    assert response.status == 400
    text = " ".join(page.inner_text("#error").split())
    assert "query parameter key=" in text and "base-s0, base-s1, base-s2" in text
    shot(page, "missing-key")
    page.close()
