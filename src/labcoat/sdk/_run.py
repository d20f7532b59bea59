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
import json
import math
import numbers
import os
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from labcoat import environment as env
from labcoat import journal as fmt
from labcoat.journal import JOURNAL_NAME, LEVELS, VERSION, rank_journal
from labcoat.sdk._journal import JournalWriter


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
            name: _number(value, f"run.log: metric {name!r} at step {step}")
            for name, value in metrics.items()
        }
        if self.world > 1:
            self._time_step(step)
            if self.rank > 0:
                return  # rank 0's metrics stand for the group
        self._write({"kind": fmt.LOG, "step": step, "metrics": values})

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
        ids = [str(i) for i in _as_list(item_ids)]
        raw_scores = _as_list(scores)
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
                "step": self.step if step is None else step,
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
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
            raise ValueError(f"run.{where}: step must be a non-negative integer, got {step!r}")
        if self.finished:
            raise RuntimeError(
                f"run.{where} after run.finish(); start a new run with labcoat.init()"
            )
        self.step = int(step)
        return self.step

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
    journal = os.environ.get(env.JOURNAL)
    if journal:
        rank, world = _rank_and_world()
        return Run(
            journal=rank_journal(journal, rank),
            experiment=os.environ.get(env.EXPERIMENT, ""),
            trial=os.environ.get(env.TRIAL, ""),
            attempt=int(os.environ.get(env.ATTEMPT, "1")),
            arm=os.environ.get(env.ARM),
            seed=int(os.environ[env.SEED]) if os.environ.get(env.SEED) else None,
            params=json.loads(os.environ.get(env.PARAMS) or "{}"),
            adhoc=False,
            total_steps=total_steps,
            heartbeat_timeout=heartbeat_timeout,
            rank=rank,
            world=world,
        )
    return _adhoc_run(experiment, arm, seed, params or {}, total_steps)


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


def _adhoc_run(
    experiment: str | None,
    arm: str | None,
    seed: int | None,
    params: dict[str, Any],
    total_steps: int | None,
) -> Run:
    script = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else "session"
    experiment = experiment or f"adhoc-{script or 'session'}"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    rank, world = _rank_and_world()
    # The ranks of one torchrun group share a directory named for its run id (their
    # clocks and pids differ); rank 0's journal alone becomes the ad-hoc trial.
    group = os.environ.get("TORCHELASTIC_RUN_ID") if world > 1 else None
    run_id = f"torchrun-{group}" if group else f"{stamp}-{os.getpid()}"
    trial = f"{arm or 'main'}-s{seed}" if seed is not None else f"run-{run_id}"
    journal = env.home() / "adhoc" / experiment / trial / run_id / JOURNAL_NAME
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
    atexit.register(_finish_at_exit, run)
    return run


def _finish_at_exit(run: Run) -> None:
    # sys.last_value is set when an uncaught exception ended the script.
    run.finish("failed" if getattr(sys, "last_value", None) is not None else "done")


def _as_list(values: Any) -> list[Any]:
    if hasattr(values, "tolist"):  # numpy arrays and torch tensors, without importing either
        values = values.tolist()
    return list(values)


def _number(value: Any, where: str) -> float:
    """`value` as a float, or a ValueError naming `where` (never a silent NaN)."""
    if isinstance(value, bool | str | bytes) or value is None:
        raise ValueError(f"{where} is {value!r} ({type(value).__name__}); log numbers only")
    if hasattr(value, "item") and not isinstance(value, numbers.Number):
        value = value.item()  # 0-d tensors and numpy scalars
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{where} is {value!r} ({type(value).__name__}); log numbers only"
        ) from None
    if isinstance(value, numbers.Integral) and not math.isfinite(number):
        raise ValueError(f"{where} overflows a float")
    return number
