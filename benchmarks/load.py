"""Load test of a shared store: many runners write while reports and dashboards read.

Each runner is a separate process doing what `labcoat run` does to the store: it
registers its experiment (pre-registration, trials) under the store's experiment
lock, and for each trial starts an attempt, lets the trial append journal lines
through the real SDK (`labcoat.sdk.Run`), and every poll ingests the new lines
(`labcoat.runner.ingest_attempt`) and commits. A fraction of trials crash halfway
and resume from an earlier "checkpoint", re-logging steps, as restarts do. Trial
processes themselves are not spawned: their start-up would swamp the store's share
of the time on 2 cores. Each reader is a process that loops over the queries the
report and a live dashboard make: `report.analyze` (the full report), `status_data`
(status/show) and `metric_points` (a loss curve).

At the end every experiment's points are counted against what the trials logged
(no point lost, none twice) and their values checked against the formula that
made them. Baselines measured in the same run: write throughput of one runner alone
(no readers), and read latency on the finished store with no writers.

Run (small, ~1 minute each):
  .venv/bin/python benchmarks/load.py --backend postgresql   # 8 runners + 4 readers
  .venv/bin/python benchmarks/load.py --backend sqlite       # 1 runner + 8 readers
  .venv/bin/python benchmarks/load.py --quick                # seconds: SQLite, 1 + 1
PostgreSQL URL: --url, else LABCOAT_TEST_PG_URL, else the one `.ci/postgres` sets up; the
benchmark works in a fresh schema it drops afterwards.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import _harness as bench

DEFAULT_PG = "postgresql+psycopg://labcoat:labcoat@127.0.0.1:5432/labcoat_test"
METRICS = ("loss", "lr", "grad_norm", "tokens_per_s")
TASKS, ITEMS = 2, 50
READS = ("report", "status", "curve")


def value(trial: str, name: str, step: int) -> float:
    """What every attempt of `trial` logs for `name` at `step` (deterministic, so a restart
    re-logs the same number and the end check knows every value)."""
    base = (sum(map(ord, trial)) % 97) / 97
    return {"loss": 2.0 / (1 + step) + base, "lr": 1e-3 * (1 + base),
            "grad_norm": 1.0 + math.sin(step + base), "tokens_per_s": 1000.0 + step}[name]


def design_text(name: str, trials: int) -> str:
    seeds = max(1, trials // 2)
    return f"""name: {name}
hypothesis: {{claim: variant helps, metric: exact_match, source: items, direction: increase}}
command: "true {{seed}} {{quality}}"
params: {{quality: 0.3}}
arms:
  base: {{control: true}}
  better: {{params: {{quality: 0.8}}}}
seeds: {seeds}
"""


def runner(index: int, url: str, home: str, args: argparse.Namespace, results, ready, go
           ) -> None:
    """One runner process: register, run every trial (some with a restart), ingest, commit."""
    os.environ["LABCOAT_DB"] = url
    os.environ["LABCOAT_HOME"] = home
    from labcoat import spec, store
    from labcoat.runner import ingest_attempt
    from labcoat.runner._registration import register
    from labcoat.sdk import Run

    name = f"load-{index}"
    design_path = Path(home) / f"{name}.yaml"
    design_path.write_text(design_text(name, args.trials), encoding="utf-8")
    design = spec.load_design(design_path)
    db = store.open_store()
    rng = random.Random(index)
    points = relogged = 0
    waited = 0.0  # seconds inside COMMIT: where lock waits and fsyncs show up

    def commit() -> None:
        nonlocal waited
        began = time.perf_counter()
        session.commit()
        waited += time.perf_counter() - began

    ready.put(index)
    go.wait()
    start = time.time()  # wall clock: phases combine the spans of several processes
    with store.experiment_lock(db, name), db.session() as session:
        experiment = register(session, design, text=design_path.read_text(),
                              path=str(design_path), trials=spec.expand(design))
        commit()
        for trial in experiment.trials:
            crash_at = (rng.randrange(args.steps // 4, args.steps) if rng.random() < args.restarts
                        else None)
            resume = 0
            for number in (1, 2) if crash_at else (1,):
                run_dir = Path(home) / "runs" / name / trial.key / str(number)
                attempt = store.start_attempt(session, trial, run_dir=str(run_dir), host="load")
                commit()
                run = Run(journal=run_dir / "journal.jsonl", experiment=name, trial=trial.key,
                          attempt=number, arm=trial.arm, seed=trial.seed, params=trial.params,
                          adhoc=False, total_steps=args.steps)
                end = crash_at if number == 1 and crash_at else args.steps
                for step in range(resume + 1, end + 1):
                    run.log(step, **{m: value(trial.key, m, step) for m in METRICS})
                    if number == 2 and step <= crash_at:
                        relogged += len(METRICS)
                    else:
                        points += len(METRICS)
                    if step % args.poll_steps == 0 or step == end:
                        ingest_attempt(session, attempt)  # one runner poll
                        commit()
                if number == 1 and crash_at:
                    store.end_attempt(session, attempt, exit_code=1, cause="exit 1",
                                      trial_status="pending")
                    resume = max(0, crash_at - args.poll_steps)  # last checkpoint
                    commit()
                    continue
                quality = float(trial.params["quality"])
                for task in range(TASKS):
                    scores = [1.0 if rng.random() < quality else 0.0 for _ in range(ITEMS)]
                    run.log_items(args.steps, f"task{task}", list(range(ITEMS)), scores)
                run.finish()
                ingest_attempt(session, attempt)
                store.end_attempt(session, attempt, exit_code=0, cause="exit 0",
                                  trial_status="done")
                commit()
    results.put(("write", index, points, relogged, start, time.time(), waited))
    db.close()


def reader(index: int, url: str, names: list[str], stop, results, ready, go, think: float
           ) -> None:
    """One reader process: report, status and curve queries until told to stop."""
    os.environ["LABCOAT_DB"] = url
    from labcoat import report, store
    from labcoat.errors import LabcoatError

    db = store.open_store()
    report.analyze  # noqa: B018 - load the analysis (scipy) before timing anything
    import scipy.stats  # noqa: F401
    rng = random.Random(1000 + index)
    ready.put(index)
    go.wait()
    latencies: dict[str, list[float]] = {r: [] for r in READS}
    errors = turn = 0
    while not stop.is_set():
        kind = READS[turn % len(READS)]
        turn += 1
        name = rng.choice(names)
        start = time.perf_counter()
        try:
            with db.session() as session:
                experiment = store.find_experiment(session, name)
                if kind == "report":
                    report.analyze(session, experiment)
                elif kind == "status":
                    report.status_data(session, experiment)
                else:
                    store.metric_points(session, [t.id for t in experiment.trials], "loss")
        except LabcoatError:  # not registered yet
            time.sleep(0.05)
            continue
        except Exception as e:  # a reader that breaks is a finding, not a crash
            errors += 1
            print(f"reader {index}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        latencies[kind].append(time.perf_counter() - start)
        time.sleep(think)
    db.close()
    results.put(("read", index, latencies, errors))


def phase(url: str, home: str, args: argparse.Namespace, *, runners: int, readers: int,
          first: int) -> dict:
    """Run `runners` writers (experiments first..first+runners-1) beside `readers` readers."""
    ctx = mp.get_context("spawn")
    results, ready, stop, go = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    names = [f"load-{first + i}" for i in range(runners)] if runners else args.read_names
    readers_p = [ctx.Process(target=reader, args=(i, url, names, stop, results, ready, go,
                                                  args.think)) for i in range(readers)]
    writers_p = [ctx.Process(target=runner, args=(first + i, url, home, args, results, ready,
                                                  go)) for i in range(runners)]
    for p in readers_p + writers_p:
        p.start()
    for _ in readers_p + writers_p:  # everyone imported and connected: start together
        ready.get(timeout=600)
    go.set()
    writes = [results.get() for _ in writers_p]
    elapsed = (max(w[5] for w in writes) - min(w[4] for w in writes)) if writes else 0.0
    if not runners:
        time.sleep(args.idle_read_seconds)
    stop.set()
    reads = [results.get() for _ in readers_p]
    for p in readers_p + writers_p:
        p.join()
        if p.exitcode:
            raise SystemExit(f"a {p.name} process failed (exit {p.exitcode})")
    latencies: dict[str, list[float]] = {r: [] for r in READS}
    for _, _, per_kind, _ in reads:
        for kind, values in per_kind.items():
            latencies[kind].extend(values)
    busy = sum(w[5] - w[4] for w in writes)
    return {"points": sum(w[2] for w in writes), "relogged": sum(w[3] for w in writes),
            "commit_share": sum(w[6] for w in writes) / busy if busy else 0.0,
            "seconds": elapsed, "latencies": latencies, "read_errors": sum(r[3] for r in reads)}


def check(url: str, names: list[str], args: argparse.Namespace) -> tuple[int, int, int]:
    """(points expected, points stored, points with a wrong value); duplicates are counted
    as stored rows beyond the distinct (trial, name, step) keys."""
    os.environ["LABCOAT_DB"] = url
    from sqlalchemy import func, select

    from labcoat import store

    db = store.open_store()
    expected = stored = wrong = 0
    with db.session() as session:
        for name in names:
            experiment = store.find_experiment(session, name)
            trials = {t.id: t for t in experiment.trials}
            assert all(t.status == "done" for t in trials.values()), name
            expected += len(trials) * args.steps * len(METRICS)
            rows = store.metric_points(session, list(trials))
            stored += len(rows)
            keys = {(r.trial_id, r.name, r.step) for r in rows}
            if len(keys) != len(rows):
                raise SystemExit(f"{name}: {len(rows) - len(keys)} duplicated points")
            wrong += sum(abs(r.value - value(trials[r.trial_id].key, r.name, r.step)) > 1e-12
                         for r in rows)
            items = session.scalar(select(func.count()).select_from(store.EvalItem)
                                   .where(store.EvalItem.trial_id.in_(list(trials))))
            if items != len(trials) * TASKS * ITEMS:
                raise SystemExit(f"{name}: {items} eval items, expected "
                                 f"{len(trials) * TASKS * ITEMS}")
    db.close()
    return expected, stored, wrong


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 \
        else (values[0] if values else math.nan)


def show_reads(label: str, latencies: dict[str, list[float]]) -> None:
    for kind in READS:
        v = latencies[kind]
        if v:
            print(f"  {label} {kind:7s} n={len(v):5d}  p50 {1000 * percentile(v, 50):8.1f} ms"
                  f"  p95 {1000 * percentile(v, 95):8.1f} ms")


def fresh_pg_schema(base: str) -> tuple[str, callable]:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    schema = f"load_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})

    def drop() -> None:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()

    return url.render_as_string(hide_password=False), drop


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--url", default=None, help="PostgreSQL URL (a schema is created in it)")
    parser.add_argument("--runners", type=int, default=None,
                        help="writer processes (default: 8 on PostgreSQL, 1 on SQLite)")
    parser.add_argument("--readers", type=int, default=None,
                        help="reader processes (default: 4 on PostgreSQL, 8 on SQLite)")
    parser.add_argument("--trials", type=int, default=4, help="trials per runner")
    parser.add_argument("--steps", type=int, default=200, help="steps per trial")
    parser.add_argument("--poll-steps", type=int, default=20,
                        help="steps a trial logs between two ingestion polls")
    parser.add_argument("--restarts", type=float, default=0.25,
                        help="fraction of trials that crash once and resume")
    parser.add_argument("--idle-read-seconds", type=float, default=5.0)
    parser.add_argument("--think", type=float, default=0.0,
                        help="seconds a reader waits between queries (0: read flat out)")
    args = bench.shrink(parser.parse_args(), backend="sqlite", runners=1, readers=1, trials=1,
                        steps=20, idle_read_seconds=0.5)
    pg = args.backend == "postgresql"
    runners = args.runners or (8 if pg else 1)
    readers = args.readers if args.readers is not None else (4 if pg else 8)
    with tempfile.TemporaryDirectory() as tmp:
        if pg:
            url, cleanup = fresh_pg_schema(args.url or os.environ.get("LABCOAT_TEST_PG_URL")
                                           or DEFAULT_PG)
        else:
            url, cleanup = f"sqlite:///{tmp}/labcoat.db", (lambda: None)
        try:
            report(url, tmp, args, runners, readers)
        finally:
            cleanup()


def report(url: str, home: str, args: argparse.Namespace, runners: int, readers: int) -> None:
    from labcoat import store

    store.open_store(url).close()  # migrate once, outside the timings
    per_runner = args.trials * args.steps * len(METRICS)
    print(f"{args.backend}: {runners} runner(s) x {args.trials} trials x {args.steps} steps x "
          f"{len(METRICS)} metrics, {readers} reader(s), ingest every {args.poll_steps} steps, "
          f"{args.restarts:.0%} of trials restart")
    solo = phase(url, home, args, runners=1, readers=0, first=0)
    solo_rate = solo["points"] / solo["seconds"]
    print(f"baseline: 1 runner alone: {solo['points']} points in {solo['seconds']:.2f} s "
          f"= {solo_rate:,.0f} points/s")
    load = phase(url, home, args, runners=runners, readers=readers, first=1)
    rate = load["points"] / load["seconds"]
    print(f"load: {runners} runners + {readers} readers: {load['points']} points "
          f"(+{load['relogged']} re-logged after restarts) in {load['seconds']:.2f} s = "
          f"{rate:,.0f} points/s ({rate / solo_rate:.2f}x one runner alone)")
    print(f"  runners spent {load['commit_share']:.0%} of their time in COMMIT "
          f"(alone: {solo['commit_share']:.0%})")
    show_reads("under load:", load["latencies"])
    names = [f"load-{i}" for i in range(runners + 1)]
    args.read_names = names
    idle = phase(url, home, args, runners=0, readers=readers, first=0)
    show_reads("idle store:", idle["latencies"])
    for kind in READS:
        if load["latencies"][kind] and idle["latencies"][kind]:
            ratio = percentile(load["latencies"][kind], 50) / percentile(idle["latencies"][kind],
                                                                          50)
            print(f"  {kind} p50 under load / idle: {ratio:.2f}x")
    expected, stored, wrong = check(url, names, args)
    errors = load["read_errors"] + idle["read_errors"]
    print(f"check: {stored} points stored, {expected} logged ({per_runner} per runner), "
          f"{stored - expected:+d} lost/extra, 0 duplicated, {wrong} wrong values, "
          f"{errors} reader errors")
    if stored != expected or wrong or errors:
        raise SystemExit("FAILED: the store lost, added or changed points, or a reader broke")
    bench.save(args, {"backend": args.backend, "solo_points_per_s": solo_rate,
                      "load_points_per_s": rate, "stored": stored, "expected": expected})


if __name__ == "__main__":
    main()
