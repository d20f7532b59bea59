"""Recomputation against silent data corruption: a step's gradients computed twice must agree.

Rule (family ``model``):

    sdc.recompute     critical  with ``recompute_every=N`` and ``loss_fn``: the gradients of a
                                step recomputed from the same weights, batch and RNG state
                                differ from the ones about to be applied (silent data
                                corruption in compute or memory, a nondeterministic kernel)

Recomputation needs the batch before the update: call
``guard.record(batch=...)`` after the forward and before ``optimizer.step()``.
It replays the forward and backward with ``torch.autograd.grad`` (``.grad``
is not touched), the RNG state captured at the step's forward and the
buffers restored afterwards, and compares with the gradients in ``.grad``
bit for bit (``recompute_rtol=0``). If the loop clipped the gradients, the
comparison allows the common scale factor. On CPU with deterministic
algorithms (``torch.use_deterministic_algorithms(True)``) a healthy step
matches exactly.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Forward, Record, Step

_log = logging.getLogger("labcoat.torch.guard")


class Recompute(Check):
    """Every N steps, recompute the step's gradients and compare them with ``.grad``."""

    family = "model"
    rules = {
        "sdc.recompute": Rule("critical", "silent data corruption: a recomputed step gives "
                                          "other gradients (with `recompute_every`)"),
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.rng: tuple[torch.Tensor, list[torch.Tensor]] | None = None
        self.batch: Any = None
        self.batch_step = -1
        self.warned = False

    def active(self) -> bool:
        return self.ctx.config.recompute_every > 0 and super().active()

    def _due(self, number: int) -> bool:
        return number % self.ctx.config.recompute_every == 0

    def on_forward(self, fwd: Forward) -> None:
        if fwd.training and fwd.index == 0 and self._due(fwd.step):
            cuda = ([torch.cuda.get_rng_state(d) for d in range(torch.cuda.device_count())]
                    if torch.cuda.is_available() else [])
            self.rng = (torch.get_rng_state(), cuda)

    def on_record(self, rec: Record) -> None:
        if rec.batch is not None and self._due(rec.step):
            self.batch, self.batch_step = rec.batch, rec.step

    def on_pre_step(self, step: Step) -> None:
        if not self._due(step.number):
            return
        batch, rng = self.batch, self.rng
        self.batch, self.rng = None, None
        if batch is None or self.batch_step != step.number or rng is None:
            if not self.warned:
                self.warned = True
                _log.warning("guard: recompute at step %d skipped: call guard.record(batch=...) "
                             "after the forward and before optimizer.step()", step.number)
            return
        if len(step.forwards) != 1 or not math.isfinite(step.grad_norm or 0.0) or not all(
                reset for _, reset in step.reset):
            return  # .grad holds a sum (micro-batches, no zero_grad) or NaN: not replayable
        params = self.ctx.params
        idx = [i for i, g in enumerate(step.grads)
               if g is not None and params.judged[i] and params.in_optimizer[i]]
        if not idx:
            return  # no gradient to compare (grad.missing says why, if it is a bug)
        tensors = [params.tensors[i] for i in idx]
        with self.ctx.running_model(), _replay(self.ctx.model, rng), torch.enable_grad():
            loss = self.ctx.config.loss_fn(self.ctx.model, batch)  # type: ignore[misc]
            again = torch.autograd.grad(loss, tensors, allow_unused=True)
        applied = [step.grads[i] for i in idx]
        bad = _mismatch(applied, again, self.ctx.config.recompute_rtol)  # type: ignore[arg-type]
        if bad:
            names = [params.names[idx[j]] for j, _ in bad]
            worst = max(d for _, d in bad)
            self.ctx.alert(
                "sdc.recompute", "critical",
                f"recomputing step {step.number} from the same weights, batch and RNG state gave "
                f"different gradients for {', '.join(names[:4])}"
                f"{' and more' if len(names) > 4 else ''} (largest relative difference "
                f"{worst:.3g}): silent data corruption or a nondeterministic kernel",
                step=step.number, evidence={"params": names[:20], "max_rel_diff": worst})


def _mismatch(applied: list[torch.Tensor], again: tuple[torch.Tensor | None, ...],
              rtol: float) -> list[tuple[int, float]]:
    """(index, relative difference) of gradients that disagree; allows one common clip scale."""
    pairs = [(a, torch.zeros_like(a) if b is None else b) for a, b in zip(applied, again,
                                                                         strict=True)]
    if all(torch.equal(a, b) for a, b in pairs):
        return []
    dot = sum(float((a.double() * b.double()).sum()) for a, b in pairs)
    norm = sum(float((b.double() ** 2).sum()) for _, b in pairs)
    scale = dot / norm if norm else 1.0
    if abs(scale - 1) > 1e-6:  # the loop clipped or scaled: compare up to rounding
        rtol = max(rtol, 1e-5)
    else:
        scale = 1.0
    out = []
    for j, (a, b) in enumerate(pairs):
        diff = float((a.double() - scale * b.double()).abs().max())
        ref = float(b.double().abs().max()) * abs(scale) or 1.0
        if diff > rtol * ref or (rtol == 0 and not torch.equal(a, b)):
            out.append((j, diff / ref))
    return out




@contextlib.contextmanager
def _replay(model: nn.Module, rng: tuple[torch.Tensor, list[torch.Tensor]]) -> Iterator[None]:
    """Run with the RNG state of the step's forward; restore RNGs and buffers afterwards."""
    cpu, cuda = rng
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    devices = list(range(len(cuda)))
    with torch.random.fork_rng(devices=devices):
        torch.set_rng_state(cpu)
        for d, state in zip(devices, cuda, strict=True):
            torch.cuda.set_rng_state(state, d)
        try:
            yield
        finally:
            with torch.no_grad():
                for b, saved in buffers:
                    b.copy_(saved)

