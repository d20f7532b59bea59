"""Non-finite values: NaN/Inf in the loss, the gradients, the parameters, the optimizer state.

Rules (family ``numerics``):

    nonfinite.loss             critical  NaN/Inf loss (judged at once, also at a light step)
    nonfinite.grad             critical  NaN/Inf in a gradient, caught before the update
    nonfinite.param            critical  NaN/Inf in a parameter after the update
    nonfinite.optimizer_state  critical  NaN/Inf in optimizer state (e.g. Adam moments)

The gradients are judged from the total gradient norm the guard measures at
full steps (one NaN/Inf anywhere makes it non-finite; only then are the
gradients looked at one by one, to name them); the parameters from the
per-parameter norms of check steps; the optimizer state every ``state_every``
steps (and after the first), from one fused norm over its floating tensors.
A non-finite gradient norm or loss is not given to the ``grad_norm`` and
``loss`` rules' windows.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Record, Step
from labcoat.torch.guard._measure import Transfer


class NonFinite(Check):
    """NaN/Inf in what the guard measures anyway: loss, total gradient norm, parameter norms."""

    family = "numerics"
    rules = {
        "nonfinite.loss": Rule("critical", "NaN/Inf loss: overflow, log(0), a division by zero, "
                                           "a bad batch"),
        "nonfinite.grad": Rule("critical", "NaN/Inf gradients, caught before the update is "
                                           "applied"),
        "nonfinite.param": Rule("critical", "NaN/Inf parameters: a bad update was applied"),
        "nonfinite.optimizer_state": Rule("critical", "NaN/Inf optimizer state: every later "
                                                      "update is poisoned"),
    }

    periodic = frozenset({"queue_post", "on_post_step"})

    def on_pre_step(self, step: Step) -> None:
        if step.grad_norm is None or math.isfinite(step.grad_norm):  # not measured, or fine
            return
        params = self.ctx.params
        bad = [params.names[i] for i, g in enumerate(step.grads)
               if g is not None and params.judged[i]
               and not torch.isfinite(torch.linalg.vector_norm(g.float()))]
        self.ctx.alert(
            "nonfinite.grad", "critical",
            f"NaN/Inf gradient in {', '.join(bad[:5])}{' and more' if len(bad) > 5 else ''} "
            f"before optimizer step {step.number}; the update would poison the parameters",
            step=step.number, evidence={"params": bad[:20]})

    def queue_post(self, step: Step, xfer: Transfer) -> None:
        if step.number % self.ctx.config.state_every == 0 or self.ctx.steps_seen <= 1:
            tensors = self._state_tensors()
            if tensors:
                xfer.add_norms("numerics.state", tensors)

    def on_post_step(self, step: Step) -> None:
        norms = step.norms_post
        # plain Python over the norms (>= 0): no NumPy reduction on the cold post-step path
        if norms is not None and not math.isfinite(sum(norms.tolist())):
            bad = self.ctx.params.judged & ~np.isfinite(norms)
            if bad.any():
                self.ctx.alert(
                    "nonfinite.param", "critical",
                    f"NaN/Inf in {self.ctx.params.describe(bad)} after optimizer step "
                    f"{step.number}",
                    step=step.number, evidence={"params": self.ctx.params.listed(bad)})
        state = step.values.get("numerics.state")
        if state is not None and not np.isfinite(state).all():
            self.ctx.alert(
                "nonfinite.optimizer_state", "critical",
                f"NaN/Inf in the optimizer state after step {step.number} "
                f"({int((~np.isfinite(state)).sum())} of {state.size} state tensors): "
                "every later update is poisoned",
                step=step.number, evidence={"bad_tensors": int((~np.isfinite(state)).sum())})

    def _state_tensors(self) -> list[torch.Tensor]:
        out = []
        for state in self.ctx.optimizer.state.values():
            for key, value in state.items():
                if (key != "step" and isinstance(value, torch.Tensor)
                        and value.is_floating_point() and value.numel()):
                    out.append(value)
        return out

    def on_record(self, rec: Record) -> None:
        loss = rec.loss
        if loss is not None and not math.isfinite(loss):
            self.ctx.alert("nonfinite.loss", "critical", f"loss is {loss} at step {rec.step}",
                           step=rec.step, evidence={"loss": str(loss)})
