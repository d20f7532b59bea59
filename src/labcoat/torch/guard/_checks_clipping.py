"""Gradient post-processing between backward and the optimizer step: clipping applied to part.

Rule (family ``updates``):

    grad.partial_clip  warning  between backward() and optimizer.step() some gradients were
                                scaled by one common factor < 1 and others left exactly as
                                backward produced them: a clip coefficient applied to part
                                of the parameters (a parameter list that misses some, a
                                branch that skips replicated or norm weights)

Bug class: norm clipping (``clip_grad_norm_``, DeepSpeed's and Megatron's
clippers, ``GradScaler.unscale_`` before it) multiplies *every* gradient the
optimizer will apply by one coefficient, so the update direction is kept.
When the coefficient reaches only some of them (DeepSpeed PR 1801: on tensor-
parallel ranks > 0 the replicated layer-norm weights were left out of the
clipped list; in plain code ``clip_grad_norm_(model.encoder.parameters(), ...)``
while the head trains too), the unclipped ones take steps up to 1/coefficient
times too large, silently: loss and gradient norm look normal.

How it is measured, only at check steps: a post-accumulate-grad hook on each
optimizer parameter (attached after the step before a check step, removed at
the check step) keeps the norm of its gradient as backward left it; the
check step's per-parameter gradient norms, which the guard measures anyway,
are what the optimizer applies. Each ratio applied / produced is then 1 (left
alone) or below 1 (scaled). The rule fires when at least one ratio is exactly 1
(to ``SAME_RTOL``) while two or more are below 1 and equal to each other (to
``COMMON_RTOL``): one coefficient, not applied to all. Element-wise clipping
(``clip_grad_value_``) gives assorted ratios, not one common one; clipping the
whole list, or none, gives no ratio of 1 beside scaled ones. Per-group
clipping with separate thresholds where one group stays below its threshold
looks the same and is flagged (disable the rule if that is intended). In a
multi-rank run the gradients are reduced after backward, so the rule stands by.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Step

SAME_RTOL = 1e-5  # a ratio this close to 1 is "left as backward produced it"
SCALED_BELOW = 1 - 1e-4  # a ratio below this was scaled down
COMMON_RTOL = 1e-3  # scaled ratios this close to each other share one coefficient


class GradClip(Check):
    """Gradient norms at the end of backward vs at optimizer.step(), at check steps."""

    family = "updates"
    rules = {
        "grad.partial_clip": Rule("warning", "between backward and step, some gradients scaled "
                                             "by one common factor below 1 while others are "
                                             "exactly as backward left them: clipping applied "
                                             "to part of the model (one rank's shard, one param "
                                             "group); off in multi-rank runs"),
    }
    periodic = frozenset({"on_pre_step", "on_post_step"})

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.handles: list[Any] = []
        self.produced: dict[int, torch.Tensor] = {}  # parameter index -> grad norm
        if self.active():  # the first step is a check step
            self._attach()

    def active(self) -> bool:
        if not super().active():
            return False
        dist = torch.distributed
        return not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1)

    def _attach(self) -> None:
        if self.handles:
            return
        params = self.ctx.params
        for i, p in enumerate(params.tensors):
            if params.in_optimizer[i] and p.requires_grad:
                self.handles.append(p.register_post_accumulate_grad_hook(
                    lambda t, i=i: self._produced(i, t)))

    def _produced(self, i: int, p: torch.Tensor) -> None:
        if self.ctx.internal or p.grad is None or p.grad.is_sparse:
            return
        self.produced[i] = torch.linalg.vector_norm(p.grad.detach()).float()

    def _detach(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def on_pre_step(self, step: Step) -> None:
        if not step.check:
            return
        produced, self.produced = self.produced, {}
        self._detach()
        if len(produced) < 3 or step.grad_norms is None:
            return
        idx = sorted(produced)
        before = torch.stack([produced[i] for i in idx]).tolist()
        applied = step.grad_norms[idx]
        before = np.array(before)
        # non-finite norms are the nonfinite.* rules' to report, not a clipping pattern
        ok = np.isfinite(before) & (before > 0) & np.isfinite(applied)
        if ok.sum() < 3:
            return
        ratio = applied[ok] / before[ok]
        names = [self.ctx.params.names[i] for i, k in zip(idx, ok, strict=True) if k]
        same = np.abs(ratio - 1) <= SAME_RTOL
        scaled = ratio < SCALED_BELOW
        if not same.any() or scaled.sum() < 2:
            return
        low, high = ratio[scaled].min(), ratio[scaled].max()
        if high - low > COMMON_RTOL * high:
            return
        left = [n for n, s in zip(names, same, strict=True) if s]
        listed = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        self.ctx.alert(
            "grad.partial_clip", "warning",
            f"between backward() and optimizer step {step.number}, {int(scaled.sum())} "
            f"gradients were scaled by one factor ({float(high):.3g}) but {listed} were left "
            "as backward produced them: a clip coefficient applied to part of the parameters "
            "(clip_grad_norm_ given a list that misses some?), so those take up to "
            f"{1 / float(high):.3g}x larger steps",
            step=step.number, evidence={"coefficient": float(high), "unclipped": left[:20]})

    def on_post_step(self, step: Step) -> None:
        if self.ctx.is_check_step(step.number + 1):
            self._attach()

    def close(self) -> None:
        self._detach()
