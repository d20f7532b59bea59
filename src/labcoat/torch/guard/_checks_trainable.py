"""Trainability: parameters frozen by mistake, or trained although declared frozen.

Rules (family ``updates``):

    trainable.frozen          error     a trainable (or declared trainable) parameter is frozen
    trainable.unfrozen        error     a declared-frozen parameter changed

``trainable.frozen`` is judged at every full step (``grad_norm_every``) whose
``requires_grad`` flags differ from the last ones seen: a parameter of the
optimizer that was trainable when the run began and no longer requires grad
(a freeze between ``watch()`` and the first step is taken as intent: mmcv and
mmpretrain freeze stages in a hook before training), or one declared with
``trainable=[...]`` that is frozen or in no param group. ``trainable.unfrozen``
is judged at check steps, from the version counters and value norms the
update rules read (`_step_history`): a parameter declared with ``frozen=[...]``
that was written or moved.
"""

from __future__ import annotations

import numpy as np

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Step
from labcoat.torch.guard._step_history import StepHistory


class Trainable(Check):
    """``requires_grad`` flags at full steps; declared-frozen parameters at check steps."""

    family = "updates"
    rules = {
        "trainable.frozen": Rule("error", "a layer frozen by mistake after the first step (or "
                                          "declared trainable and not trained); a freeze "
                                          "between `watch()` and the first step is taken as "
                                          "intent"),
        "trainable.unfrozen": Rule("error", "a layer declared frozen that is being trained"),
    }

    periodic = frozenset({"on_post_step"})

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.history = StepHistory.of(ctx).use(self, on_grow=self._grown)
        self._once = self.history.once
        self.last_rg: list[bool] | None = None

    def _grown(self) -> None:
        self.last_rg = None

    def on_pre_step(self, step: Step) -> None:
        if step.requires_grad != self.last_rg:
            self._trainability(step)
            self.last_rg = step.requires_grad

    def on_post_step(self, step: Step) -> None:
        """Check step: declared-frozen parameters that were written (versions) or moved."""
        frozen = self.history.frozen
        if not (step.check and frozen):
            return
        pre, post, moved = step.versions_pre, step.versions_post, step.moved
        assert moved is not None
        frozen_moved = [i for i in frozen if pre[i] != post[i]]
        frozen_moved.extend(i for i in frozen if moved[i] and i not in frozen_moved)
        if frozen_moved:
            self._once("trainable.unfrozen", "error", frozen_moved, step.number,
                       lambda names: f"{names} are declared frozen but changed at step "
                                     f"{step.number}")

    def _trainability(self, step: Step) -> None:
        """A parameter frozen after the first judged step is a bug; one frozen between
        watch() and that step (mmcv/mmpretrain freeze stages in a hook before training) is
        the loop's intent."""
        params = self.ctx.params
        rg = np.array(step.requires_grad)
        if self.history.last is None and self.last_rg is None and self.ctx.steps_seen == 0:
            self.history.initially_trainable &= rg
        history = self.history
        froze = (params.judged & history.initially_trainable & ~rg & params.in_optimizer
                 & ~history.declared_frozen)
        if froze.any():
            self._once("trainable.frozen", "error", froze, step.number,
                       lambda names: f"{names} stopped requiring grad by step {step.number} "
                                     "although they are in the optimizer and were trainable: a "
                                     "layer frozen by mistake (declare frozen=[...] if intended)")
        declared = history.declared_trainable & ~(rg & params.in_optimizer)
        if declared.any():
            self._once("trainable.frozen", "error", declared, step.number,
                       lambda names: f"{names} are declared trainable but are frozen or not in "
                                     "the optimizer")
