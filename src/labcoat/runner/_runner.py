"""`labcoat run`: expand a design into trials and run them, N at a time, resumably.

The runner is the only writer to the store. Each poll it ingests the new lines
of every running trial's journal and commits, so a killed runner loses nothing
already journaled; running it again finishes only what is unfinished.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import time
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from sqlalchemy.orm import Session

from labcoat import environment as env
from labcoat import spec, store
from labcoat.errors import Interrupted, LabcoatError
from labcoat.runner._capture import capture_output
from labcoat.runner._chaos import Chaos, corrupt_newest_checkpoint, kill, parse_chaos
from labcoat.runner._display import Display, TrialRow
from labcoat.runner._executor import (
    Executor,
    ExecutorConfig,
    LaunchError,
    TrialHandle,
    open_executor,
)
from labcoat.runner._ingest import Progress, ingest_attempt, ingest_ranks, journal_path
from labcoat.runner._liveness import Heartbeat, RunnerState, identity, runner_state
from labcoat.runner._local import LocalProcess, kill_stale, stderr_tail
from labcoat.runner._monitor import Monitor, MonitorFactory
from labcoat.runner._preflight import missing_extra
from labcoat.runner._provenance import ProvenanceRecorder
from labcoat.runner._ranks import (
    RankGroup,
    check_launcher,
    check_program,
    kill_ranks,
    launch_command,
)
from labcoat.runner._references import write_references
from labcoat.runner._registration import register
from labcoat.runner._restart import Hang, backoff_seconds, mtbf_seconds
from labcoat.spec import Resources, Restart
from labcoat.store import Attempt, Experiment, Trial

POLL_SECONDS = 0.3  # the longest wait between two looks at the running trials
EXIT_CHECK_SECONDS = 0.02  # ... cut short when a trial on this machine exits


@dataclass
class RunSummary:
    experiment: str
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already done before this run


@dataclass
class _Running:
    trial: Trial
    attempt: Attempt
    process: TrialHandle
    row: TrialRow
    hang: Hang
    group: RankGroup | None = None  # a multi-rank trial's ranks (design `ranks: N`)


@dataclass
class _Queued:
    trial: Trial
    not_before: float  # when it may start: now, or after a restart's backoff


def run_design(
    design_path: str | Path,
    *,
    parallelism: int | None = None,
    console: Console | None = None,
    plain: bool | None = None,
    chaos: str | None = None,
    chaos_seed: int = 0,
    amend: str | None = None,
    extra_seeds: list[int] | None = None,
    sequential: dict | None = None,
    executor: ExecutorConfig | None = None,
    monitors: Sequence[MonitorFactory] = (),
    allow_large: bool = False,
    only: Collection[str] | None = None,
    time_limit: float | None = None,
) -> RunSummary:
    """Run every unfinished trial of the design at `design_path`.

    chaos: a fault spec (see `labcoat.runner._chaos`) injected while it runs.
    amend: the reason for changing a frozen analysis plan (see `_registration`).
    extra_seeds, sequential: seeds added by a sequential run beyond the design's, and its
    pre-registered rule (see `labcoat.monitor.run_until_decisive`).
    executor: where trials run (default: local processes; see `_executor`).
    monitors: live checks of running trials (`labcoat.monitor.standard_monitors()`: early
    warning against references, scaling extrapolation); none by default.
    allow_large: start a design past its budget of trials or `spec.LARGE_DESIGN` (else a
    LabcoatError says its size before anything is expanded or recorded).
    only: run just these trial keys (the others are registered, not started).
    time_limit: seconds an attempt may run; past it the attempt is stopped and fails with
    the cause "time limit: ..." (`labcoat shrink` gives each candidate a budget).
    """
    path = Path(design_path)
    chaos_spec = parse_chaos(chaos) if chaos else None
    design = spec.load_design(path)
    too_large = None if allow_large else spec.size_problem(design)
    if too_large:
        raise LabcoatError(f"{path}: {too_large}, or pass --yes to run them all")
    file_trials = spec.expand(design)
    if extra_seeds:
        design = design.model_copy(update={"seeds": [*design.seeds, *extra_seeds]})
    trials = spec.expand(design)
    missing = missing_extra(trials)
    if missing:
        raise LabcoatError(f"{path}: {missing}")
    ranks = design.ranks or 1
    check_launcher(ranks)
    workers = parallelism or design.parallelism or max(1, (os.cpu_count() or 1) // ranks)
    console = console or Console()
    runs_on = open_executor(executor or ExecutorConfig(), design.resources)
    db = store.open_store()
    try:
        with (_experiment_lock(design.name) as previous,
              store.experiment_lock(db, design.name), db.session() as session):
            if design.reference:  # before registering: a typo must not freeze the design
                store.find_experiment(session, design.reference)
            experiment = register(
                session,
                spec.load_design(path),
                text=path.read_text(encoding="utf-8"),
                path=str(path.absolute()),
                trials=file_trials,
                amend=amend,
                sequential=sequential,
            )
            store.add_missing_trials(session, experiment, trials)
            _recover_stale(session, experiment, runs_on, ranks, previous)
            session.commit()
            restart = design.restart
            injector = None
            if chaos_spec is not None:
                retries = restart.retries + chaos_spec.faults_per_trial()
                restart = restart.model_copy(update={"retries": retries})
                injector = Chaos(chaos_spec, chaos_seed, time.time())
            loop = _Loop(session, experiment, restart, workers, console, plain, injector,
                         runs_on, design.resources)
            loop.provenance = ProvenanceRecorder(path, design, experiment.design_hash)
            loop.ranks = ranks
            loop.monitors = [make(session, experiment) for make in monitors]
            loop.only = None if only is None else set(only)
            loop.time_limit = time_limit
            loop.display.note(_where_line(db, experiment))
            return loop.run()
    finally:
        db.close()
        runs_on.close()


class _Loop:
    """Starts trials, ingests their journals, restarts crashed or hung ones."""

    def __init__(
        self,
        session: Session,
        experiment: Experiment,
        restart: Restart,
        workers: int,
        console: Console,
        plain: bool | None,
        chaos: Chaos | None = None,
        executor: Executor | None = None,
        resources: Resources | None = None,
    ) -> None:
        self.session = session
        self.executor = executor or open_executor(ExecutorConfig(), None)
        self.chaos = chaos
        self.attempts_in_run: Counter[str] = Counter()
        self.experiment = experiment
        self.restart = restart
        self.workers = workers
        self.summary = RunSummary(experiment.name)
        self.running: list[_Running] = []
        self.queue: list[_Queued] = []
        self.restarts: Counter[str] = Counter()  # restarts used in this invocation
        self.rows = {t.key: _row(t) for t in experiment.trials}
        self.display = Display(
            f"labcoat run {experiment.name}", list(self.rows.values()), console=console, plain=plain
        )
        self.threads = max(1, (os.cpu_count() or 1) // workers)
        if resources is not None and "cpus" in resources.model_fields_set:
            self.threads = max(1, int(resources.cpus))  # what the executor reserved
        self.ranks = 1  # processes per trial (design `ranks: N`, launched through torchrun)
        self.monitors: list[Monitor] = []  # live checks (labcoat.monitor)
        self.provenance: ProvenanceRecorder | None = None  # recorded at each launch
        self.heartbeat = Heartbeat(experiment.name)  # readers tell a dead runner by it
        self.only: set[str] | None = None  # trial keys to run (None: every unfinished one)
        self.time_limit: float | None = None  # seconds per attempt (None: no limit)

    def run(self) -> RunSummary:
        now = time.time()
        self.queue = [_Queued(t, now) for t in self.experiment.trials
                      if t.status != "done" and (self.only is None or t.key in self.only)]
        self.summary.skipped = [t.key for t in self.experiment.trials if t.status == "done"]
        with self.display, _stop_on_sigterm():
            if self.summary.skipped:
                self.display.note(f"{len(self.summary.skipped)} trial(s) already done: skipped")
            try:
                while self.queue or self.running:
                    self._poll()
                    self._start_ready()
                    if self.chaos is not None:
                        self._inject()
                    self.session.commit()
                    self.heartbeat.beat()
                    self.display.refresh()
                    self._wait()
            except KeyboardInterrupt:
                self._stop_all()
                raise Interrupted(
                    f"stopped: {len(self.summary.done) + len(self.summary.skipped)} trial(s) done "
                    f"and kept; run `labcoat run {self.experiment.design_path or 'DESIGN'}` "
                    "again to finish the rest"
                ) from None
        order = {t.key: i for i, t in enumerate(self.experiment.trials)}
        for keys in (self.summary.done, self.summary.failed):  # the design's order, not the
            keys.sort(key=lambda key: order.get(key, len(order)))  # order they ended in
        return self.summary

    def _wait(self) -> None:
        """Until the next look: POLL_SECONDS, or less once a local trial has exited, so its
        slot is refilled at once (short trials: 0.3 s of idle slot each otherwise)."""
        deadline = time.monotonic() + POLL_SECONDS
        local = [job.process for job in self.running if isinstance(job.process, LocalProcess)]
        while (left := deadline - time.monotonic()) > 0:
            if any(process.poll() is not None for process in local):
                return
            time.sleep(min(left, EXIT_CHECK_SECONDS))

    def _start_ready(self) -> None:
        now = time.time()
        for queued in list(self.queue):
            if len(self.running) >= self.workers:
                return
            if queued.not_before <= now:
                self.queue.remove(queued)
                self._start(queued.trial, queued_s=now - queued.not_before)

    def _start(self, trial: Trial, queued_s: float) -> None:
        number = max((a.number for a in trial.attempts), default=0) + 1
        run_dir = _trial_dir(self.experiment, trial) / f"attempt-{number}"
        attempt = store.start_attempt(
            self.session, trial, run_dir=str(run_dir), host=socket.gethostname()
        )
        attempt.queued_s = queued_s
        row = self.rows[trial.key]
        row.status, row.started, row.ended, row.note = "running", time.time(), None, ""
        child = self._env(trial, attempt)
        if self.provenance is not None:
            store.record_provenance(self.session, attempt, self.provenance.record(
                command=trial.command or [], params=trial.params, seed=trial.seed,
                variables=child, cwd=os.getcwd()))
        try:
            check_program(trial.command or [], self.ranks)
            process = self.executor.launch(
                launch_command(trial.command or [], self.ranks, run_dir), env=child,
                run_dir=run_dir, cwd=os.getcwd(),
            )
        except OSError as e:
            program = (trial.command or ["?"])[0]
            cause = f"could not start {program!r}: {e.strerror}; check the design's `command:`"
            self._fail(trial, attempt, row, None, cause, retry=False)
            return
        except LaunchError as e:
            self._fail(trial, attempt, row, None, str(e), retry=False)
            return
        attempt.pid = process.pid
        self._record_injected(trial, attempt)
        self.session.commit()
        hang = Hang(self.restart.heartbeat_timeout, last_activity=time.time())
        group = RankGroup(self.ranks, time.time()) if self.ranks > 1 else None
        self.running.append(_Running(trial, attempt, process, row, hang, group))
        self.display.say(trial.key, f"started (attempt {number}, {process.label})")

    def _env(self, trial: Trial, attempt: Attempt) -> dict[str, str]:
        child = dict(os.environ)
        child.update(
            {
                env.HOME: str(env.home()),
                env.JOURNAL: str(journal_path(attempt)),
                env.EXPERIMENT: self.experiment.name,
                env.TRIAL: trial.key,
                env.ATTEMPT: str(attempt.number),
                env.ARM: trial.arm,
                env.SEED: "" if trial.seed is None else str(trial.seed),
                env.PARAMS: json.dumps(trial.params),
                env.CHECKPOINT_DIR: str(_trial_dir(self.experiment, trial) / "checkpoints"),
                env.MTBF: f"{mtbf_seconds(self.experiment):.1f}",
                "PYTHONUNBUFFERED": "1",
            }
        )
        # N trials share the CPUs: without this each would start one thread per core.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            child.setdefault(var, str(max(1, self.threads // self.ranks)))
        reference = write_references(
            self.session, self.experiment, trial, _trial_dir(self.experiment, trial)
        )
        if reference is not None:
            child.setdefault(env.GUARD_REFERENCE, str(reference))
        self.attempts_in_run[trial.key] += 1
        if self.chaos is not None:
            child.update(self.chaos.environment(self.attempts_in_run[trial.key])[0])
        return child

    def _record_injected(self, trial: Trial, attempt: Attempt) -> None:
        if self.chaos is None:
            return
        faults, name = self.chaos.environment(self.attempts_in_run[trial.key])
        if name is not None:
            setting = ", ".join(f"{k}={v}" for k, v in faults.items())
            self._chaos_event(attempt, f"chaos.{name}", f"injected {name} ({setting})", faults)

    def _inject(self) -> None:
        """A periodic chaos fault, if one is due: kill a trial, or corrupt its newest
        checkpoint and kill it."""
        # A kill reaches only trials started on this machine (the local executor's, or a
        # Ray or Slurm trial that landed here).
        here = [job.trial.key for job in self.running
                if job.process.pid is not None and job.process.host == socket.gethostname()]
        due = self.chaos.due(time.time(), here)
        if due is None:
            return
        fault, key = due
        job = next(j for j in self.running if j.trial.key == key)
        data: dict[str, object] = {"pid": job.process.pid}
        if fault == "corrupt":
            directory = _trial_dir(self.experiment, job.trial) / "checkpoints"
            corrupted = corrupt_newest_checkpoint(directory, self.chaos.rng)
            data["path"] = str(corrupted) if corrupted else None
        kill(job.process.pid)
        what = "killed" if fault == "kill" else f"corrupted {data.get('path')} and killed"
        self._chaos_event(
            job.attempt, f"chaos.{fault}", f"{what} at step {job.attempt.last_step}", data
        )
        self.display.say(key, f"chaos: {what}")

    def _chaos_event(self, attempt: Attempt, kind: str, message: str, data: dict) -> None:
        store.insert_events(
            self.session,
            [
                {
                    "trial_id": attempt.trial_id,
                    "attempt_id": attempt.id,
                    "seq": None,
                    "step": attempt.last_step,
                    "rank": None,
                    "host": attempt.host,
                    "level": "warning",
                    "kind": kind,
                    "message": message,
                    "data": data,
                    "time": time.time(),
                }
            ],
        )

    def _poll(self) -> None:
        now = time.time()
        for job in list(self.running):
            code = job.process.poll()
            _where(job.attempt, job.process)
            progress = ingest_attempt(self.session, job.attempt)
            self._ingest_ranks(job, progress)
            capture_output(self.session, job.attempt, job.attempt.last_step)
            _show_progress(job.row, job.trial, progress)
            for alert in progress.alerts:
                self.display.say(
                    job.trial.key,
                    f"guard {alert['severity']}: {alert['rule']} at "
                    f"step {alert['step']}: {alert['message']}",
                )
            self._monitor(job, final=code is not None)
            if progress.records:
                job.hang.touch(now)
            if job.group is not None:  # a rank group hangs if any of its ranks does
                job.hang.last_activity = job.group.last_activity()
            if progress.heartbeat_timeout:
                job.hang.timeout = progress.heartbeat_timeout
            stuck = None
            if code is None and job.hang.hung(now):
                stuck = f"hang: no journal line for {job.hang.timeout:g} s"
                if job.group is not None:
                    stuck += f"; {job.group.silent_first()}"
            elif code is None and job.group is not None:
                stuck = job.group.left_behind(now)
            if stuck is None and code is None and self.time_limit is not None \
                    and job.row.started is not None and now - job.row.started > self.time_limit:
                stuck = f"time limit: stopped after {self.time_limit:g} s"
            hung = stuck is not None
            if hung:
                code = job.process.stop(grace=2.0)  # None if its executor cannot tell
            if code is None and not hung:
                continue
            self.running.remove(job)
            self._ingest_ranks(job, ingest_attempt(self.session, job.attempt))  # lines
            capture_output(self.session, job.attempt, job.attempt.last_step)  # written at exit
            self._monitor(job, final=True)  # its last evals may be in those lines
            if job.group is not None:
                kill_ranks(journal_path(job.attempt))  # ranks torchrun left behind, if any
                failure = job.group.failure(job.attempt) if code != 0 and not hung else None
                if failure is not None:
                    store.insert_events(self.session, [failure.event(job.attempt)])
                    self._fail(job.trial, job.attempt, job.row, code, failure.cause)
                    continue
            if hung:
                self._fail(job.trial, job.attempt, job.row, code, stuck)
            elif code == 0:
                self._done(job)
            else:
                cause = job.process.lost or _failure(code, job.process.run_dir)
                self._fail(job.trial, job.attempt, job.row, code, cause)

    def _ingest_ranks(self, job: _Running, progress: Progress) -> None:
        """A multi-rank trial: its other ranks' journals, and stragglers among its ranks."""
        if job.group is None:
            return
        for news in job.group.ingest(self.session, job.attempt, progress):
            self.display.say(job.trial.key, news)

    def _monitor(self, job: _Running, *, final: bool) -> None:
        """Every monitor's new alerts and notes on this attempt, shown live."""
        for monitor in self.monitors:
            alerts, note = monitor.check(self.session, job.trial, job.attempt, final=final)
            for alert in alerts:
                self.display.say(job.trial.key, f"{alert['rule']}: {alert['message']}")
            if note:
                self.display.say(job.trial.key, note)

    def _done(self, job: _Running) -> None:
        store.end_attempt(
            self.session, job.attempt, exit_code=0, cause="exit 0", trial_status="done"
        )
        self.session.commit()
        job.row.status, job.row.ended = "done", time.time()
        self.summary.done.append(job.trial.key)
        self.display.say(job.trial.key, "done")
        if len(self.summary.done) == 1:  # the first to finish: is the judged metric there?
            for message in never_logged(self.session, self.experiment, job.trial):
                self.display.say(job.trial.key, message)

    def _fail(
        self,
        trial: Trial,
        attempt: Attempt,
        row: TrialRow,
        code: int | None,
        cause: str,
        retry: bool = True,
    ) -> None:
        """Restart (the trial resumes from its last verified checkpoint) while the retry
        budget lasts; then the trial counts as failed."""
        used = self.restarts[trial.key]
        retry = (
            retry and used < self.restart.retries and not _crash_loop(trial, attempt, code, cause)
        )
        store.end_attempt(
            self.session,
            attempt,
            exit_code=code,
            cause=cause,
            trial_status="pending" if retry else "failed",
        )
        self.session.commit()
        row.ended = time.time()
        if retry:
            self.restarts[trial.key] += 1
            delay = backoff_seconds(self.restart, used + 1)
            self.queue.append(_Queued(trial, not_before=time.time() + delay))
            row.status = "restarting"
            self.display.say(
                trial.key, f"{cause}; restart {used + 1}/{self.restart.retries} in {delay:g} s"
            )
            return
        row.status = "failed"
        self.summary.failed.append(trial.key)
        tried = f" after {used} restart(s)" if used else ""
        if _crash_loop(trial, attempt, code, cause):
            tried += " (the same failure twice before any step: not retrying)"
        self.display.say(trial.key, f"failed{tried}: {cause}")

    def _stop_all(self) -> None:
        for job in self.running:
            code = job.process.stop()
            if job.group is not None:
                kill_ranks(journal_path(job.attempt))
            self._ingest_ranks(job, ingest_attempt(self.session, job.attempt))
            capture_output(self.session, job.attempt, job.attempt.last_step)
            store.end_attempt(
                self.session,
                job.attempt,
                exit_code=code,
                cause="interrupted (labcoat run was stopped)",
                trial_status="pending",
            )
            job.row.status = "pending"
        self.running.clear()
        self.session.commit()


def _where(attempt: Attempt, process: TrialHandle) -> None:
    """Record where the executor placed the trial, once it knows (Ray, Slurm)."""
    if process.pid is not None and attempt.pid != process.pid:
        attempt.pid = process.pid
    if process.host is not None and attempt.host != process.host:
        attempt.host = process.host


def _where_line(db: store.Store, experiment: Experiment) -> str:
    """Where things happen, said once at the start: trial commands run in the directory
    `labcoat run` was started from (relative paths in a design resolve there)."""
    url = db.engine.url
    where = url.database if url.get_backend_name() == "sqlite" else url.render_as_string(
        hide_password=True)
    logs = env.home() / "runs" / experiment.name
    return (f"trials run in {os.getcwd()} (this directory: relative paths in the command "
            f"resolve here); store: {where}; logs: {logs}/TRIAL/attempt-N/")


def _crash_loop(trial: Trial, attempt: Attempt, code: int | None, cause: str) -> bool:
    """The same error exit twice in a row before any step: a bug, not bad luck; restarting
    again would only burn the retry budget. Kills and hangs come from outside: they are
    always retried."""
    if not cause.startswith("exit ") or code is None or not 0 < code < 128:
        return False
    earlier = [a for a in trial.attempts if a.number < attempt.number and a.ended_at]
    return (
        attempt.last_step is None
        and bool(earlier)
        and earlier[-1].cause == cause
        and earlier[-1].last_step is None
    )


def _trial_dir(experiment: Experiment, trial: Trial) -> Path:
    return env.home() / "runs" / experiment.name / trial.key


def _row(trial: Trial) -> TrialRow:
    attempt = store.last_attempt(trial)
    return TrialRow(
        key=escape(trial.key),
        arm=escape(trial.arm),
        status=trial.status,
        total=trial.total_steps,
        step=attempt.last_step if attempt else None,
    )


def _show_progress(row: TrialRow, trial: Trial, progress: Progress) -> None:
    row.step = progress.last_step
    row.total = trial.total_steps
    if progress.latest:
        name, value = next(iter(progress.latest.items()))
        row.metric = escape(f"{name}={value:.4g}")


def _failure(code: int, run_dir: Path) -> str:
    if code < 0:
        cause = f"killed by signal {signal.Signals(-code).name}"
    else:
        cause = f"exit {code}"
    tail = stderr_tail(run_dir, lines=1)
    return f"{cause}: {tail}" if tail else cause


def _recover_stale(session: Session, experiment: Experiment, executor: Executor,
                   ranks: int = 1, previous: RunnerState | None = None) -> None:
    """Close attempts left open by a runner that was killed, keeping their journals (of
    every rank, in a multi-rank trial). They end at their last sign of life (the dead
    runner's heartbeat or the trial's last journal line), not now."""
    why = previous.gone() if previous is not None else "labcoat run was stopped while it ran"
    for trial in experiment.trials:
        attempt = store.last_attempt(trial)
        if trial.status != "running" or attempt is None or attempt.ended_at is not None:
            continue
        if attempt.pid and attempt.host == socket.gethostname():
            kill_stale(attempt.pid, journal_path(attempt))
            kill_ranks(journal_path(attempt))  # ranks of a multi-rank trial outlive torchrun
        if attempt.run_dir:
            executor.abandon(Path(attempt.run_dir))
        progress = ingest_attempt(session, attempt)
        if ranks > 1:
            ingest_ranks(session, attempt, ranks, {})
        capture_output(session, attempt, attempt.last_step)
        if progress.finish_status == "done":
            # The trial reached run.finish(); only its exit code went unobserved.
            store.end_attempt(session, attempt, exit_code=None, trial_status="done",
                              cause=f"finished (exit not observed: {why})")
        else:
            store.end_attempt(session, attempt, exit_code=None, trial_status="pending",
                              cause=f"interrupted ({why})")
        ended = last_sign_of_life(attempt, previous)
        if ended is not None:
            attempt.ended_at = ended


def last_sign_of_life(attempt: Attempt, runner: RunnerState | None) -> datetime | None:
    """When an attempt whose runner died was last known to run: the later of the runner's
    last heartbeat and the trial's last journal line, never before it started nor in the
    future; None if neither is known."""
    seen = [t for t in (runner.heartbeat if runner else None, attempt.last_record_time)
            if t is not None]
    if not seen:
        return None
    started = store.as_utc(attempt.started_at).timestamp()
    moment = min(max(max(seen), started), time.time())
    return datetime.fromtimestamp(moment, UTC)


@contextmanager
def _experiment_lock(name: str) -> Iterator[RunnerState | None]:
    """One runner per experiment: a second `labcoat run` on it stops with a message.
    Yields the previous runner's state (pid, host, last heartbeat) as its file said."""
    lock_dir = env.home() / "runs" / name
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / ".lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise LabcoatError(
                f"experiment {name!r} is already being run by another `labcoat run` "
                f"({_holder(handle.read())}); wait for it or stop it first"
            ) from None
        handle.seek(0)
        before = handle.read()
        previous = runner_state(name, before, os.fstat(handle.fileno()).st_mtime
                                ) if before.strip() else None
        handle.truncate(0)
        handle.write(identity())
        handle.flush()
        yield previous


def _holder(text: str) -> str:
    fields = text.split()
    return f"pid {fields[0] if fields else '?'}" + (f" on {fields[1]}" if len(fields) > 1 else "")


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM stops the run as cleanly as Ctrl-C does."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def never_logged(session: Session, experiment: Experiment, trial: Trial) -> list[str]:
    """Warnings for hypotheses whose metric a finished trial never logged: said at the first
    finished trial, not after the last one in the report."""
    if not experiment.design_yaml:
        return []
    design = spec.parse_design(experiment.design_yaml, f"design of {experiment.name}")
    out = []
    for h in design.all_hypotheses:
        values, _ = store.primary_values(session, [trial], source=h.source, metric=h.metric)
        if trial.id in values:
            continue
        if h.source == "items":
            out.append(f"warning: finished without per-item scores (run.log_items), which "
                       f"the hypothesis on {h.metric!r} (source: items) is judged on")
        else:
            logged = store.metric_names(session, [trial.id])
            out.append(f"warning: finished without logging {h.metric!r}, the hypothesis' "
                       f"metric (it logged: {', '.join(logged[:8]) or 'nothing'}); the report "
                       "will have nothing to judge")
    return out
