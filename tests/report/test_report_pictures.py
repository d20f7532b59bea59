"""The HTML report's pictures at a glance (issue 22, point 8): the verdict and its forest
plot first, the curves as small multiples (ten per-task curves in one grid, not ten
full-width plots), a constant such as `eval/items` stated instead of drawn, seed dots
beside their arm's error bar, and plotly.js in the page once, packed."""

import random

import pytest

from helpers import cli, plotly_figures, stored_experiment

TASKS = [f"task{k}" for k in range(10)]
DESIGN = """name: pics
hypothesis: {claim: c, metric: exact_match, source: items, direction: increase}
command: "python train.py --seed {seed} --q {q}"
params: {q: 0}
arms:
  base: {control: true}
  hot: {params: {q: 1}}
seeds: 3
"""


def _trials() -> list[dict]:
    rng = random.Random(1)
    trials = []
    for arm in ("base", "hot"):
        for seed in range(3):
            p = 0.4 if arm == "base" else 0.7
            metrics = {"eval/items": [(s, 80.0) for s in (1, 2, 3)],
                       "loss": [(s, 2.0 / s + rng.random() / 10) for s in (1, 2, 3)],
                       "exact_match": [(s, p * s / 3) for s in (1, 2, 3)]}
            metrics |= {f"exact_match/{t}": [(s, p * s / 3 + rng.random() / 10)
                                             for s in (1, 2, 3)] for t in TASKS}
            items = {t: {f"{t}-{i}": float(rng.random() < p) for i in range(8)}
                     for t in TASKS}
            trials.append({"key": f"{arm}-s{seed}", "arm": arm, "seed": seed,
                           "metrics": metrics, "items": items})
    return trials


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    home = tmp_path_factory.mktemp("pics")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABCOAT_HOME", str(home))
        mp.delenv("LABCOAT_DB", raising=False)
        stored_experiment("pics", DESIGN, _trials())
        out = home / "report.html"
        cli("report", "pics", "--html", str(out), check=True)
        return out.read_text(encoding="utf-8")


def test_plotly_is_in_the_page_once_and_packed(page: str) -> None:
    from plotly.offline import get_plotlyjs

    raw = len(get_plotlyjs())
    assert page.count("labcoat-plotly") == 2  # the packed bundle's element and its reader
    assert get_plotlyjs()[1000:1100] not in page  # not also inlined raw
    assert len(page.encode()) < 0.6 * raw, (len(page.encode()), raw)  # was 5 MB for 6 trials


def test_the_verdict_and_forest_plot_come_before_the_curves(page: str) -> None:
    verdicts, curves = page.index("id='verdicts'"), page.index("id='curves'")
    forest = page.index("difference per task")
    assert verdicts < forest < curves


def test_per_task_curves_are_one_grid_and_a_constant_is_stated(page: str) -> None:
    drawn = plotly_figures(page)
    grids = [(t, lay) for t, lay in drawn if "over steps" in lay["title"]["text"]]
    per_task = [lay for _, lay in grids if "per task" in lay["title"]["text"]]
    assert len(per_task) == 1
    panels = [a["text"] for a in per_task[0]["annotations"]]
    assert panels == TASKS
    main = next(lay for _, lay in grids if "per task" not in lay["title"]["text"])
    assert [a["text"] for a in main["annotations"]] == ["exact_match", "loss"]  # primary first
    assert sum(lay["height"] for _, lay in grids) < 1500  # was ten 380 px plots and more
    assert all("eval/items" not in lay["title"]["text"] for _, lay in drawn)
    assert "eval/items = 80" in page


def test_seed_dots_sit_beside_the_mean_not_behind_it(page: str) -> None:
    traces, _ = next(f for f in plotly_figures(page) if "per arm" in f[1]["title"]["text"])
    for arm in ("base", "hot"):
        mean = next(t for t in traces if t["name"] == arm)
        seeds = next(t for t in traces if t["name"] == f"{arm} seeds")
        assert len(set(seeds["x"])) == 3 and min(seeds["x"]) > mean["x"][0]
