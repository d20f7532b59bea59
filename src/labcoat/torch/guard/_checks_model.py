"""Causality probe: future-token leakage in causal models.

Rule (family ``model``):

    model.causality   error     with ``causal=True``: the output at position t changed when
                                only inputs after t changed (a missing or wrong attention
                                mask: the model sees the future)

The causality probe runs the model once, in eval mode under no_grad (no RNG
drawn, no state changed), on up to 4 rows of the last training batch next to
the same rows with every position from the middle on replaced by another
row's tokens, and requires the outputs before the middle to agree. It runs at the first
step and every ``causal_every`` steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Forward, Step

PROBE_ROWS = 4
LEAK_RTOL = 1e-4  # output change, relative to the output's scale, that counts as a leak


class Causality(Check):
    """Probe that outputs at positions < t do not depend on inputs at positions >= t."""

    family = "model"
    rules = {
        "model.causality": Rule("error", "a causal model that sees the future (with "
                                         "`causal=True`)"),
    }

    periodic = frozenset({"on_post_step"})  # causal_every is a multiple of check_every

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.probes = 0

    def active(self) -> bool:
        return self.ctx.config.causal and super().active()

    def on_post_step(self, step: Step) -> None:
        if self.probes and step.number % self.ctx.config.causal_every:
            return
        fwd = step.forwards[-1] if step.forwards else None
        if fwd is None:
            return
        x = fwd.inputs
        if x is None or x.dim() != 2 or x.is_floating_point() or x.shape[1] < 2:
            return
        rows = min(PROBE_ROWS, x.shape[0])
        x = x[:rows].detach()
        cut = x.shape[1] // 2
        future = x[:, cut:].roll(1, dims=0) if rows > 1 else x[:, cut:].flip(1)
        if torch.equal(future, x[:, cut:]):
            return  # the replacement changed nothing: inconclusive
        altered = torch.cat([x[:, :cut], future], dim=1)
        self.probes += 1
        model = self.ctx.model
        with self.ctx.running_model(), torch.no_grad(), _eval_mode(model):
            args, kwargs = _with_input(fwd, torch.cat([x, altered]), rows)  # one forward
            out = _logits(model(*args, **kwargs))
        if out is None or out.dim() < 2 or out.shape[0] != 2 * rows:
            return
        past_before, past_after = out[:rows, :cut].float(), out[rows:, :cut].float()
        change = float((past_before - past_after).abs().max())
        scale = float(past_before.abs().max())
        if change > LEAK_RTOL * scale + 1e-6:
            self.ctx.alert(
                "model.causality", "error",
                f"outputs at positions 0..{cut - 1} changed (by up to {change:.3g}, output scale "
                f"{scale:.3g}) when only inputs from position {cut} on changed, at step "
                f"{step.number}: the model sees future tokens (attention mask missing or wrong)",
                step=step.number, evidence={"max_change": change, "output_scale": scale,
                                            "cut": cut, "rows": rows})



@contextlib.contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, training in flags:
            m.training = training



def _with_input(fwd: Forward, x: torch.Tensor, rows: int) -> tuple[tuple[Any, ...],
                                                                   dict[str, Any]]:
    """The forward's arguments with the input replaced by `x` (two probes of `rows` rows each)
    and other batch tensors (e.g. an attention mask) cut to `rows` and repeated to match."""
    original = fwd.inputs
    batch = original.shape[0] if original is not None else 0

    def cut(v: Any) -> Any:
        if v is original:
            return x
        if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == batch:
            return torch.cat([v[:rows], v[:rows]])
        return v

    return tuple(cut(a) for a in fwd.args), {k: cut(v) for k, v in fwd.kwargs.items()}


def _logits(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits") and isinstance(out.logits, torch.Tensor):
        return out.logits
    if isinstance(out, list | tuple) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None
