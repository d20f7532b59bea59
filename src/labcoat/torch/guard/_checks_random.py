"""Randomness in evaluation: an evaluation forward that draws random numbers.

Rules (family ``modes``):

    mode.eval_random   error  an evaluation forward changed the CPU random generator's state:
                              something in the model samples while it is evaluated (functional
                              dropout such as ``F.dropout(x, p, training=True)`` or
                              ``scaled_dot_product_attention(dropout_p=0.1)`` called with a
                              constant, random masking or noise not gated on ``self.training``),
                              so eval metrics are noisy and differ from run to run

Why the generator and not the modules: functional dropout leaves no module in
training mode for ``_checks_modes`` to see, but every random draw advances the
generator. The state (~5 KB) is copied at the model's forward pre-hook of an
evaluation forward and compared in its forward hook; training forwards pay
nothing. An eval forward with a dropout or batch-norm module left in training
mode is left to ``mode.train_in_eval`` (one bug, one alert). Needs no
declaration or reference: a correct model's eval forward is deterministic.
The CUDA generators are not compared (CPU only, for now).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._checks_modes import _sensitive
from labcoat.torch.guard._context import Check, Context, Forward


class EvalRandom(Check):
    """The CPU generator's state around each evaluation forward of the model."""

    family = "modes"
    rules = {
        "mode.eval_random": Rule("error", "an evaluation forward moved the CPU random "
                                          "generator: functional dropout or noise not switched "
                                          "off by `model.eval()`"),
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.before: torch.Tensor | None = None
        self.step = 0
        self.depth = 0  # a model called inside its own forward: compare the outermost call
        self.handle: Any = None
        self.sensitive = [m for m in ctx.model.modules() if _sensitive(m)]
        if self.active():
            self.handle = ctx.model.register_forward_hook(self._after)

    def on_forward(self, fwd: Forward) -> None:
        if fwd.training or self.ctx.internal or self._module_in_training():
            return  # a dropout module left in training mode is mode.train_in_eval's
        self.depth += 1
        if self.depth == 1:
            self.before = torch.random.get_rng_state()
            self.step = fwd.step

    def _module_in_training(self) -> bool:
        return any(m.training for m in self.sensitive)

    def _after(self, module: nn.Module, args: Any, output: Any) -> None:
        before = self.before
        if before is None or self.depth == 0:
            return
        self.depth -= 1
        if self.depth:
            return
        self.before = None
        if not torch.equal(before, torch.random.get_rng_state()):
            self.ctx.alert(
                "mode.eval_random", "error",
                f"an evaluation forward after step {self.step} drew random numbers (the CPU "
                "generator moved): dropout or noise in the model is not switched off by "
                "model.eval() (e.g. F.dropout(..., training=True) or "
                "scaled_dot_product_attention(dropout_p=...) with a constant)",
                step=self.step, evidence={"generator": "cpu"})

    def close(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
