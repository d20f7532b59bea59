"""A bounded metric's intervals stay inside its range in every plot: the HTML report's and
the dashboard's figures are checked on the Plotly JSON they draw (issue 22, point 5: "seed
CIs outside a bounded metric's range ([0.192, 1.326] for an accuracy) in the report and
plots")."""

import json
import random

import pytest
from fastapi.testclient import TestClient

from helpers import cli, plotly_figures, stored_experiment
from labcoat.web import create_app

SCALAR = """name: acc
hypothesis: {claim: c, metric: accuracy, direction: increase, bounds: [0, 1]}
command: "python train.py --seed {seed} --q {q}"
params: {q: 0}
arms:
  base: {control: true}
  hot: {params: {q: 1}}
seeds: 3
"""
ITEMS = SCALAR.replace("name: acc", "name: items").replace(
    "metric: accuracy, direction: increase, bounds: [0, 1]",
    "metric: exact_match, source: items, direction: increase")  # [0, 1] from the scores
# per task (base, hot) rates: a task each way and a ceiling, so the tasks disagree (I^2 99%)
RATES = {"up": (0.1, 0.95), "down": (0.9, 0.1), "ceiling": (0.5, 0.99)}


def _scalar_trials():
    # unbounded t CIs: base [-0.30, 1.37], hot [0.24, 1.44] (3 seeds, one far off)
    values = {"base": [0.2, 0.9, 0.5], "hot": [0.55, 0.99, 0.97]}
    return [{"key": f"{arm}-s{i}", "arm": arm, "seed": i,
             "metrics": {"accuracy": [(1, v / 2), (2, v)]}}
            for arm, vs in values.items() for i, v in enumerate(vs)]


def _item_trials():
    rng = random.Random(0)
    trials = []
    for arm in ("base", "hot"):
        for seed in range(3):
            items = {}
            for task, rates in RATES.items():
                p = min(1.0, max(0.0, rates[arm == "hot"] + rng.uniform(-0.4, 0.4)))
                items[task] = {f"{task}{i}": float(rng.random() < p) for i in range(8)}
            trials.append({"key": f"{arm}-s{seed}", "arm": arm, "seed": seed, "items": items,
                           "metrics": {"exact_match": [(1, 0.5), (2, 0.6)]}})
    return trials


def _ends(values: list, bar: dict | None, sign: int) -> list[float]:
    if not bar or not bar.get("array"):
        return []
    key = "array" if sign > 0 or bar.get("symmetric", True) else "arrayminus"
    return [v + sign * d for v, d in zip(values, bar[key], strict=True)
            if v is not None and d is not None]


def drawn_intervals(html: str) -> dict[str, list[float]]:
    """Every interval end drawn, by figure title: error bars' ends, and the y of filled
    bands (the curves' seed ranges)."""
    out: dict[str, list[float]] = {}
    for traces, layout in plotly_figures(html):
        title = layout.get("title", {}).get("text", "")
        ends = out.setdefault(title, [])
        for t in traces:
            for axis in ("x", "y"):
                values = [v for v in t.get(axis, []) if isinstance(v, int | float)]
                if len(values) != len(t.get(axis, [])):
                    continue  # a category axis (arm, task names)
                bar = t.get(f"error_{axis}")
                ends += _ends(values, bar, +1) + _ends(values, bar, -1)
            if t.get("fill") == "toself":
                ends += [v for v in t["y"] if v is not None]
    return out


def _check(html: str, metric: str, expected_titles: int) -> None:
    drawn = drawn_intervals(html)
    assert len([t for t, ends in drawn.items() if ends]) >= expected_titles, list(drawn)
    for title, ends in drawn.items():
        if "difference" in title:  # variant - control of a [0, 1] metric: within [-1, 1]
            assert all(-1 - 1e-9 <= e <= 1 + 1e-9 for e in ends), (title, min(ends), max(ends))
        elif metric in title:
            assert all(-1e-9 <= e <= 1 + 1e-9 for e in ends), (title, min(ends), max(ends))


@pytest.mark.parametrize("name, design, trials, metric, plots", [
    ("acc", SCALAR, _scalar_trials, "accuracy", 2),      # per arm, curves
    ("items", ITEMS, _item_trials, "exact_match", 4),    # + aggregates, forest
])
def test_report_and_dashboard_plots_stay_in_bounds(home, name, design, trials, metric, plots):
    stored_experiment(name, design, trials())
    report = json.loads(cli("report", name, "--json", check=True).stdout)["results"][0]
    intervals = [i for a in report["arms"] for i in (a["overall"], *a["per_task"].values())]
    assert {0.0, 1.0} <= {e for i in intervals for e in (i["low"], i["high"])}  # some are cut
    if name == "items":  # the pooled effect over tasks, cut to [-1, 1] like the rest
        pooled = report["comparisons"][0]["generalization"]["pooled"]
        assert pooled["low"] == -1 and pooled["high"] == 1, pooled
        text = cli("report", name, check=True).stdout
        assert "95% CI [-1, +1]" in " ".join(text.split())
    out = home / "report.html"
    cli("report", name, "--html", str(out), check=True)
    _check(out.read_text(encoding="utf-8"), metric, plots)
    page = TestClient(create_app(), base_url="http://127.0.0.1").get(f"/experiments/{name}")
    assert page.status_code == 200
    _check(page.text, metric, plots)


def test_per_arm_plot_names_its_axis_and_shows_every_seed_on_top(home):
    """Point 8's per-arm plot: a y-axis title, and the seed dots drawn after (over) the
    mean's error bar of their arm, each seed's value once."""
    stored_experiment("acc", SCALAR, _scalar_trials())
    out = home / "report.html"
    cli("report", "acc", "--html", str(out), check=True)
    traces, layout = next(f for f in plotly_figures(out.read_text(encoding="utf-8"))
                          if "per arm" in f[1]["title"]["text"])
    assert layout["yaxis"]["title"]["text"] == "accuracy"
    for arm, values in (("base", [0.2, 0.9, 0.5]), ("hot", [0.55, 0.99, 0.97])):
        mean = next(i for i, t in enumerate(traces) if t["name"] == arm)
        seeds = next(i for i, t in enumerate(traces) if t["name"] == f"{arm} seeds")
        assert seeds > mean and traces[seeds]["y"] == values
