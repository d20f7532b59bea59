"""The trial-side API: ``labcoat.init()`` and the ``Run`` it returns.

Inside a trial started by ``labcoat run`` the identity comes from the
environment (see ``labcoat.environment``). In a multi-rank trial (``ranks: N``,
launched by torchrun, which sets ``RANK`` and ``WORLD_SIZE``) every rank
journals to its own file; metrics and eval items are rank 0's alone (ranks of
a data-parallel group hold the same model, so N copies would only duplicate
them), while every rank journals its step times, so a straggler shows.
Outside a runner, ``init`` records an ad-hoc experiment: the journal goes
under ``$LABCOAT_HOME/adhoc``; when the run finishes (or the script exits) the
SDK says where, and the next read command (``labcoat status``, ``report``,
``ui``...) ingests it into the store. The SDK never opens the database.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import math
import numbers
import os
import re
import socket
import sys
import time
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from labcoat import environment as env
from labcoat import journal as fmt
from labcoat.journal import JOURNAL_NAME, LEVELS, VERSION, Events, rank_journal
from labcoat.sdk._journal import JournalWriter

# What the store and every verb can address (tests/sdk check these against spec.NAME,
# the design's name length and the store's columns).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # experiments and arms, as in a design
NAME_MAX = 100  # characters of an experiment's name
TEXT_MAX = 200  # characters of a metric, task, variant or item name
STEP_MAX = 2**63 - 1  # steps and seeds are the store's 64-bit integers
PHASE_NAME_MAX = 60  # characters of a run.phase name (stored as phase_s/<name>/rank<r>)


class Run:
    """One trial attempt's handle: log metrics, per-item eval results and events.

    Every call appends one flushed journal line, so a killed trial loses at most
    the call it was in.
    """

    def __init__(
        self,
        *,
        journal: Path,
        experiment: str,
        trial: str,
        attempt: int,
        arm: str | None,
        seed: int | None,
        params: dict[str, Any],
        adhoc: bool,
        total_steps: int | None = None,
        heartbeat_timeout: float | None = None,
        rank: int = 0,
        world: int = 1,
    ) -> None:
        self.journal = journal
        self.rank = rank
        self.world = world
        self._timed_step: int | None = None  # last step whose wall time was journaled
        self._timed_at = time.time()
        self.experiment = experiment
        self.trial = trial
        self.attempt = attempt
        self.arm = arm
        self.seed = seed
        self.params = params
        self.adhoc = adhoc
        self.step: int | None = None
        self.finished = False
        # run.phase: seconds per phase name not yet journaled, the phase now open (if any),
        # and the labcoat.torch phase timer that journals them with its own (None: log() does)
        self.phase_seconds: dict[str, float] = {}
        self.current_phase: str | None = None
        self.phase_timer: object | None = None
        self._repeats = _Repeats()
        self._writer = JournalWriter(journal)
        self._writer.write(
            {
                "kind": fmt.START,
                "v": VERSION,
                "time": time.time(),
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "total_steps": total_steps,
                "heartbeat_timeout": heartbeat_timeout,
                "arm": arm,
                "seed": seed,
                "params": params,
                **({"rank": rank, "world": world} if world > 1 else {}),
            }
        )

    def log(self, step: int, **metrics: Any) -> None:
        """Record scalar metrics at `step`, e.g. ``run.log(10, loss=2.3, lr=1e-3)``."""
        step = self._check_step(step, "log")
        if not metrics:
            raise ValueError("run.log needs at least one metric, e.g. run.log(step, loss=1.0)")
        values = {
            _text(name, "run.log: metric name"):
                _number(value, f"run.log: metric {name!r} at step {step}")
            for name, value in metrics.items()
        }
        if self.phase_seconds and self.phase_timer is None:
            self.log_phases(step)  # run.phase alone: its times go with the step they end
        if self.world > 1:
            self._time_step(step)
            if self.rank > 0:
                return  # rank 0's metrics stand for the group
        self._write({"kind": fmt.LOG, "step": step, "metrics": values})
        for name in self._repeats.repeated(values, step):
            self._overwritten(f"{name!r}", step, "the later value")

    def log_work(self, step: int, seconds: float) -> None:
        """Record this rank's own work at `step` (data loading and forward, say), measured
        before it waits for the other ranks.

        In synchronous data-parallel training every rank's wall time per step is the
        slowest rank's (all wait at the gradient all-reduce), so only the work before the
        wait tells which rank is the straggler. Outside a multi-rank trial: ignored.
        """
        step = self._check_step(step, "log_work")
        seconds = _number(seconds, f"run.log_work: seconds at step {step}")
        if self.world > 1:
            self._write({"kind": fmt.STEP, "step": step, "work_s": seconds})

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase `name` of the current step, e.g. ``with run.phase("eval"):``.

        The time goes into the step's `phases` journal record: the one a
        `labcoat.torch.time_phases` timer writes (which also leaves a forward run inside
        the block out of its own ``forward``), or else one written at the next
        ``run.log``. A name used twice in one step adds up; phases may nest (the inner
        one's time counts in both). The clock is ``time.perf_counter_ns``: on a GPU, time
        the host waits for (call ``torch.cuda.synchronize()`` inside if you need device
        time).
        """
        if not isinstance(name, str) or not name or len(name) > PHASE_NAME_MAX or "/" in name:
            raise ValueError(f"run.phase: name must be a non-empty string of at most "
                             f"{PHASE_NAME_MAX} characters without '/', got {name!r:.60}, "
                             "e.g. run.phase('eval')")
        outer, self.current_phase = self.current_phase, name
        started = time.perf_counter_ns()
        try:
            yield
        finally:
            seconds = (time.perf_counter_ns() - started) * 1e-9
            self.phase_seconds[name] = self.phase_seconds.get(name, 0.0) + seconds
            self.current_phase = outer

    def log_phases(self, step: int, seconds: Mapping[str, float] | None = None) -> None:
        """Journal step `step`'s time by phase (one `phases` record): `seconds` (phase ->
        seconds; `labcoat.torch.time_phases` passes its own) plus what ``run.phase`` timed
        since the last record. Every rank journals its own (a straggler shows by phase)."""
        step = self._check_step(step, "log_phases")
        merged = {}
        for k, v in (seconds or {}).items():
            if type(v) is not float:  # a timer's floats need no check (nor its message, built
                v = _number(v, f"run.log_phases: phase {k!r} at step {step}")  # each step)
            merged[_text(k, "run.log_phases: phase name")] = round(v, 7)
        for name, value in self.phase_seconds.items():
            merged[name] = round(merged.get(name, 0.0) + value, 7)
        self.phase_seconds.clear()
        if merged:
            self._write({"kind": fmt.PHASES, "step": step, "s": merged})

    def _time_step(self, step: int) -> None:
        """Journal the wall time since the previous step, once per step (multi-rank)."""
        if self._timed_step is not None and step <= self._timed_step:
            return
        now = time.time()
        record: dict[str, Any] = {"kind": fmt.STEP, "step": step}
        if self._timed_step is not None:
            record["step_s"] = (now - self._timed_at) / (step - self._timed_step)
        self._timed_step, self._timed_at = step, now
        self._write(record)

    def log_items(
        self,
        step: int,
        task: str,
        item_ids: Sequence[Any],
        scores: Sequence[Any],
        *,
        variant: str = "",
    ) -> None:
        """Record per-item eval scores for `task` at `step` (kept for paired statistics).

        item_ids: (n,) stable ids of the eval items (str or int).
        scores: (n,) one number per item, e.g. 0/1 exact match.
        """
        step = self._check_step(step, "log_items")
        if not isinstance(task, str) or not task:
            raise ValueError(f"run.log_items: task must be a non-empty string, got {task!r}")
        _text(task, "run.log_items: task")
        if not isinstance(variant, str) or len(variant) > TEXT_MAX:
            raise ValueError(f"run.log_items: variant must be a string of at most {TEXT_MAX} "
                             f"characters, got {variant!r:.60}")
        ids = [_text(str(i), f"run.log_items: an item id of task {task!r}")
               for i in _as_list(item_ids, f"run.log_items: item_ids of task {task!r}")]
        raw_scores = _as_list(scores, f"run.log_items: scores of task {task!r}")
        if len(ids) != len(raw_scores):
            raise ValueError(
                f"run.log_items: task {task!r} has {len(ids)} item ids but "
                f"{len(raw_scores)} scores; pass one score per item"
            )
        values = [
            _number(s, f"run.log_items: score of item {i!r} in task {task!r}")
            for i, s in zip(ids, raw_scores, strict=True)
        ]
        if len(set(ids)) != len(ids):
            raise ValueError(f"run.log_items: task {task!r} has repeated item ids")
        if self.rank > 0:
            return  # rank 0's eval items stand for the group
        self._write(
            {
                "kind": fmt.ITEMS,
                "step": step,
                "task": task,
                "variant": variant,
                "items": ids,
                "scores": values,
            }
        )
        again = self._repeats.seen_items((task, variant), step, ids)
        if again:
            shown = f"task {task!r}" + (f" (variant {variant!r})" if variant else "")
            self._overwritten(shown, step, f"the later scores of its {again} repeated "
                              "item(s)", count=again)

    def event(
        self,
        event: str,
        message: str = "",
        *,
        level: str = "info",
        step: int | None = None,
        **data: Any,
    ) -> None:
        """Record a structured event (an alert, a checkpoint, a note) in the journal."""
        if level not in LEVELS:
            raise ValueError(f"run.event: level {level!r} is not one of {', '.join(LEVELS)}")
        self._write(
            {
                "kind": fmt.EVENT,
                "step": self.step if step is None else _valid_step(step, "event"),
                "level": level,
                "event": event,
                "message": message,
                "data": data,
            }
        )

    def heartbeat(self) -> None:
        """Say "still alive" during long phases that log nothing (e.g. a slow eval), so the
        runner's hang detection (heartbeat_timeout) does not restart a healthy trial."""
        self._write({"kind": fmt.HEARTBEAT, "step": self.step})

    def finish(self, status: str = "done") -> None:
        """Close the journal. An ad-hoc run says where it was recorded; the next read
        command (`labcoat status`, `report`, `ui`) ingests it into the store."""
        if self.finished:
            return
        self.finished = True
        self._summarize_repeats()
        self._write({"kind": fmt.FINISH, "status": status})
        self._writer.close()
        if self.adhoc and self.rank == 0:  # rank 0's journal stands for a rank group
            print(f"labcoat: ad-hoc run {self.experiment}/{self.trial} ({status}) recorded in "
                  f"{self.journal}; see it with `labcoat status {self.experiment}`",
                  file=sys.stderr)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.finish("failed" if exc_type else "done")

    def _check_step(self, step: Any, where: str) -> int:
        _valid_step(step, where)
        if self.finished:
            raise RuntimeError(
                f"run.{where} after run.finish(); start a new run with labcoat.init()"
            )
        self.step = int(step)
        return self.step

    def _overwritten(self, what: str, step: int, kept: str, count: int = 1) -> None:
        """Say, the first time per metric or task, that a value logged again at a step this
        run already logged replaces the earlier one in the store (the journal keeps both)."""
        if self._repeats.count(what, count) > count:
            return  # said once; finish() sums the rest
        message = (f"{what} was logged again at step {step}: the store keeps {kept} (this "
                   "run's journal keeps both)")
        print(f"labcoat: warning: {message}. Log each step once (a per-epoch counter that "
              "restarts at 0 overwrites: use a global step) or give the second series its "
              f"own name; further repeats are counted at the end. Journal: {self.journal}",
              file=sys.stderr, flush=True)
        self.event(Events.LOG_OVERWRITTEN, message, level="warning", step=step,
                   rule=Events.LOG_OVERWRITTEN, severity="warning", what=what, count=count)

    def _summarize_repeats(self) -> None:
        """One line and event at the end for metrics or tasks repeated more than once."""
        counts = {k: n for k, n in self._repeats.counts.items() if n > 1}
        if not counts:
            return
        listed = ", ".join(f"{k} {n} times" for k, n in counts.items())
        message = (f"in all, values were logged again at a step already logged (the store "
                   f"keeps the later one): {listed}")
        print(f"labcoat: warning: {message}; journal: {self.journal}", file=sys.stderr,
              flush=True)
        self.event(Events.LOG_OVERWRITTEN, message, level="warning", rule=Events.LOG_OVERWRITTEN,
                   severity="warning", counts=counts)

    def _write(self, record: dict[str, Any]) -> None:
        record["time"] = time.time()
        if self.world > 1:
            record["rank"] = self.rank  # journals of a rank group carry their rank id
        self._writer.write(record)


def init(
    *,
    experiment: str | None = None,
    arm: str | None = None,
    seed: int | None = None,
    params: dict[str, Any] | None = None,
    total_steps: int | None = None,
    heartbeat_timeout: float | None = None,
) -> Run:
    """Start recording this process as a trial.

    Under ``labcoat run`` the identity comes from the runner and the arguments
    (other than `total_steps`, used for the ETA, and `heartbeat_timeout`, the
    seconds without any logged line after which the runner restarts this trial
    as hung) are ignored. Elsewhere they name an ad-hoc experiment (default:
    ``adhoc-<script name>``) and trial.
    """
    _check_init(total_steps, heartbeat_timeout)
    journal = os.environ.get(env.JOURNAL)
    if journal:
        rank, world = _rank_and_world()
        run = Run(
            journal=rank_journal(journal, rank),
            experiment=os.environ.get(env.EXPERIMENT, ""),
            trial=os.environ.get(env.TRIAL, ""),
            attempt=_from_env(env.ATTEMPT, int, "1"),
            arm=os.environ.get(env.ARM),
            seed=_from_env(env.SEED, int, None),
            params=_from_env(env.PARAMS, json.loads, "{}"),
            adhoc=False,
            total_steps=total_steps,
            heartbeat_timeout=heartbeat_timeout,
            rank=rank,
            world=world,
        )
        _say_overridden(run, {"experiment": experiment, "arm": arm, "seed": seed}, params)
        return run
    _check_identity(experiment, arm, seed)
    if params is not None and not isinstance(params, Mapping):
        raise ValueError(f"labcoat.init: params must be a dict of the run's settings, got "
                         f"{params!r:.60} ({type(params).__name__}), e.g. params={{'lr': 0.1}}")
    return _adhoc_run(experiment, arm, seed, dict(params or {}), total_steps)


def _valid_step(step: Any, where: str) -> int:
    """`step` as an int the store keeps, or a ValueError naming `where`."""
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise ValueError(f"run.{where}: step must be a non-negative integer, got {step!r:.60}")
    if step > STEP_MAX:
        raise ValueError(f"run.{where}: step {step} is above 2**63 - 1, the largest the "
                         "store keeps; log a step count (or tokens seen) that fits")
    return int(step)


def _from_env(name: str, parse: Any, default: str | None) -> Any:
    """A variable `labcoat run` sets for its trial, parsed; a ValueError naming it if it was
    set by hand to something else (LABCOAT_JOURNAL set makes this process a trial)."""
    raw = os.environ.get(name) or default
    try:
        return None if raw is None else parse(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r:.60} is not what `labcoat run` sets; this process "
                         f"is a trial because {env.JOURNAL} is set: unset both to record an "
                         "ad-hoc run") from None


def _check_init(total_steps: Any, heartbeat_timeout: Any) -> None:
    if total_steps is not None and (isinstance(total_steps, bool) or not isinstance(
            total_steps, numbers.Integral) or not 0 < total_steps <= STEP_MAX):
        raise ValueError(f"labcoat.init: total_steps={total_steps!r:.60} must be a positive "
                         "integer (the steps the run will log, for the ETA) or None")
    if heartbeat_timeout is not None and (
            isinstance(heartbeat_timeout, bool) or not isinstance(heartbeat_timeout, numbers.Real)
            or not 0 < heartbeat_timeout < math.inf):
        raise ValueError(f"labcoat.init: heartbeat_timeout={heartbeat_timeout!r:.60} must be "
                         "a positive number of seconds or None")


def _check_identity(experiment: Any, arm: Any, seed: Any) -> None:
    """An ad-hoc run's names and seed as the store and every verb can address them."""
    for flag, value, longest in (("experiment", experiment, NAME_MAX), ("arm", arm, TEXT_MAX)):
        if value not in (None, "") and not (isinstance(value, str) and NAME.fullmatch(value)
                                      and len(value) <= longest):
            raise ValueError(
                f"labcoat.init: {flag}={value!r:.60} is not a name labcoat can record: use "
                f"letters, digits, '.', '_' and '-' (starting with a letter or digit, at most "
                f"{longest} characters), e.g. {flag}={_suggest(value)!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or abs(seed) > STEP_MAX):
        raise ValueError(f"labcoat.init: seed={seed!r:.60} must be an integer (a 64-bit one) "
                         "or None")


def _suggest(value: Any) -> str:
    """`value` made a valid name: other characters become '-' (e.g. team/exp1 -> team-exp1)."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", str(value)).strip("-._")
    return (text or "my-experiment")[:NAME_MAX]


def _say_overridden(run: Run, given: dict[str, Any], params: dict[str, Any] | None) -> None:
    """Under `labcoat run` the design names the trial: say which init() arguments it
    overrode (one stderr line and a journal event), rather than drop them without a word."""
    theirs = {"experiment": run.experiment, "arm": run.arm, "seed": run.seed}
    differ = [f"{k}={v!r} (the runner's: {theirs[k]!r})" for k, v in given.items()
              if v is not None and v != theirs[k]]
    mine = params or {}
    differ += [f"params[{k!r}]={v!r:.40} (the runner's: {run.params[k]!r:.40})"
               for k, v in mine.items() if k in run.params and not _same(v, run.params[k])]
    extra = [k for k in mine if k not in run.params]
    if extra:
        differ.append(f"params {', '.join(map(repr, extra[:8]))}"
                      f"{' ...' if len(extra) > 8 else ''} (not in the design: not recorded)")
    if not differ:
        return
    message = (f"labcoat.init under `labcoat run`: the design names this trial "
               f"({run.experiment}/{run.trial}), so the runner's values win over "
               f"{'; '.join(differ)}; set them in the design instead")
    print(f"labcoat: warning: {message}", file=sys.stderr, flush=True)
    run.event(Events.INIT_OVERRIDDEN, message, level="warning")


def _same(mine: Any, theirs: Any) -> bool:
    """Equal as the journal would record them (numpy scalars, floats within rounding)."""
    if hasattr(mine, "item") and not isinstance(mine, numbers.Number | str):
        mine = mine.item()
    if isinstance(mine, numbers.Real) and isinstance(theirs, numbers.Real):
        return math.isclose(float(mine), float(theirs), rel_tol=1e-6)
    return mine == theirs


def _rank_and_world() -> tuple[int, int]:
    """This process's rank and the group's size, from torchrun's RANK and WORLD_SIZE."""
    try:
        world = int(os.environ.get("WORLD_SIZE") or 1)
        rank = int(os.environ.get("RANK") or 0)
    except ValueError:
        raise ValueError(
            f"RANK={os.environ.get('RANK')!r} / WORLD_SIZE={os.environ.get('WORLD_SIZE')!r} "
            "are not integers; they are set by torchrun"
        ) from None
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"RANK={rank} is not within WORLD_SIZE={world}")
    return rank, world


def _script_name() -> str:
    """What names an ad-hoc experiment: the script's file name; for `python -m pkg` (which
    runs pkg/__main__.py) the package's; "session" for `python -c` and an interactive one."""
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 in ("", "-c"):
        return "session"
    path = Path(argv0)
    return (path.parent.name if path.stem == "__main__" else path.stem) or "session"


def _adhoc_run(
    experiment: str | None,
    arm: str | None,
    seed: int | None,
    params: dict[str, Any],
    total_steps: int | None,
) -> Run:
    experiment = experiment or _suggest(f"adhoc-{_script_name()}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    rank, world = _rank_and_world()
    # The ranks of one torchrun group share a directory named for its run id (their
    # clocks and pids differ); rank 0's journal alone becomes the ad-hoc trial.
    group = os.environ.get("TORCHELASTIC_RUN_ID") if world > 1 else None
    # A process's second run gets its own id (one second can start two; they used to
    # share a journal).
    n = next(_RUN_NUMBERS)
    run_id = f"torchrun-{group}" if group else f"{stamp}-{os.getpid()}{f'-{n}' if n else ''}"
    trial = f"{arm or 'main'}-s{seed}" if seed is not None else f"run-{run_id}"
    journal = env.home() / "adhoc" / experiment / trial / run_id / JOURNAL_NAME
    if rank == 0:
        _say_if_rerun(journal.parent)
    try:
        run = Run(
            journal=rank_journal(journal, rank) if group else journal,
            experiment=experiment,
            trial=trial,
            attempt=0,
            arm=arm or "main",
            seed=seed,
            params=params,
            adhoc=True,
            total_steps=total_steps,
            rank=rank if group else 0,
            world=world if group else 1,
        )
    except OSError as e:  # one line, not mkdir's chain of every missing parent
        raise OSError(
            f"labcoat.init: cannot write this run's journal under {env.HOME}={env.home()} "
            f"({e.strerror or e}: {e.filename or journal}); set {env.HOME} to a writable "
            "directory") from None
    atexit.register(_finish_at_exit, run)
    return run


_RUN_NUMBERS = itertools.count()


def _say_if_rerun(run_dir: Path) -> None:
    """An ad-hoc trial (same experiment, arm and seed) run again becomes its next attempt,
    whose values replace the earlier runs' at the steps it logs: say so before it starts."""
    try:
        earlier = [d for d in run_dir.parent.iterdir() if d.name != run_dir.name]
    except OSError:  # not there yet: the first run of this trial
        return
    if earlier:
        experiment, trial = run_dir.parent.parent.name, run_dir.parent.name
        print(f"labcoat: warning: ad-hoc trial {trial} of {experiment} was run before "
              f"({len(earlier)} run(s) under {run_dir.parent}); this run is its next "
              "attempt: its values replace theirs in the store at every step it logs "
              "(steps it does not reach keep theirs; their journals stay). Right for a "
              "resume; to keep both instead, give this run another seed or arm, e.g. "
              "labcoat.init(arm='lr-0.1', ...)", file=sys.stderr, flush=True)


def _finish_at_exit(run: Run) -> None:
    # sys.last_value is set when an uncaught exception ended the script.
    run.finish("failed" if getattr(sys, "last_value", None) is not None else "done")


def _as_list(values: Any, where: str) -> list[Any]:
    """A sequence of values as a list; a string or a scalar is a ValueError naming `where`
    (list("abc") would silently make three items)."""
    if hasattr(values, "tolist"):  # numpy arrays and torch tensors, without importing either
        values = values.tolist()
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise ValueError(f"{where} must be a list (or array) with one entry per item, got "
                         f"{values!r:.60} ({type(values).__name__})")
    return list(values)


def _number(value: Any, where: str) -> float:
    """`value` as a float, or a ValueError naming `where` (never a silent NaN)."""
    if isinstance(value, bool | str | bytes) or value is None:
        raise ValueError(f"{where} is {value!r} ({type(value).__name__}); log numbers only")
    if hasattr(value, "item") and not isinstance(value, numbers.Number):
        try:
            value = value.item()  # 0-d tensors and numpy scalars
        except (ValueError, RuntimeError):  # more than one element
            shape = tuple(getattr(value, "shape", ()))
            raise ValueError(f"{where} is an array of shape {shape}, not one number; log "
                             "its mean (or one metric per element)") from None
    try:
        number = float(value)
    except OverflowError:
        power = int(abs(int(value)).bit_length() * math.log10(2))
        raise ValueError(f"{where} is an integer of about 1e{power}, beyond a float's range "
                         "(1.8e308); log it scaled (e.g. in millions) or as its log10"
                         ) from None
    except (TypeError, ValueError):
        raise ValueError(
            f"{where} is {value!r:.60} ({type(value).__name__}); log numbers only"
        ) from None
    return number


def _text(name: Any, where: str) -> str:
    """`name` if it is a string the store keeps whole, else a ValueError naming `where`."""
    if not isinstance(name, str) or not name or len(name) > TEXT_MAX:
        raise ValueError(f"{where} must be a non-empty string of at most {TEXT_MAX} "
                         f"characters, got {name!r:.60} ({len(str(name))} characters); "
                         "use a shorter stable name (an index or a hash for an item)")
    return name


class _Repeats:
    """Which steps this run logged, per metric and per eval task, to tell when a value is
    logged again at a step it already has (the store keeps one value per step).

    A metric's steps are a sorted array of 64-bit ints (8 bytes a point; a step past the
    last, the usual case, is one comparison and an append). Items: their ids per step.
    """

    def __init__(self) -> None:
        self.steps: dict[str, array] = {}
        self.items: dict[tuple[str, str, int], set[str]] = {}
        self.counts: dict[str, int] = {}

    def repeated(self, names: Iterable[str], step: int) -> list[str]:
        """Record `step` for each of `names`; return those that already had it."""
        again = []
        for name in names:
            steps = self.steps.get(name)
            if steps is not None and step > steps[-1]:
                steps.append(step)  # the usual case
            elif steps is None:
                self.steps[name] = array("q", [step])
            elif steps[i := bisect_left(steps, step)] == step:
                again.append(name)
            else:
                steps.insert(i, step)
        return again

    def seen_items(self, task: tuple[str, str], step: int, ids: list[str]) -> int:
        """How many of `ids` this run already logged for `task` at `step`."""
        known = self.items.setdefault((*task, step), set())
        again = len(known.intersection(ids))
        known.update(ids)
        return again

    def count(self, what: str, n: int) -> int:
        self.counts[what] = self.counts.get(what, 0) + n
        return self.counts[what]
