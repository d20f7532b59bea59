"""Gradients: missing ones, ones not reset between steps, a changed accumulation, partial clipping.

Rules (family ``updates``), all but ``grad.partial_clip`` judged at every full step
(every ``grad_norm_every`` steps and near check steps, see `_guard`):

    grad.missing              error     parameters that had a gradient at every step so far
                                        (learned over FED_STEPS full steps) get none, or an
                                        all-zero one: detached from the loss (a .detach(), a
                                        no_grad block, a skipped module) or zero_grad() between
                                        backward and step. Parameters declared with
                                        ``trainable=[...]`` are judged from the first step
                                        (no history needed): no gradient at a step, or an
                                        all-zero one at a check step after the first
    grad.not_reset            error     gradients carried over from the previous step
                                        (optimizer.zero_grad() missing)
    grad.accumulation         error     backward passes per optimizer step differ from the
                                        declared (or first-seen) count: a skipped step,
                                        broken accumulation (steps a ``grad_scaler`` skipped
                                        for inf gradients are expected)
    grad.partial_clip         warning   between backward() and optimizer.step() some
                                        gradients were scaled by one common factor < 1 and
                                        others left exactly as backward produced them: a clip
                                        coefficient applied to part of the parameters (a
                                        parameter list that misses some, a branch that skips
                                        replicated or norm weights); judged at check steps

Whether gradients were reset is told by a gradient hook on one sentinel
parameter (in `_guard`): its first backward of a step finds the gradient the
previous step left (``zero_grad()`` missing) or not; the same hook counts the
backward passes per step (``grad.accumulation``).

Partial clipping (``grad.partial_clip``). Bug class: norm clipping
(``clip_grad_norm_``, DeepSpeed's and Megatron's clippers, ``GradScaler.unscale_``
before it) multiplies *every* gradient the
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
from labcoat.torch.guard._step_history import StepHistory

LEARN_STEPS = 3  # steps that fix the backward passes per step when none are declared
FED_CHECKS = 5  # check steps in which a parameter must have had a gradient (grad.missing),
FED_STEPS = 8  # ... or full steps, whichever come first (~step 20 by default, not ~84: a bug
# from step 30 or soon after a resume is judged; a parameter used now and then drops out)
SAME_RTOL = 1e-5  # a ratio this close to 1 is "left as backward produced it"
SCALED_BELOW = 1 - 1e-4  # a ratio below this was scaled down
COMMON_RTOL = 1e-3  # scaled ratios this close to each other share one coefficient


class Grad(Check):
    """Gradients present, reset and accumulated as the first steps (or declarations) say."""

    family = "updates"
    rules = {
        "grad.missing": Rule("error", "parameters that had a gradient at every step (learned "
                                      "over the first 8 full steps, ~20 steps after `watch()` "
                                      "or a resume) get none or an all-zero one: cut off from "
                                      "the loss (`.detach()`, `torch.no_grad()`, a module "
                                      "skipped by a flag), or `zero_grad()` between "
                                      "`backward()` and `step()`; parameters declared "
                                      "`trainable=[...]` are judged from the first step, so a "
                                      "cut at step 1 or at a resume is seen"),
        "grad.not_reset": Rule("error", "missing `optimizer.zero_grad()`: gradients accumulate "
                                        "across steps"),
        "grad.accumulation": Rule("error", "backward passes per step changed: a skipped step, a "
                                           "wrong accumulation condition"),
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.history = StepHistory.of(ctx).use(self)
        self._once = self.history.once
        self.backwards_seen: list[int] = []
        self.scale: float | None = None  # the grad scaler's scale at the previous step
        self.fed: np.ndarray | None = None  # a non-zero gradient at every check step so far
        self.fed_checks = 0
        self.fed_steps = 0
        self.fed_count = 0  # how many: fewer gradients at a step means some went missing

    def on_pre_step(self, step: Step) -> None:
        if step.check or step.grad_count < self.fed_count or self.fed_steps < FED_STEPS:
            self._missing_grads(step)
        self._reset_and_accumulation(step)

    def _missing_grads(self, step: Step) -> None:
        """grad.missing: learned over the first FED_STEPS full steps (FED_CHECKS check steps if
        they come first), then judged at check
        steps (gradient norms: absent or all zero) and at any step with fewer gradients than
        the parameters that always had one (absent)."""
        params = self.ctx.params
        if self.fed is not None and len(self.fed) < len(params):  # parameters appeared: not
            self.fed = np.append(self.fed, np.zeros(len(params) - len(self.fed), bool))  # fed
        has = step.has_grad if step.check else np.fromiter(
            (g is not None for g in step.grads), bool, len(step.grads))
        if self.history.declared_trainable.any():
            self._declared_starved(step, has)
        if self.fed_checks < FED_CHECKS and self.fed_steps < FED_STEPS:  # learning: parameters
            self.fed = has.copy() if self.fed is None else self.fed & has  # used now and then
            self.fed_checks += step.check  # drop out
            self.fed_steps += 1
            learned = self.fed_checks == FED_CHECKS or self.fed_steps == FED_STEPS
            self.fed_count = int(self.fed.sum()) if learned else 0
            return
        assert self.fed is not None
        eligible = np.array(step.requires_grad) & params.judged & params.in_optimizer
        starved = self.fed & ~has & eligible
        if starved.any() and not step.backwards and not step.grad_count:
            return  # no backward pass ran: a batch skipped on purpose, not a cut (zero_grad()
            # between backward and step still shows: backward ran)
        if starved.any():
            none = step.grad_count == 0
            self._once("grad.missing", "error", starved, step.number,
                       lambda names: f"no parameter had a gradient at optimizer step "
                                     f"{step.number} ({names} had one at every step before): "
                                     "zero_grad() between backward() and step(), or a loss "
                                     "detached from the model" if none else
                                     f"{names} had a gradient at every step until optimizer "
                                     f"step {step.number}, then none: cut off from the loss (a "
                                     ".detach(), a torch.no_grad() block, a module skipped by "
                                     "a flag)")
        self.fed &= eligible & ~starved  # judged once; frozen ones are trainable.frozen's
        self.fed_count = int(self.fed.sum())

    def _declared_starved(self, step: Step, has: np.ndarray) -> None:
        """Declared-trainable parameters need no history: no gradient at all is a cut (an
        all-zero one only after the first step: a zero-initialized LoRA factor starts so)."""
        present = step.present if step.check else has
        got = has if (step.check and step.number != self.ctx.first_step) else present
        eligible = np.array(step.requires_grad) & self.ctx.params.in_optimizer
        starved = self.history.declared_trainable & eligible & ~got
        if starved.any() and (step.grad_count or step.backwards):
            self._once("grad.missing", "error", starved, step.number,
                       lambda names: f"{names} are declared trainable (trainable=[...]) but "
                                     f"got no gradient at optimizer step {step.number}: cut "
                                     "off from the loss (a .detach(), a torch.no_grad() "
                                     "block, a module skipped by a flag)")

    def _reset_and_accumulation(self, step: Step) -> None:
        cfg = self.ctx.config
        if not step.reset:  # no sentinel saw a backward this step: nothing to judge
            return
        kept = [name for name, reset in step.reset if not reset]
        if kept and self.ctx.steps_seen:
            self.ctx.alert(
                "grad.not_reset", "error",
                f"gradients were not reset between optimizer steps {step.number - 1} and "
                f"{step.number} ({', '.join(kept)} still held the previous step's gradient when "
                "backward added to it): optimizer.zero_grad() missing, so gradients accumulate "
                "across steps",
                step=step.number, evidence={"sentinels": kept})
        count = step.backwards
        if cfg.grad_scaler is not None and cfg.grad_scaler.is_enabled():
            scale, previous = cfg.grad_scaler.get_scale(), self.scale
            self.scale = scale
            if previous is not None and scale < previous:
                return  # the scaler skipped steps with inf gradients (and lowered its scale)
        expected = cfg.accumulation_steps
        if expected is None:
            if len(self.backwards_seen) < LEARN_STEPS:
                self.backwards_seen.append(count)
                return
            if len(set(self.backwards_seen)) != 1:
                return  # no fixed cadence to hold the run to
            expected = self.backwards_seen[0]
        if count != expected:
            source = ("declared accumulation_steps" if cfg.accumulation_steps is not None
                      else f"the first {LEARN_STEPS} steps")
            self.ctx.alert(
                "grad.accumulation", "error",
                f"{count} backward passes went into optimizer step {step.number}, but "
                f"{expected} per step is expected ({source}): an optimizer step was skipped or "
                "the accumulation condition is wrong (set accumulation_steps if intended; pass "
                "grad_scaler= if a GradScaler skips steps)",
                step=step.number, evidence={"backwards": count, "expected": expected})


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
