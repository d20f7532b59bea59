"""How often to checkpoint: the Young/Daly interval, bounded by an overhead budget.

A failure loses the work since the last checkpoint (on average half an
interval) and every checkpoint costs C seconds of stalled training. The
interval that minimizes the expected total waste is, to first order,

    interval = sqrt(2 * C * MTBF)

(Young 1974, "A first order approximation to the optimum checkpoint
interval"; Daly 2006, "A higher order estimate of the optimum checkpoint
interval for restart dumps", eq. 1). Two bounds keep it honest:

- overhead budget: C / interval <= budget (default 2% of training time), so
  interval >= C / budget. It binds when C > 2 * MTBF * budget**2 (69 s for the
  24 h default MTBF), i.e. for slow saves or failure-prone machines;
- write time: interval >= the background write time, so a save normally
  finds the previous one finished (at most one is in flight, and waiting for
  it would stall training).

C is the measured training stall per save (an exponential moving average;
the first save happens right after the first step to measure it), MTBF comes
from the runner (``LABCOAT_MTBF_SECONDS``, default 24 h as a prior), and the
interval in seconds becomes steps through the measured time per step.

A young run saves more often than that: until the Young/Daly interval is
reached, a save is also due whenever the step number has doubled since the
last save (steps 1, 2, 4, 8, ...), so a run of any length, known or not, gets
about log2(steps) checkpoints and a failure or a second run loses at most
half of it. These warm-up saves must stay cheap: their stalls so far plus
this one may not exceed the overhead budget of the training time so far plus
WARMUP_ALLOWANCE_S. The allowance is what lets a 200-step script of a
fraction of a second (C ~ 5 ms, 0.7 ms/step: 2% alone would allow no second
save) keep a recent checkpoint; for a slow save (C of a minute) it is noise
and the 2% budget rules. Recording for replay (``replay_budget``) has no
warm-up: its budget already sets how dense checkpoints are.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

DEFAULT_MTBF_S = 24 * 3600.0  # a prior when the runner gives none (the runner uses it too)
DEFAULT_OVERHEAD_BUDGET = 0.02
EMA_WEIGHT = 0.3  # weight of the newest measurement: adapts within a few saves, damps noise
WARMUP_ALLOWANCE_S = 1.0  # stall seconds the warm-up saves may spend beyond the budget

Bound = Literal["fixed", "first save", "young-daly", "overhead budget", "write time", "unmeasured",
                "replay budget"]


def young_daly_interval(cost_s: float, mtbf_s: float, overhead_budget: float,
                        write_s: float = 0.0) -> tuple[float, Bound]:
    """The checkpoint interval in seconds and which term set it.

    cost_s: C, seconds training is stalled per checkpoint; mtbf_s: mean time
    between failures; overhead_budget: the largest acceptable C / interval;
    write_s: seconds a (background) write takes.
    """
    if cost_s < 0 or write_s < 0 or not mtbf_s > 0 or not 0 < overhead_budget <= 1:
        raise ValueError(f"invalid interval inputs: cost_s={cost_s}, mtbf_s={mtbf_s}, "
                         f"overhead_budget={overhead_budget}, write_s={write_s}")
    terms: list[tuple[float, Bound]] = [
        (math.sqrt(2 * cost_s * mtbf_s), "young-daly"),
        (cost_s / overhead_budget, "overhead budget"),
        (write_s, "write time"),
    ]
    return max(terms, key=lambda term: term[0])


@dataclass(frozen=True)
class Policy:
    """The current checkpoint interval and the measurements behind it (``ckpt.policy``).

    mode: ``"fixed"`` (every N steps, as asked) or ``"young-daly"`` (measured).
    interval_steps: save when this many steps passed since the last save
        (None until the step time is measured).
    interval_s: the interval in seconds (None until measured; fixed: estimated).
    bound: which term set the interval (see `young_daly_interval`), ``"fixed"``,
        ``"first save"`` (no save measured yet: save now to measure C) or
        ``"unmeasured"`` (the time per step is not known yet).
    cost_s: C, the training stall per save (EMA), None before the first save.
    write_s: background write time per save (EMA). step_s: time per step (EMA).
    mtbf_s: mean time between failures used. overhead_budget: max C / interval.
    """

    mode: Literal["fixed", "young-daly"]
    interval_steps: int | None
    interval_s: float | None
    bound: Bound
    cost_s: float | None
    write_s: float | None
    step_s: float | None
    mtbf_s: float
    overhead_budget: float
    replay_budget: float | None = None  # recording for replay: (C + write) / interval bound

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        def s(x: float | None) -> str:
            return "?" if x is None else f"{x:.3g}s"

        if self.mode == "fixed":
            return f"every {self.interval_steps} steps (fixed)"
        if self.bound in ("first save", "unmeasured"):
            return f"{self.bound}: C={s(self.cost_s)}, step={s(self.step_s)}"
        formula = {"young-daly": f"sqrt(2*C*MTBF) = sqrt(2*{s(self.cost_s)}*{s(self.mtbf_s)})",
                   "overhead budget": f"C/budget = {s(self.cost_s)}/{self.overhead_budget:g}",
                   "replay budget": f"(C + write)/replay budget = ({s(self.cost_s)} + "
                                    f"{s(self.write_s)})/{self.replay_budget}",
                   "write time": f"write time {s(self.write_s)}"}[self.bound]
        return (f"every {self.interval_steps} steps = {s(self.interval_s)} ({formula}; "
                f"{s(self.step_s)}/step)")


class IntervalPolicy:
    """Decides `due(step)` from measurements fed in by the Checkpointer.

    every: a fixed interval in steps (saves at multiples of it), or None for
    the Young/Daly interval.
    """

    def __init__(self, *, every: int | None, mtbf_s: float, overhead_budget: float,
                 replay_budget: float | None = None) -> None:
        self.every = every
        # Recording for replay: denser checkpoints make replays shorter, so save as often as
        # the budget allows: (C + write) / interval = replay_budget (FLOR's adaptive
        # checkpointing keeps its overhead under a user-set fraction the same way).
        self.replay_budget = replay_budget
        self.mtbf_s = mtbf_s
        self.overhead_budget = overhead_budget
        self.cost_s: float | None = None
        self.write_s: float | None = None
        self.step_s: float | None = None
        self.last_saved: int | None = None  # step of the last save (or restore)
        self._last_seen: tuple[int, float] | None = None  # (step, time) of the last `due` call
        self._stalled = 0.0  # seconds of save stall since the last `due` call
        self.trained_s = 0.0  # training time this process measured (stalls excluded)
        self.stall_total_s = 0.0  # stall of every save of this process

    # --- measurements ---------------------------------------------------------------------------

    def saw_step(self, step: int, now: float | None = None) -> None:
        """Note that training reached `step` (once per step, from `should_save`)."""
        now = time.perf_counter() if now is None else now
        if self._last_seen is not None:
            prev_step, prev_time = self._last_seen
            if step > prev_step:
                # a save's stall is checkpoint cost, not training time
                trained = max(0.0, now - prev_time - self._stalled)
                self.trained_s += trained
                per_step = trained / (step - prev_step)
                self.step_s = _ema(self.step_s, per_step)
        self._last_seen = (step, now)
        self._stalled = 0.0

    def saved(self, step: int, stall_s: float) -> None:
        self.last_saved = step
        self.cost_s = _ema(self.cost_s, stall_s)
        self._stalled += stall_s
        self.stall_total_s += stall_s

    def wrote(self, write_s: float) -> None:
        self.write_s = _ema(self.write_s, write_s)

    # --- decisions -------------------------------------------------------------------------------

    def current(self) -> Policy:
        common = dict(cost_s=self.cost_s, write_s=self.write_s, step_s=self.step_s,
                      mtbf_s=self.mtbf_s, overhead_budget=self.overhead_budget,
                      replay_budget=self.replay_budget)
        if self.every is not None:
            seconds = None if self.step_s is None else self.every * self.step_s
            return Policy(mode="fixed", interval_steps=self.every, interval_s=seconds,
                          bound="fixed", **common)
        if self.cost_s is None:
            return Policy(mode="young-daly", interval_steps=1, interval_s=None,
                          bound="first save", **common)
        seconds, bound = young_daly_interval(self.cost_s, self.mtbf_s, self.overhead_budget,
                                             self.write_s or 0.0)
        if self.replay_budget is not None:
            # The whole save counts (stall + background write): on a machine whose cores are
            # busy the writer thread slows training as much as the stall does. Measured on
            # tinylm (benchmarks/replay.py), budgeting the stall alone overshot 7% to +119%.
            seconds = (self.cost_s + (self.write_s or 0.0)) / self.replay_budget
            bound = "replay budget"
        if self.step_s is None:
            return Policy(mode="young-daly", interval_steps=None, interval_s=seconds,
                          bound="unmeasured", **common)
        steps = max(1, math.ceil(seconds / self.step_s)) if self.step_s > 0 else 1
        return Policy(mode="young-daly", interval_steps=steps, interval_s=seconds, bound=bound,
                      **common)

    def due(self, step: int) -> bool:
        """Whether to save at `step`."""
        if self.every is not None:
            return step > 0 and step % self.every == 0  # aligned, so resumed runs save alike
        start = self.last_saved or 0
        if step <= start:
            return False
        policy = self.current()
        if policy.bound == "first save":
            return True  # measure C now, at a small step
        if policy.interval_steps is not None and step - start >= policy.interval_steps:
            return True
        return step >= 2 * start and self._warmup_affordable()

    def _warmup_affordable(self) -> bool:
        """Whether a warm-up save (the step doubled since the last save) fits the budget."""
        if self.replay_budget is not None or self.cost_s is None:
            return False
        spent = self.stall_total_s + self.cost_s
        return spent <= self.overhead_budget * self.trained_s + WARMUP_ALLOWANCE_S

    # --- persistence (in the manifest, so a resumed run needs no measuring save) ---------------

    def measurements(self) -> dict[str, float | None]:
        return {"cost_s": self.cost_s, "write_s": self.write_s, "step_s": self.step_s}

    def load_measurements(self, saved: dict[str, Any] | None) -> None:
        for name in ("cost_s", "write_s", "step_s"):
            value = (saved or {}).get(name)
            if isinstance(value, int | float) and value >= 0 and getattr(self, name) is None:
                setattr(self, name, float(value))


def _ema(old: float | None, new: float) -> float:
    return new if old is None else (1 - EMA_WEIGHT) * old + EMA_WEIGHT * new
