"""Server time of the dashboard on a large experiment: 100 trials x 10,000 points per
metric (2 metrics: 2 million points), against a naive page built in the same run.

    python benchmarks/ui.py [TRIALS] [POINTS] [--quick]

labcoat: the experiment page (analysis, bucketed curves in SQL, Plotly figures) cold
(first request) and warm (cached until the data change), the curves API alone, and a
trial page (LTTB 10,000 -> 1,000 points per metric). Baseline: the same page without
downsampling - every point of every trial loaded (as `labcoat export` reads them) and
drawn as one trace per trial and metric. Requests go through the real app (FastAPI
TestClient: routing, middleware, response), so the times are server time.
"""

from __future__ import annotations

import os
import statistics
import time

import _harness as bench


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    """The median of `repeat` times, and the last result."""
    timing, out = bench.timed(fn, repeat)
    return timing.median, out


def naive_page(name: str) -> str:
    """Every point of every metric and trial into Plotly figures, no downsampling."""
    import plotly.graph_objects as go

    from labcoat import report, store
    from labcoat.report._html import figure_html

    db = store.open_store()
    with db.session() as session:
        exp = store.find_experiment(session, name)
        analysis = report.analyze(session, exp)
        ids = {t.id: t.key for t in exp.trials}
        figures = {}
        for p in store.metric_points(session, list(ids)):
            fig = figures.setdefault(p.name, {})
            xs, ys = fig.setdefault(p.trial_id, ([], []))
            xs.append(p.step)
            ys.append(p.value)
        html = [str(len(analysis.results))]
        for i, (metric, per_trial) in enumerate(figures.items()):
            fig = go.Figure([go.Scatter(x=x, y=y, name=ids[t], mode="lines")
                             for t, (x, y) in per_trial.items()])
            fig.update_layout(title=metric)
            html.append(figure_html(fig, f"n{i}"))
    db.close()
    return "".join(html)


def analysis_only(name: str) -> None:
    from labcoat import report, store

    db = store.open_store()
    with db.session() as session:
        report.analyze(session, store.find_experiment(session, name))
    db.close()


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("trials", type=int, nargs="?", default=100)
    parser.add_argument("points", type=int, nargs="?", default=10_000)
    args = bench.shrink(parser.parse_args(), trials=4, points=200)
    os.environ.pop("LABCOAT_DB", None)
    with bench.temp_home(prefix="labcoat-bench-ui-"):
        measure(args)


def measure(args) -> None:
    trials, points = args.trials, args.points
    from fastapi.testclient import TestClient
    from ui_data import METRICS, build

    from labcoat.web import UIConfig, create_app

    start = time.perf_counter()
    name = build(trials, points)
    print(f"data: {trials} trials x {points} points x {len(METRICS)} metrics "
          f"({trials * points * len(METRICS):,} points), built in "
          f"{time.perf_counter() - start:.1f} s")

    def cold() -> tuple[float, int]:  # a fresh app: nothing cached; the request is timed
        client = TestClient(create_app(UIConfig()), base_url="http://127.0.0.1")
        start = time.perf_counter()
        response = client.get(f"/experiments/{name}")
        assert response.status_code == 200
        return time.perf_counter() - start, len(response.content)

    runs = [cold() for _ in range(3)]
    t_cold, size = statistics.median(t for t, _ in runs), runs[0][1]
    t_analysis, _ = timed(lambda: analysis_only(name))
    client = TestClient(create_app(UIConfig()), base_url="http://127.0.0.1")
    client.get(f"/experiments/{name}")
    t_warm, _ = timed(lambda: client.get(f"/experiments/{name}").content, repeat=5)
    t_curves, _ = timed(lambda: client.get("/api/curves", params={
        "experiment": name, "metric": "loss"}).content)
    t_trial, trial_size = timed(lambda: len(client.get("/trial", params={
        "experiment": name, "key": "base-s0"}).content))
    t_naive, naive = timed(lambda: naive_page(name), repeat=1)
    print(f"experiment page, cold (analysis + curves + figures): {t_cold:6.3f} s "
          f"({size / 1e6:.2f} MB)")
    print(f"experiment page, warm (data unchanged):              {t_warm:6.3f} s")
    print(f"  of which the analysis (bootstrap CIs, as `report`): {t_analysis:6.3f} s")
    print(f"curves API, one metric (LTTB steps, index seeks):    {t_curves:6.3f} s")
    print(f"trial page (LTTB 10,000 -> 1,000 per metric):        {t_trial:6.3f} s "
          f"({trial_size / 1e6:.2f} MB)")
    print(f"baseline: naive page, every point drawn:             {t_naive:6.3f} s "
          f"({len(naive) / 1e6:.1f} MB)")
    print(f"ratio baseline/labcoat: cold {t_naive / t_cold:.1f}x, warm "
          f"{t_naive / t_warm:.0f}x; page size {len(naive) / size:.0f}x smaller")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} (2 cores)")
    bench.save(args, {"trials": trials, "points": points, "cold_s": t_cold, "warm_s": t_warm,
                      "analysis_s": t_analysis, "curves_s": t_curves, "trial_s": t_trial,
                      "naive_s": t_naive})


if __name__ == "__main__":
    main()
