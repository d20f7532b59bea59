"""The dashboard's routes. Every one is a GET that reads the store (only `store` speaks
SQL); pages are built by report (the experiment's report, figures) and web._pages."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.orm import Session

from labcoat import analysis, report, store
from labcoat.errors import LabcoatError
from labcoat.journal import PHASE_POINTS
from labcoat.runner import ingest_adhoc_runs
from labcoat.store import Experiment, Trial
from labcoat.web import _pages, _regression_page
from labcoat.web._cache import PageCache
from labcoat.web._config import UIConfig
from labcoat.web._security import AccessControl


class NotFound(LabcoatError):
    """An experiment, trial or metric the store does not have (HTTP 404)."""


class BadRequest(LabcoatError):
    """A query parameter missing or malformed (HTTP 400); the message names it and the
    valid choices."""


def create_app(config: UIConfig | None = None) -> FastAPI:
    """The app over the store at config.database (default: LABCOAT_DB / LABCOAT_HOME)."""
    config = config or UIConfig()
    db = store.open_store(config.database)
    pages = PageCache()
    app = FastAPI(title="labcoat", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(AccessControl, config=config)
    app.state.store = db
    app.state.config = config

    def analyzed(s: Session, exp: Experiment) -> analysis.Analysis:
        return pages.get("analysis", exp, lambda: analysis.analyze(s, exp))

    def live(exp: Experiment) -> int | None:
        """Reload while any trial is pending or running: the page's own queries may see a
        trial start after `exp.trials` was read (SQLite reads are not one snapshot)."""
        return config.refresh if any(t.status in ("pending", "running") for t in exp.trials) \
            else None

    @app.exception_handler(LabcoatError)
    async def not_found(request: Request, e: LabcoatError) -> Response:
        status = 404 if isinstance(e, NotFound) or "no experiment named" in str(e) else 400
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": str(e)}, status_code=status)
        return HTMLResponse(_pages.error_page(status, str(e)), status_code=status)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, e: RequestValidationError) -> Response:
        """FastAPI's own checks (a number out of range, not a number): one message in the
        app's shape, not FastAPI's raw JSON."""
        return await not_found(request, BadRequest(_validation_message(request, e)))

    @app.get("/", response_class=HTMLResponse)
    def experiments() -> str:
        ingest_adhoc_runs(db)  # scripts that finished since: the SDK never writes the store
        with db.session() as s:
            return _pages.experiments_page(_experiment_rows(s, analyzed))

    @app.get("/experiments/{name:path}", response_class=HTMLResponse)
    def experiment(name: str) -> str:
        with db.session() as s:
            exp = _find(s, name)
            refresh = live(exp)

            def build() -> str:
                # curves (SQLite, which releases the GIL) beside the analysis (numpy)
                with ThreadPoolExecutor(max_workers=1) as pool:
                    curves = pool.submit(_curves_apart, db, exp.name)
                    a = analyzed(s, exp)
                    page = analysis.report_page(s, exp, analysis=a, curves=curves.result())
                return report.render_html(
                    page, plotly_src=_pages.PLOTLY_SRC, refresh=refresh, back_href="/",
                    trial_href=lambda key: _pages.trial_href(exp.name, key))

            return pages.get("page", exp, build)

    @app.get("/ledger", response_class=HTMLResponse)
    def ledger() -> str:
        """Every prediction in the store, its outcome, the forecasters' scores."""
        with db.session() as s:
            return report.ledger_html(analysis.ledger(s), plotly_src=_pages.PLOTLY_SRC,
                                      back_href="/")

    @app.get("/api/ledger")
    def api_ledger() -> dict[str, Any]:
        with db.session() as s:
            return analysis.ledger_dict(analysis.ledger(s))

    @app.get("/regression", response_class=HTMLResponse)
    def regression_suites() -> str:
        """Regression suites (`labcoat evals harvest`) and their last verdicts."""
        directory = _suites_dir(config)
        return _regression_page.list_page(_regression_page.suite_rows(directory), directory)

    @app.get("/regression/{name}", response_class=HTMLResponse)
    def regression_suite(name: str) -> str:
        return _regression_page.suite_page(_suite_data(config, name))

    @app.get("/api/regression")
    def api_regression_suites() -> list[dict[str, Any]]:
        return _regression_page.suite_rows(_suites_dir(config))

    @app.get("/api/regression/{name}")
    def api_regression_suite(name: str) -> dict[str, Any]:
        return _suite_data(config, name)

    @app.get("/trial", response_class=HTMLResponse)
    def trial(experiment: str | None = None, key: str | None = None) -> str:
        with db.session() as s:
            exp = _find(s, _required(s, "/trial", "experiment", experiment))
            t = _trial(exp, _required_key("/trial", exp, key))
            data = analysis.trial_data(s, t)
            curves = analysis.trial_curves(s, t)
            plots = [report.figure_html(report.trial_curve_plot(metric, c), f"fig{i}")
                     for i, (metric, c) in enumerate(curves.items())
                     if not metric.startswith(PHASE_POINTS)]  # drawn stacked, below
            phases = analysis.step_phases(s, exp, trials=[t])
            phase_plot = report.figure_html(report.phase_plot(
                phases["trials"][0], phases["phases"]), "figphases") if phases else ""
            refresh = config.refresh if t.status == "running" else None
            return _pages.trial_page(exp.name, data, plots, data["checkpoints"], data["logs"],
                                     refresh, phase_plot=phase_plot)

    @app.get("/compare", response_class=HTMLResponse)
    def compare(a: str | None = None, b: str | None = None) -> str:
        with db.session() as s:
            exps = [_find(s, _required(s, "/compare", "a", a)),
                    _find(s, _required(s, "/compare", "b", b))]
            sides = [_side(exp, analyzed(s, exp)) for exp in exps]
            names = [store.metric_names(s, [t.id for t in exp.trials]) for exp in exps]
            plots = []
            for i, metric in enumerate(m for m in names[0] if m in names[1]):
                curves = [pages.get(f"curves:{metric}", exp,
                                    lambda e=exp, m=metric: analysis.arm_curves(s, e, m))
                          for exp in exps]
                plots.append(report.figure_html(report.overlay_plot(
                    metric, [(e.name, c) for e, c in zip(exps, curves, strict=True)]),
                    f"cmp{i}"))
            return _pages.compare_page(sides, plots)

    @app.get("/static/plotly.min.js")
    def plotly_bundle() -> Response:
        return Response(_plotly_js(), media_type="application/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})

    # --- JSON ---------------------------------------------------------------------------

    @app.get("/api/experiments")
    def api_experiments() -> list[dict[str, Any]]:
        ingest_adhoc_runs(db)
        with db.session() as s:
            return _experiment_rows(s, analyzed)

    @app.get("/api/experiments/{name:path}")
    def api_experiment(name: str) -> dict[str, Any]:
        with db.session() as s:
            exp = _find(s, name)
            return {"experiment": analysis.experiment_summary(exp),
                    "report": report.analysis_dict(analyzed(s, exp))}

    @app.get("/api/curves")
    def api_curves(experiment: str | None = None, metric: str | None = None,
                   points: int = Query(200, ge=3, le=100_000)) -> dict[str, Any]:
        with db.session() as s:
            exp = _find(s, _required(s, "/api/curves", "experiment", experiment))
            metric = _metric(s, exp, metric)
            return {"metric": metric, "points": points,
                    "arms": analysis.arm_curves(s, exp, metric, points=points)}

    @app.get("/api/trial")
    def api_trial(experiment: str | None = None, key: str | None = None,
                  points: int = Query(1000, ge=3, le=1_000_000)) -> dict[str, Any]:
        with db.session() as s:
            exp = _find(s, _required(s, "/api/trial", "experiment", experiment))
            t = _trial(exp, _required_key("/api/trial", exp, key))
            return {**analysis.trial_data(s, t),
                    "curves": analysis.trial_curves(s, t, points=points)}

    return app


def _curves_apart(db: store.Store, name: str) -> dict[str, Any]:
    """report_page's curves in a session of their own (sessions are not shared by threads)."""
    with db.session() as s:
        return analysis.page_curves(s, store.find_experiment(s, name))


def _suites_dir(config: UIConfig) -> Path:
    from labcoat import evals

    return Path(config.suites) if config.suites else evals.suites_dir()


def _suite_data(config: UIConfig, name: str) -> dict[str, Any]:
    """A suite of the suites directory by name (never a path: the URL names no file)."""
    from labcoat import evals

    directory = _suites_dir(config)
    found = {p.stem: p for p in evals.list_suites(directory)}
    if name not in found:
        raise NotFound(f"no regression suite {name!r} in {directory} (suites: "
                       f"{_choices(sorted(found))}); see /regression")
    return _regression_page.suite_data(evals.load_regression_suite(found[name]))


def _find(s: Session, name: str) -> Experiment:
    return store.find_experiment(s, name)


def _choices(names: list[str], limit: int = 10) -> str:
    shown = ", ".join(names[:limit]) or "none yet"
    return shown + (f" (and {len(names) - limit} more)" if len(names) > limit else "")


def _required(s: Session, path: str, name: str, value: str | None) -> str:
    """An experiment-name parameter, or one message naming it and the experiments."""
    if value:
        return value
    names = [e.name for e in store.list_experiments(s)]
    example = f" e.g. {path}?{name}={names[0]}" if names else ""
    raise BadRequest(f"{path} needs the query parameter {name}=, an experiment's name: "
                     f"{_choices(names)};{example}")


def _required_key(path: str, exp: Experiment, key: str | None) -> str:
    if key:
        return key
    keys = [t.key for t in exp.trials]
    example = f" e.g. {path}?experiment={exp.name}&key={keys[0]}" if keys else ""
    raise BadRequest(f"{path} needs the query parameter key=, a trial of experiment "
                     f"{exp.name!r}: {_choices(keys)};{example}")


def _metric(s: Session, exp: Experiment, metric: str | None) -> str:
    """A metric the experiment logged, or one message naming the parameter and them."""
    names = store.metric_names(s, [t.id for t in exp.trials])
    if metric and metric in names:
        return metric
    choices = f"its metrics: {_choices(names, 30)}" if names else "it has logged no metric yet"
    if not metric:
        raise BadRequest(f"/api/curves needs the query parameter metric=, a metric experiment "
                         f"{exp.name!r} logged; {choices}")
    raise NotFound(f"experiment {exp.name!r} has no metric {metric!r} (query parameter "
                   f"metric=); {choices}")


def _validation_message(request: Request, e: RequestValidationError) -> str:
    """FastAPI's errors as one line: "query parameter points='2': Input should be greater
    than or equal to 3"."""
    parts = []
    for error in e.errors():
        loc = [str(x) for x in error.get("loc", ())]
        where = f"{loc[0]} parameter {'.'.join(loc[1:])}" if len(loc) > 1 else ".".join(loc)
        value = request.query_params.get(loc[-1]) if loc and loc[0] == "query" else None
        shown = f"={value!r}" if value is not None else "="
        parts.append(f"{where}{shown}: {error.get('msg', 'invalid')}")
    return f"{request.url.path}: " + "; ".join(parts)


def _trial(exp: Experiment, key: str) -> Trial:
    try:
        return store.find_trial(exp, key)
    except store.TrialNotFound as e:
        raise NotFound(str(e)) from None


def _verdicts(a: analysis.Analysis) -> list[dict[str, str]]:
    return [{"hypothesis": r.hypothesis.id or "H1", "variant": c.variant, "control": c.control,
             "verdict": c.verdict} for r in a.results for c in r.comparisons]


def _experiment_rows(s: Session, analyzed: Any) -> list[dict[str, Any]]:
    return [{**analysis.experiment_summary(e), "verdicts": _verdicts(analyzed(s, e))}
            for e in store.list_experiments(s)]


def _side(exp: Experiment, a: analysis.Analysis) -> dict[str, Any]:
    first = a.results[0] if a.results else None
    arms = []
    for arm in first.arms if first else []:
        i = arm.overall
        text = "-" if i is None else (f"{i.point:.3f} (1 seed)" if not math.isfinite(i.low)
                                      else f"{i.point:.3f} [{i.low:.3f}, {i.high:.3f}]")
        arms.append((arm.arm, text))
    return {"name": exp.name, "status": a.status, "verdicts": _verdicts(a), "arms": arms,
            "metric": first.hypothesis.metric if first else "-"}


@cache
def _plotly_js() -> str:
    return report.plotly_js()
