"""The "why" section of `labcoat report --html` and the dashboard: it shows what
`labcoat inside` saved (analysis._why), says so when nothing was, and survives a bad file.
No torch here: the saved sections are written in the shapes `InsideResult.as_dict()` and
`InfluenceResult.as_dict()` produce (tests/inside/test_influence_tinylm.py renders a real
one)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from helpers import XSS, cli, stored_experiment, use_home

DESIGN = """name: why
hypothesis: {claim: warmup helps, metric: exact_match, source: items, direction: increase}
command: "python train.py --seed {seed} --warmup {warmup}"
params: {warmup: 0}
arms:
  base: {control: true}
  warm: {params: {warmup: 100}}
seeds: 2
"""


def _share(estimate: float, low: float, high: float) -> dict:
    return {"estimate": estimate, "low": low, "high": high, "p_value": 0.01, "ci": 0.95}


PATCHING = {"experiment": "why", "pairs": [], "items": 40, "notes": [f"note {XSS}"],
            "patching": {
                "metric": "answer log probability", "seeds": 2, "items": 40,
                "control": -3.0, "variant": -2.0,
                "difference": {"estimate": 1.0, "low": 0.8, "high": 1.2, "p_value": 0.001,
                               "ci": 0.95, "method": "two-way bootstrap"},
                "agreement_spearman": 0.93, "correction": "holm", "family_size": 3,
                "notes": [],
                # listed out of rank order: the section sorts by rank
                "components": [
                    {"name": "blocks.0.mlp", "kind": "output", "group": "blocks.0",
                     "leaf": True, "attribution": 0.1, "forward": _share(0.12, -0.05, 0.29),
                     "reverse": _share(0.1, -0.1, 0.3), "carries": False, "rank": 2},
                    {"name": f"blocks.1.attn.head2{XSS}", "kind": "head",
                     "group": "blocks.1.attn", "leaf": True, "attribution": 0.7,
                     "forward": _share(0.81, 0.64, 0.97), "reverse": _share(0.78, 0.6, 0.95),
                     "carries": True, "rank": 1},
                    {"name": "blocks.0", "kind": "update", "group": "", "leaf": False,
                     "attribution": 0.05, "forward": None, "reverse": None,
                     "carries": False, "rank": 3}]}}


def _example(index: int, score: float, text: str) -> dict:
    return {"index": index, "score": score, "text": text}


INFLUENCE = {"format": "labcoat.inside.influence", "version": 1, "experiment": "why",
             "control": "base", "variant": "warm", "methods": ["tracin"], "flipped": 7,
             "notes": [], "trials": [{
                 "trial": "warm-s0", "arm": "warm", "seed": 0, "role": "variant",
                 "checkpoints": [100, 200], "pool": 500, "training_size": 19200,
                 "items": [{"item": "sort/0003", "task": "sort", "control": 0.0,
                            "variant": 1.0,
                            "proponents": {"tracin": [_example(812, 0.42, "sort: 3 1 -> 1 3")]},
                            "opponents": {"tracin": [_example(77, -0.3, f"copy: {XSS}")]}}],
                 "flagged": [_example(4242, 9.5, "agree: the cats -> is")],
                 "self_influence_median": 0.8}]}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = use_home(monkeypatch, tmp_path / "home")
    stored_experiment("why", DESIGN, [
        {"key": f"{arm}-s{seed}", "arm": arm, "seed": seed,
         "items": {"sort": {f"sort/{i:04d}": float((i + seed) % 3 == 0 or arm == "warm")
                            for i in range(10)}}}
        for arm in ("base", "warm") for seed in range(2)])
    return home


def _report(home: Path) -> str:
    out = home / "why.html"
    cli("report", "why", "--html", str(out), check=True)
    return out.read_text(encoding="utf-8")


def _section(html: str) -> str:
    return re.search(r"<section id='why'>(.*?)</section>", html, re.S).group(1)


def test_not_computed_says_how(home: Path) -> None:
    section = _section(_report(home))
    assert "not computed" in section and "labcoat inside why --control" in section


def test_saved_results_are_shown_ranked_with_intervals(home: Path) -> None:
    from labcoat.analysis import load_why, save_why

    path = save_why("why", "patching", PATCHING, control="base", variant="warm")
    save_why("why", "influence", INFLUENCE, control="base", variant="warm")
    assert path == home / "runs" / "why" / "inside.json"
    why = load_why("why")
    assert [c.rank for c in why.components()] == [1, 2, 3]
    section = _section(_report(home))
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert XSS not in section and section.count(escaped) == 3  # component, note, example
    table = section[section.index("<table>"):]
    first, second = table.index(f"head2{escaped}"), table.index("blocks.0.mlp")
    assert first < second  # rank 1 first
    assert "[0.64, 0.97]" in table and "[-0.05, 0.29]" in table
    assert table.count("carries it") == 1
    assert "Spearman 0.93" in section and "holm" in section
    # the unverified group is plotted by its attribution, not given an interval
    assert "attribution (not verified)" in section
    assert "sort/0003" in section and "sort: 3 1 -&gt; 1 3" in section
    assert "#4242" in section and "9.5" in section
    assert "500 of 19200 training examples" in section


def test_a_bad_file_is_a_note_not_a_crash(home: Path) -> None:
    from labcoat.analysis import why_path

    path = why_path("why")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json", encoding="utf-8")
    section = _section(_report(home))
    assert "not a readable labcoat inside results file" in section
    path.write_text('{"format": "labcoat.inside", "version": 99}', encoding="utf-8")
    assert "version 99" in _section(_report(home))


def test_dashboard_shows_the_section_and_notices_new_results(home: Path) -> None:
    from labcoat.analysis import save_why
    from labcoat.web import UIConfig, create_app

    app = TestClient(create_app(UIConfig()), base_url="http://127.0.0.1:8000")
    before = app.get("/experiments/why").text
    assert "not computed" in _section(before)
    save_why("why", "influence", INFLUENCE, control="base", variant="warm")
    after = _section(app.get("/experiments/why").text)  # the cached page is not served
    assert "sort/0003" in after and "no patching saved yet" in after
