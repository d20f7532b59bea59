"""Real `labcoat run` processes sharing one store: PostgreSQL end to end, concurrent
runners of different experiments, and a second runner of the same experiment refused.

Expected metric values come from re-deriving fake_trial.py's formula (its loss is
1/step plus a seeded uniform draw), not from the store.
"""

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from helpers import cli, fake_design
from labcoat import store
from labcoat.errors import LabcoatError

STEPS, SEEDS, TASKS, ITEMS = 6, 2, 2, 40


def _expected_losses(steps: int, seeds: int) -> dict[tuple[int, int], float]:
    """(seed, step) -> loss, as tests/fixtures/fake_trial.py computes it."""
    expected = {}
    for seed in range(seeds):
        rng = random.Random(f"{seed}-{steps}")
        for step in range(1, steps + 1):
            expected[seed, step] = 1.0 / step + rng.random() * 0.01
    return expected


def _check_export(name: str) -> None:
    """Through the CLI: every expected loss point is there once with the trial's value."""
    points = [json.loads(line) for line in cli("export", name, check=True).stdout.splitlines()]
    _check_losses([(p["trial"], p["name"], p["step"], p["arm"], p["seed"], p["value"])
                   for p in points])
    items = cli("export", name, "--items", check=True).stdout.splitlines()
    assert len(items) == 2 * SEEDS * TASKS * ITEMS
    assert len(set(items)) == len(items)


def _check_store(url: str, name: str, attempts: int | None = None, *, seeds: int) -> None:
    """The same check read in-process (cheaper than a CLI call per experiment); with
    `attempts`, every trial is done after exactly that many attempts."""
    db = store.open_store(url)
    try:
        with db.session() as session:
            trials = {t.id: t for t in store.find_experiment(session, name).trials}
            if attempts is not None:
                assert [(t.status, len(t.attempts)) for t in trials.values()] == \
                    [("done", attempts)] * len(trials)
            points = store.metric_points(session, list(trials))
            _check_losses([(trials[p.trial_id].key, p.name, p.step, trials[p.trial_id].arm,
                            trials[p.trial_id].seed, p.value) for p in points], seeds=seeds)
            items = store.eval_items(session, list(trials))
            assert len(items) == 2 * seeds * TASKS * ITEMS
    finally:
        db.close()


def _check_losses(points: list[tuple], *, seeds: int = SEEDS) -> None:
    """points: (trial, name, step, arm, seed, value); none twice, none lost, values right."""
    keys = Counter(p[:3] for p in points)
    assert max(keys.values()) == 1, "a metric point was recorded twice"
    losses = {(arm, seed, step): value for _, metric, step, arm, seed, value in points
              if metric == "loss"}
    expected = _expected_losses(STEPS, seeds)
    assert len(losses) == 2 * len(expected), "metric points were lost"
    for (arm, seed, step), value in losses.items():
        assert abs(value - expected[seed, step]) < 1e-12, (arm, seed, step)


def _cli(env, *args, check=False):
    if env is None:
        return cli(*args, check=check)
    result = subprocess.run([sys.executable, "-m", "labcoat.cli", *args], env=env,
                            capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"labcoat {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result


def test_run_show_report_export_on_postgres_match_sqlite(pg_url, home, tmp_path):
    """The same design run against PostgreSQL and against SQLite reads back identically; the
    trials print binary junk (a NUL byte PostgreSQL refuses in text) and raise a guard alert."""
    design = fake_design(tmp_path / "d", name="pgdemo", steps=STEPS, seeds=SEEDS,
                         extra="--garbage --alert-at 3")
    cli("run", str(design), check=True)
    shown = json.loads(cli("show", "pgdemo", "--json", check=True).stdout)
    assert [t["status"] for t in shown["trials"]] == ["done"] * 4
    _check_export("pgdemo")
    pg_report = json.loads(cli("report", "pgdemo", "--json", check=True).stdout)
    db = store.open_store()
    with db.session() as session:  # the printed binary lines (with a NUL byte) were kept
        trials = [t.id for t in store.find_experiment(session, "pgdemo").trials]
        assert any("\ufffd" in e.message for e in store.log_lines(session, trials))
    db.close()

    sqlite_env = {**os.environ, "LABCOAT_HOME": str(tmp_path / "sqlite-home")}
    sqlite_env.pop("LABCOAT_DB")
    _cli(sqlite_env, "run", str(design), check=True)
    sqlite_report = json.loads(_cli(sqlite_env, "report", "pgdemo", "--json", check=True).stdout)
    for report in (pg_report, sqlite_report):  # wall-clock facts differ between two runs
        report.pop("goodput")
        report["registration"].pop("frozen_at")
        report["registration"].pop("predictions_at", None)
    assert pg_report == sqlite_report
    assert pg_report["alerts"] and pg_report["results"]


def _home_env(tmp_path: Path, name: str, db_url: str) -> dict[str, str]:
    """Another machine: its own home (run files, journals), the shared database."""
    return {**os.environ, "LABCOAT_HOME": str(tmp_path / name), "LABCOAT_DB": db_url}


def _wait_running(url: str, name: str, runner: subprocess.Popen) -> None:
    """Poll the shared store in-process (a CLI call per poll would compete for the CPU)."""
    deadline = time.monotonic() + 240
    db = store.open_store(url)
    try:
        while True:
            with db.session() as session:
                try:
                    statuses = [t.status for t in store.find_experiment(session, name).trials]
                except LabcoatError:  # not registered yet
                    statuses = []
            if "running" in statuses:
                return
            assert runner.poll() is None, "the first runner ended before its trials ran"
            assert time.monotonic() < deadline, f"no trial of {name} started"
            time.sleep(0.2)
    finally:
        db.close()


def _shared_url(db_backend: str, tmp_path: Path) -> str:
    return os.environ["LABCOAT_DB"] if db_backend == "postgresql" else \
        f"sqlite:///{tmp_path / 'shared' / 'labcoat.db'}"


def test_concurrent_runners_lose_nothing_and_a_second_runner_of_one_experiment_is_refused(
        db_backend, tmp_path):
    """Two runners on two experiments write at once; a third, from another home, asks for
    the first experiment while it runs and is refused, naming the holder; run afterwards,
    it finds every trial done and records nothing twice."""
    url = _shared_url(db_backend, tmp_path)
    release = tmp_path / "release"
    one = fake_design(tmp_path / "one", name="one", steps=STEPS, seeds=1,
                      extra=f"--wait-for {release}")
    two = fake_design(tmp_path / "two", name="two", steps=STEPS, seeds=1, sleep=0.1)
    env_a, env_b, env_c = (_home_env(tmp_path, h, url) for h in ("a", "b", "c"))
    cmd = [sys.executable, "-m", "labcoat.cli", "run"]
    first = subprocess.Popen([*cmd, str(one)], env=env_a, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    other = subprocess.Popen([*cmd, str(two)], env=env_b, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        _wait_running(url, "one", first)
        refused = _cli(env_c, "run", str(one))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        message = " ".join(refused.stderr.split())
        assert "'one' is already being run by another `labcoat run`" in message, message
        if db_backend == "postgresql":
            assert f"pid {first.pid}" in message, message
        assert "Traceback" not in refused.stderr
        release.touch()
        for runner in (first, other):
            out, err = runner.communicate(timeout=300)
            assert runner.returncode == 0, out + err
    finally:
        for runner in (first, other):
            if runner.poll() is None:
                runner.kill()
                runner.wait()
    _check_store(url, "one", seeds=1)
    _check_store(url, "two", seeds=1)

    again = _cli(env_c, "run", str(one), check=True)
    assert "2 trial(s) already done: skipped" in again.stdout
    _check_store(url, "one", attempts=1, seeds=1)
