"""Helpers shared by tests: run the real CLI, write small designs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # benchmarks/ import this module without pytest
    import pytest

FIXTURES = Path(__file__).parent / "fixtures"
FAKE_TRIAL = FIXTURES / "fake_trial.py"


def use_home(monkeypatch: pytest.MonkeyPatch, path: Path) -> Path:
    """Point LABCOAT_HOME at `path` (SQLite store inside it) and clear every variable that
    would send labcoat elsewhere (LABCOAT_DB) or make it act as a trial. Returns `path`."""
    monkeypatch.setenv("LABCOAT_HOME", str(path))
    monkeypatch.delenv("LABCOAT_DB", raising=False)
    for var in ("LABCOAT_JOURNAL", "LABCOAT_TRIAL", "LABCOAT_EXPERIMENT", "LABCOAT_ATTEMPT"):
        monkeypatch.delenv(var, raising=False)
    return path


@contextmanager
def shared_home(path: Path) -> Iterator[Path]:
    """LABCOAT_HOME = `path`, isolated as the `home` fixture does, while a module-scoped
    fixture builds the experiment its tests share (the environment is restored on exit).
    Those tests must only read the store: each gets LABCOAT_HOME back with `use_home`."""
    import pytest

    with pytest.MonkeyPatch.context() as monkeypatch:
        yield use_home(monkeypatch, path)


def cli(*args: str, cwd: Path | None = None, timeout: float = 300,
        check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run `labcoat ARGS` as a real process with the current environment: forked from a
    server with the heavy libraries imported (tests/cli_forks.py; ~1 s less per call), or
    a fresh `python -m labcoat.cli` with LABCOAT_TEST_FORK=0."""
    command = [sys.executable, "-m", "labcoat.cli", *args]
    if os.environ.get("LABCOAT_TEST_FORK", "1") == "0" or _own_startup():
        result = subprocess.run(command, cwd=cwd, env=dict(os.environ), capture_output=True,
                                text=True, timeout=timeout)
    else:
        result = _forked(command, list(args), cwd, timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"labcoat {' '.join(args)} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


_SERVER: list = []  # this test process's fork server, once started
_PYTHONPATH = os.environ.get("PYTHONPATH", "")  # the server's, fixed when it starts


def _own_startup() -> bool:
    """A PYTHONPATH of the test's own (a sitecustomize that hides torch or plotly, a
    module that shadows one) acts at interpreter start: that call needs a fresh one."""
    return os.environ.get("PYTHONPATH", "") != _PYTHONPATH


def _forked(command: list[str], args: list[str], cwd: Path | None,
            timeout: float) -> subprocess.CompletedProcess[str]:
    import tempfile

    from cli_forks import Server

    if not _SERVER or _SERVER[0].process.poll() is not None:
        _SERVER[:] = [Server()]
    with tempfile.TemporaryDirectory(prefix="labcoat-cli-") as scratch:
        reply = _SERVER[0].run(args, str(cwd or os.getcwd()), timeout, scratch)
    if reply.get("timeout"):
        raise subprocess.TimeoutExpired(command, timeout, reply["stdout"], reply["stderr"])
    return subprocess.CompletedProcess(command, reply["code"], reply["stdout"], reply["stderr"])


def show_now(name: str) -> dict | None:
    """What `labcoat show NAME --json` prints, read in this process (None before the
    experiment is registered): for tests that poll a running experiment, since a CLI call
    per poll (~0.5 s of CPU) competes with the trials for the machine."""
    from labcoat import report, store
    from labcoat.errors import LabcoatError

    db = store.open_store()
    try:
        with db.session() as session:
            try:
                exp = store.find_experiment(session, name)
            except LabcoatError:  # not registered yet
                return None
            return json.loads(json.dumps(report.status_data(session, exp), default=str))
    finally:
        db.close()


def fake_design(directory: Path, *, name: str = "fake", steps: int = 5, sleep: float = 0.0,
                extra: str = "", seeds: int = 2, parallelism: int = 2,
                variant_quality: float = 0.8) -> Path:
    """Write a design whose trials run tests/fixtures/fake_trial.py (no torch, fast)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "design.yaml"
    path.write_text(
        f"""name: {name}
hypothesis:
  claim: higher quality helps
  metric: exact_match
  source: items
  direction: increase
command: "{{python}} {FAKE_TRIAL} --steps {{steps}} --quality {{quality}} --seed {{seed}} \
  --sleep {sleep} {extra}"
params: {{steps: {steps}, quality: 0.3}}
arms:
  base: {{control: true}}
  better: {{params: {{quality: {variant_quality}}}}}
seeds: {seeds}
parallelism: {parallelism}
""",
        encoding="utf-8",
    )
    return path


XSS = "<script>alert(1)</script>"  # a name that must reach every page escaped


def stored_experiment(name: str, design_yaml: str, trials: list[dict],
                      analysis_plan: dict | None = None) -> None:
    """Write an experiment straight into the store at $LABCOAT_HOME, as ingestion would
    leave it, without running processes (fast, and names no design file allows).

    trials: {"key", "arm", "seed", "params", "status", "metrics": {name: [(step, value)]},
    "items": {task: {item: score}} (at the last step), "alerts": [(step, rule, severity,
    message)], "logs": [line], "command": [argv]}.
    analysis_plan: the frozen plan as registration stores it ({"hash", "frozen_at", "plan"}).
    """
    import time

    from labcoat import store

    db = store.open_store()
    with db.session() as session:
        exp = store.Experiment(name=name, design_yaml=design_yaml, design_hash="0" * 64,
                               analysis_plan=analysis_plan)
        session.add(exp)
        session.flush()
        for spec in trials:
            trial = store.Trial(key=spec["key"], arm=spec["arm"], seed=spec.get("seed", 0),
                                params=spec.get("params", {}), command=spec.get("command"),
                                status="pending", scale=spec.get("scale"))
            exp.trials.append(trial)
            session.flush()
            if spec.get("status", "done") == "pending":
                continue
            attempt = store.start_attempt(session, trial, run_dir="/nonexistent", host="test")
            last = 0
            rows = []
            for metric, points in spec.get("metrics", {}).items():
                rows += [{"trial_id": trial.id, "attempt_id": attempt.id, "name": metric,
                          "step": s, "value": v, "time": None} for s, v in points]
                last = max([last] + [s for s, _ in points])
            store.upsert_metric_points(session, rows)
            store.upsert_eval_items(session, [
                {"trial_id": trial.id, "attempt_id": attempt.id, "step": last, "task": task,
                 "item": item, "variant": "", "score": score}
                for task, scores in spec.get("items", {}).items()
                for item, score in scores.items()])
            store.insert_alerts(session, [
                {"trial_id": trial.id, "attempt_id": attempt.id, "seq": i, "step": step,
                 "rule": rule, "severity": severity, "message": message, "evidence": None,
                 "time": time.time()}
                for i, (step, rule, severity, message) in enumerate(spec.get("alerts", []))])
            store.insert_events(session, [
                {"trial_id": trial.id, "attempt_id": attempt.id, "stream": "stdout", "seq": i,
                 "level": "info", "kind": "log", "message": line, "time": time.time()}
                for i, line in enumerate(spec.get("logs", []))])
            attempt.last_step = last
            status = spec.get("status", "done")
            if status != "running":
                store.end_attempt(session, attempt, exit_code=0 if status == "done" else 1,
                                  cause="exit 0" if status == "done" else "exit 1",
                                  trial_status=status)
        session.commit()
    db.close()


def xss_experiment() -> str:
    """An experiment whose name, claim, arm, trial, task, metric, alert and log line are
    all XSS: the HTML report and the dashboard must show them as text."""
    design = f"""name: xss
hypothesis:
  claim: "{XSS}"
  metric: exact_match
  source: items
  direction: increase
command: "python train.py --seed {{seed}} --q {{q}}"
params: {{q: 0.3}}
arms:
  base: {{control: true}}
  better: {{params: {{q: 0.8}}}}
seeds: 2
"""
    trials = []
    for arm, quality in (("base", 0.3), ("better", 0.8)):
        for seed in range(3):
            trials.append({
                "key": f"{arm}-s{seed}-{XSS}", "arm": arm, "seed": seed,
                "params": {"q": quality, XSS: XSS}, "command": ["python", "train.py", XSS],
                "metrics": {"loss": [(s, 1.0 / s + 0.01 * seed) for s in range(1, 21)],
                            XSS: [(s, float(s)) for s in range(1, 21)]},
                "items": {task: {f"{task}-{i}": float((i * 7 + seed) % 10 < 10 * quality)
                                 for i in range(20)} for task in ("alpha", XSS)},
                "alerts": [(5, f"rule.{XSS}", "error", f"message {XSS}")],
                "logs": [f"printed {XSS}"]})
    trials.append({"key": XSS, "arm": XSS, "seed": 9, "status": "pending"})
    stored_experiment(XSS, design, trials)
    return XSS


def recorded_once(experiment: str) -> tuple[dict, dict, dict]:
    """(metric points, eval items, attempts per trial) of `experiment` in the store; fails if
    any point or item was recorded twice (restarted trials must not duplicate). Phase times
    (``phase_s/...``, wall-clock durations) are checked for that, not returned: no two runs
    share them."""
    from labcoat import store

    db = store.open_store()
    try:
        with db.session() as session:
            found = store.find_experiment(session, experiment)
            key = {t.id: t.key for t in found.trials}
            points = [((key[p.trial_id], p.name, p.step), p.value)
                      for p in store.metric_points(session, list(key))]
            items = [((key[i.trial_id], i.step, i.task, i.item), i.score)
                     for i in store.eval_items(session, list(key))]
            attempts = {t.key: len(t.attempts) for t in found.trials}
    finally:
        db.close()
    for rows in (points, items):
        assert len(rows) == len(dict(rows)), "a point was recorded twice"
    metrics = {key: value for key, value in points if not key[1].startswith("phase_s/")}
    return metrics, dict(items), attempts


def plotly_figures(html: str) -> list[tuple[list, dict]]:
    """(traces, layout) of every Plotly figure the page draws."""
    decoder = json.JSONDecoder()
    out = []
    for found in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', html):
        traces, end = decoder.raw_decode(html, found.end())
        layout, _ = decoder.raw_decode(html, end + len(re.match(r",\s*", html[end:])[0]))
        out.append((traces, layout))
    return out


def slow_data_design(name: str, steps: int, slow_from: int) -> str:
    """Two smallest tinylm trials, the second's data loading 15 ms slower from `slow_from`
    (tinylm's slow_data fault): what the slow-step alarm and the phase section read."""
    return f"""name: {name}
hypothesis: {{claim: slow data loading changes nothing, metric: exact_match, direction: increase}}
command: "{{python}} -m labcoat.workloads.tinylm --seed {{seed}} --width 16 --depth 1 --heads 2
  --batch-size 8 --eval-every 0 --eval-items 3 --tasks copy,reverse --threads 1
  --steps {steps} --no-guard --fault slow_data --fault-step {{slow_from}}"
params: {{slow_from: 100000}}
arms:
  base: {{control: true}}
  slow: {{params: {{slow_from: {slow_from}}}}}
seeds: 1
"""
