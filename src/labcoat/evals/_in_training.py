"""Evaluation inside the training loop: a fixed stratified subset on a cadence, the full suite
at the end, within a time budget.

The subset is the first k items of the suite's seeded stratified order
(`EvalSuite.stratified_order`), the same k items at every evaluation, so any
two evaluations are paired item by item. k is chosen once, at the first
evaluation, as the largest size whose measured cost fits the budget:

    k = budget * (training seconds per `every` steps) / (eval seconds per item)

with both rates measured in this run (a probe of the first items times the
engine; the steps before the first evaluation time the training), never
fewer than one item per task, never more than the suite. An explicit
`subset_size` replaces the budget, and explicit `subset_items` (e.g. chosen
by `choose_subset` to keep the ranking, read with `load_subset_file`)
replace the stratified order. The final evaluation scores the whole
suite whatever it costs (it is the result). Each evaluation logs every item
(`run.log_items`), the macro and per-task means and ``eval/items``. Timings
are not metrics (a resumed run must log the same values as an uninterrupted
one): an ``eval.subset`` event records the sizing (seconds per item, training
seconds per interval, budget, size) and an ``eval.budget`` event at the last
step the evaluation seconds and their fraction of training time, so the
budget can be checked afterwards.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from labcoat.errors import LabcoatError
from labcoat.evals._engine import EvalEngine, EvalResult
from labcoat.journal import Events

if TYPE_CHECKING:
    from labcoat.sdk import Run

DEFAULT_BUDGET = 0.05  # at most 5% of training time goes to in-training evaluation
PROBE_ITEMS = 64  # items timed to measure the per-item cost (the subset's first items)


class InTrainingEval:
    """Call `after_step(step)` after every optimizer step; it evaluates when due.

    every: evaluate every N steps (0 or None: only at the end).
    total_steps: the last step, evaluated on the full suite.
    budget: fraction of training time for in-training evaluations (0 or None:
        the full suite at every evaluation, no budget).
    subset_size: a fixed number of items instead of the budget.
    subset_items: (task, item id) pairs to evaluate on the cadence instead of a
        budget-sized stratified subset.
    seed: the stratified order's seed (keep it fixed across the runs you compare).
    start_step: the step training starts after (a resumed run's restored step).
    eval_mode: passed to `EvalEngine.score`.
    clock: seconds, monotonic (`time.perf_counter`).
    """

    def __init__(self, engine: EvalEngine, run: Run | None, *, every: int | None,
                 total_steps: int, budget: float | None = DEFAULT_BUDGET,
                 subset_size: int | None = None,
                 subset_items: Sequence[tuple[str, str]] | None = None, seed: int = 0,
                 start_step: int = 0,
                 eval_mode: bool = True,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if budget is not None and not 0 <= budget < 1:
            raise LabcoatError(f"eval budget {budget} must be a fraction of training time in "
                               "[0, 1), e.g. 0.05 (0: no budget, the full suite every time)")
        if subset_size is not None and subset_size < 1:
            raise LabcoatError(f"eval subset size {subset_size} must be >= 1")
        if every is not None and every < 0:
            raise LabcoatError(f"eval every {every} must be >= 0 (0: at the end only)")
        self.engine, self.run = engine, run
        self.every, self.total_steps = every or 0, total_steps
        self.budget, self.seed, self.eval_mode, self.clock = budget or 0.0, seed, eval_mode, clock
        self.order = engine.suite.stratified_order(seed)
        if subset_items is not None:
            self.order = _indices(engine, subset_items)
            subset_size = len(self.order)
        self.subset_size = None if subset_size is None else min(subset_size, len(self.order))
        self.start_step = start_step
        self.started = clock()
        self.eval_seconds = 0.0
        self.results: dict[int, EvalResult] = {}

    def due(self, step: int) -> bool:
        return step == self.total_steps or bool(self.every and step % self.every == 0)

    def after_step(self, step: int, *, eval_mode: bool | None = None) -> EvalResult | None:
        """Evaluate if `step` is due: the full suite at the last step, else the subset."""
        if not self.due(step):
            return None
        mode = self.eval_mode if eval_mode is None else eval_mode
        if step == self.total_steps:
            return self._evaluate(step, None, mode)
        if self.subset_size is None:
            return self._first_evaluation(step, mode)
        return self._evaluate(step, self.order[: self.subset_size], mode)

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs to evaluate the same subset (for a Checkpointer)."""
        return {"subset_size": self.subset_size, "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("seed") != self.seed:
            raise LabcoatError(f"checkpoint evaluated with eval seed {state.get('seed')}, this "
                               f"run uses {self.seed}; resume with the same seed")
        self.subset_size = state.get("subset_size")

    def _first_evaluation(self, step: int, eval_mode: bool) -> EvalResult:
        """Time a probe of the first items, size the subset to the budget, score the rest.

        The probe's items are the subset's first items, so their scores are used,
        not thrown away; tokenizing (a one-off) is kept out of the per-item cost.
        """
        n = len(self.order)
        if not self.budget:
            self.subset_size = n
            return self._evaluate(step, self.order, eval_mode)
        training = max(self.clock() - self.started - self.eval_seconds, 1e-9)
        per_interval = training / max(step - self.start_step, 1) * self.every
        self.engine.prepare()
        probe = self._score(self.order[: min(PROBE_ITEMS, n)], eval_mode)
        cost = probe.seconds / len(probe.items)
        floor = len(self.engine.suite.tasks)
        size = math.floor(self.budget * per_interval / max(cost, 1e-12))
        self.subset_size = int(min(n, max(floor, size)))
        if self.run is not None:
            self.run.event(Events.EVAL_SUBSET, f"in-training evals score {self.subset_size} of {n} "
                           f"items ({cost * 1e3:.3g} ms per item, {self.budget:.0%} budget)",
                           step=step, items=self.subset_size, suite_items=n,
                           seconds_per_item=cost, training_seconds_per_interval=per_interval,
                           budget=self.budget)
        if self.subset_size <= len(probe.items):
            return self._log(step, _head(probe, self.subset_size))
        rest = self._score(self.order[len(probe.items): self.subset_size], eval_mode)
        return self._log(step, _concat(probe, rest))

    def _evaluate(self, step: int, indices: np.ndarray | None, eval_mode: bool) -> EvalResult:
        return self._log(step, self._score(indices, eval_mode))

    def _score(self, indices: np.ndarray | None, eval_mode: bool) -> EvalResult:
        """engine.score, timed by this evaluator's clock (the seconds it reports too)."""
        t0 = self.clock()
        result = self.engine.score(indices, eval_mode=eval_mode)
        result.seconds = self.clock() - t0
        self.eval_seconds += result.seconds
        return result

    def _log(self, step: int, result: EvalResult) -> EvalResult:
        result.log(self.run, step, **{"eval/items": float(len(result.items))})
        self.results[step] = result
        if step == self.total_steps and self.run is not None:
            training = max(self.clock() - self.started - self.eval_seconds, 1e-9)
            self.run.event(Events.EVAL_BUDGET, f"evaluation took {self.eval_seconds:.3g} s, "
                           f"{self.eval_seconds / training:.1%} of training time (the final "
                           "full evaluation included)", step=step,
                           eval_seconds=self.eval_seconds, training_seconds=training,
                           fraction=self.eval_seconds / training)
        return result


def _head(result: EvalResult, k: int) -> EvalResult:
    return EvalResult(result.suite, result.metric, result.tasks[:k], result.items[:k],
                      result.scores[:k], result.indices[:k], result.seconds)


def _concat(a: EvalResult, b: EvalResult) -> EvalResult:
    return EvalResult(a.suite, a.metric, a.tasks + b.tasks, a.items + b.items,
                      np.concatenate([a.scores, b.scores]), np.concatenate([a.indices, b.indices]),
                      a.seconds + b.seconds)


def _indices(engine: EvalEngine, keys: Sequence[tuple[str, str]]) -> np.ndarray:
    position = {(item.task, item.id): i for i, item in enumerate(engine.suite.items)}
    missing = [k for k in keys if tuple(k) not in position]
    if missing or not keys:
        raise LabcoatError(f"eval subset: {len(missing)} of {len(keys)} items are not in suite "
                           f"{engine.suite.name!r} (first: task {missing[0][0]!r}, item "
                           f"{missing[0][1]!r}); choose the subset from results of this suite"
                           if missing else "eval subset: no items")
    return np.asarray([position[tuple(k)] for k in keys], dtype=np.int64)


def load_subset_file(path: str | Path) -> list[tuple[str, str]]:
    """(task, item) pairs from a `labcoat evals subset --out` file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LabcoatError(f"{path}: no such file; write one with `labcoat evals subset ... "
                           "--out FILE`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise LabcoatError(f"{path}: not a readable JSON subset file ({e})") from None
    if not isinstance(data, dict) or data.get("format") != "labcoat.eval_subset":
        raise LabcoatError(f"{path}: not a labcoat eval subset (format labcoat.eval_subset); "
                           "write one with `labcoat evals subset ... --out FILE`")
    if data.get("version") != 1:
        raise LabcoatError(f"{path}: eval subset version {data.get('version')!r}; this labcoat "
                           "reads version 1")
    try:
        return [(str(d["task"]), str(d["item"])) for d in data["items"]]
    except (KeyError, TypeError):
        raise LabcoatError(f"{path}: items must be a list of {{\"task\", \"item\"}}") from None
