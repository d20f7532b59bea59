"""The optimizer itself: parameters it misses or holds twice, state reset or stepped elsewhere.

Rules (family ``updates``), judged at every full step (every ``grad_norm_every``
steps and near check steps, see `_guard`):

    optimizer.missing_param   error     a parameter gets gradients but is in no param group
                                        (parameters the model gains after watch() count:
                                        the table is refreshed at check steps)
    optimizer.duplicate_param error     a parameter listed in two param groups: updated twice
    optimizer.step_counter    error     optimizer state reset, or its step counter off
                                        (also at a resume: a run watched with start_step > 0
                                        whose optimizer state starts fresh at its first step)

Membership is read from the parameter table (`_context.ParamTable`), which is
refreshed whenever the param groups change shape and, at check steps, when the
model gained parameters after ``watch()``. The step counter is one parameter's
``state["step"]`` (Adam, AdamW...; optimizers without one are not judged): read
before and after each judged update (+1 in one step), between judged steps (light
steps between may each add one, never more) and across the run (never down).
"""

from __future__ import annotations

import torch

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Step
from labcoat.torch.guard._step_history import StepHistory


class OptimizerUse(Check):
    """Param-group membership, optimizer state size and step counter."""

    family = "updates"
    rules = {
        "optimizer.missing_param": Rule("error", "a parameter that gets gradients but is in no "
                                                 "param group (also one the model gained after "
                                                 "`watch()`, a module added or replaced: seen "
                                                 "at the next check step)"),
        "optimizer.step_counter": Rule("error", "optimizer state reset, reloaded from an "
                                                "earlier step, or its step counter not "
                                                "advancing by one per step (judged at every "
                                                "full step)"),
        "optimizer.duplicate_param": Rule("error", "a parameter listed in two param groups: "
                                                   "updated twice per step"),
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.history = StepHistory.of(ctx).use(self)
        self._once = self.history.once
        self.counter: tuple[int, float, int] | None = None  # (param, step count, after step)
        self.count_pre: tuple[int, float | None, int] | None = None  # (param, count, step)
        # before the update of the step in progress
        self.count_seen: tuple[int, float] | None = None  # (param, step count) at the last judged
        # step, before its update
        self.state_size = 0

    def on_pre_step(self, step: Step) -> None:
        grads, outside = step.grads, self.history.outside
        missing = [i for i in outside if grads[i] is not None] if outside else None
        if missing:
            self._once("optimizer.missing_param", "error", missing, step.number,
                       lambda names: f"{names} get gradients but are in no param group of the "
                                     "optimizer, so they never learn (module added after the "
                                     "optimizer was built? a filter dropped them?)")
        if self.ctx.params.twice:
            self._once("optimizer.duplicate_param", "error", self.ctx.params.twice, step.number,
                       lambda names: f"{names} are listed in more than one param group of the "
                                     "optimizer, so each step updates them twice (twice the lr, "
                                     "the other group's weight decay)")
        self._optimizer_state(step)

    def on_post_step(self, step: Step) -> None:
        self._counter_after(step)

    def _optimizer_state(self, step: Step) -> None:
        """State wiped between steps, or a step counter that moved on its own or went back."""
        optimizer = self.ctx.optimizer
        size = len(optimizer.state)
        if size < self.state_size:
            self.ctx.alert(
                "optimizer.step_counter", "error",
                f"the optimizer state shrank from {self.state_size} to {size} parameters between "
                f"steps {step.number - 1} and {step.number}: it was reset or replaced (Adam's "
                "moments and bias correction restart: a silent lr spike)",
                step=step.number, evidence={"before": self.state_size, "after": size})
        self.state_size = size
        if self.counter is not None and self.counter[2] < step.number:
            i, after, seen = self.counter  # light steps between may each add one (or none:
            gap = step.number - 1 - seen  # a step without this gradient), never more
            now = _step_counter(optimizer, self.ctx.params.tensors[i])
            if now is not None and (now > after + gap or (not gap and now != after)):
                self._counter_alert(step.number, i, after, now, "between steps")
        self._counter_back(step)
        self._counter_before(step)

    def _counter_back(self, step: Step) -> None:
        """A step counter never goes down: one that did was reset since the last judged step
        (a state wiped at a light step is rebuilt by that step's update, unseen by size)."""
        if not self.history.watched:
            return
        i = self.history.watched[0]
        now = _step_counter(self.ctx.optimizer, self.ctx.params.tensors[i])
        last, self.count_seen = self.count_seen, (None if now is None else (i, now))
        if now is not None and last is not None and last[0] == i and now < last[1]:
            self._counter_alert(step.number, i, last[1], now, "since the last judged step")

    def _counter_alert(self, number: int, i: int, before: float, after: float,
                       when: str) -> None:
        name = self.ctx.params.names[i]
        self.ctx.alert(
            "optimizer.step_counter", "error",
            f"the optimizer's step counter of {name} went from {before:g} to {after:g} "
            f"{when} (step {number}): the optimizer state was reset, replaced or stepped "
            "elsewhere",
            step=number, evidence={"param": name, "before": before, "after": after})

    def _counter_before(self, step: Step) -> None:
        """Every full step: one parameter's step counter before the update (None: no state)."""
        grads = step.grads
        i = self.counter[0] if self.counter is not None else None
        if i is None or i >= len(grads) or grads[i] is None:
            i = next((j for j in self.history.watched if grads[j] is not None), None)
        self.count_pre = None if i is None else (
            i, _step_counter(self.ctx.optimizer, self.ctx.params.tensors[i]), step.number)

    def _counter_after(self, step: Step) -> None:
        """Every full step: the counter read before the update must have grown by one (an
        optimizer stepped twice, a state restored or overwritten inside the step)."""
        pre, self.count_pre = self.count_pre, None
        if pre is None or pre[2] != step.number:
            return
        i, before, _ = pre
        now = _step_counter(self.ctx.optimizer, self.ctx.params.tensors[i])
        if now is None:
            return
        if before is not None and now != before + 1:
            self._counter_alert(step.number, i, before, now, "in one optimizer step")
        elif (before is None and now == 1 and self.ctx.config.start_step > 0
              and step.number == self.ctx.first_step):
            name = self.ctx.params.names[i]
            self.ctx.alert(
                "optimizer.step_counter", "error",
                f"the run resumed after step {self.ctx.config.start_step} (start_step) but the "
                f"optimizer's state of {name} started fresh at step {step.number} (step "
                "counter 1): the optimizer state was not restored (moments lost, bias "
                "correction restarts: a silent lr spike)",
                step=step.number, evidence={"param": name, "start_step":
                                            self.ctx.config.start_step, "after": now})
        self.counter = (i, now, step.number)


def _step_counter(optimizer: torch.optim.Optimizer, p: torch.Tensor) -> float | None:
    state = optimizer.state.get(p)
    if not state or "step" not in state:
        return None
    value = state["step"]
    return float(value) if isinstance(value, torch.Tensor) else float(value)

