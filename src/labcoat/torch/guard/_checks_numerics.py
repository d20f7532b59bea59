"""Mixed precision: linear layers that silently run outside autocast.

Rules (family ``numerics``):

    numerics.autocast_dtype  warning  the model's training forward ran under ``torch.autocast``
                                      (bfloat16/float16), but an ``nn.Linear`` inside it
                                      returned float32: part of the model left autocast
                                      (a forward wrapped in ``torch.autocast(enabled=False)``,
                                      a custom autograd function or kernel that upcasts, a
                                      region that builds its own context), so its matmuls run
                                      in fp32 while the run is believed to train in bf16/fp16:
                                      slower, more memory, and numerics unlike the ones tested

How: at the first training forward of each check step (``check_every``), if
autocast is on for the model's device at its outer forward (``torch.is_autocast_enabled``
for the model's parameter device type), forward hooks are attached to every
``nn.Linear`` for that one forward, and removed by a forward hook on the model
when it returns; no hook exists at the other steps. Under autocast a linear's
output is in the autocast dtype whatever its inputs' dtype (``F.linear`` is on
the lower-precision list), so a float32 output means autocast was off where it
ran. Float64 outputs are not judged (autocast leaves float64 alone). One alert
per run, naming the modules. A layer kept in fp32 on purpose (a final logits
head under ``autocast(enabled=False)``): disable the rule.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Forward

LISTED = 8  # module names named in the alert


class AutocastDtype(Check):
    """Linear output dtypes inside an autocast training forward, at check steps."""

    family = "numerics"
    rules = {
        "numerics.autocast_dtype": Rule("warning", "an `nn.Linear` returns float32 inside an "
                                                   "autocast (bf16/fp16) training forward: part "
                                                   "of the model runs outside mixed precision "
                                                   "(`autocast(enabled=False)` around it); "
                                                   "hooked at check steps only"),
    }
    periodic = frozenset({"on_forward"})

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.linears = [(name, m) for name, m in ctx.model.named_modules()
                        if isinstance(m, nn.Linear)]
        self.device = ctx.params.tensors[0].device.type
        self.handles: list[Any] = []
        self.outside: list[str] = []  # linears of the hooked forward that returned float32
        self.dtype: torch.dtype | None = None
        self.step = 0
        self.done = False  # alerted: nothing more to look at

    def active(self) -> bool:
        return bool(self.linears) and super().active()

    def on_forward(self, fwd: Forward) -> None:
        if self.done or not fwd.training or fwd.index or not self.ctx.is_check_step(fwd.step):
            return
        self._detach()  # left by a forward that raised
        dtype = _autocast_dtype(self.device)
        if dtype is None:
            return
        self.dtype = dtype
        self.step = fwd.step
        self.outside = []
        self.handles = [m.register_forward_hook(functools.partial(self._linear, name))
                        for name, m in self.linears]
        self.handles.append(self.ctx.model.register_forward_hook(self._after))

    def _linear(self, name: str, module: nn.Module, args: Any, output: Any) -> None:
        if isinstance(output, torch.Tensor) and output.dtype == torch.float32:
            self.outside.append(name)

    def _after(self, module: nn.Module, args: Any, output: Any) -> None:
        self._detach()
        if not self.outside:
            return
        self.done = True
        names = list(dict.fromkeys(self.outside))
        more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
        self.ctx.alert(
            "numerics.autocast_dtype", "warning",
            f"at step {self.step} the model ran under autocast ({self.dtype}) but "
            f"{len(names)} of {len(self.linears)} linear layers returned float32 "
            f"({', '.join(names[:LISTED])}{more}): they run outside autocast "
            "(torch.autocast(enabled=False) or a custom op in their path), in fp32; remove "
            "the inner context, or disable the rule if fp32 there is intended",
            step=self.step, evidence={"modules": names[:20], "count": len(names),
                                      "linears": len(self.linears),
                                      "autocast_dtype": str(self.dtype)})

    def _detach(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def close(self) -> None:
        self._detach()


def _autocast_dtype(device: str) -> torch.dtype | None:
    """The autocast dtype in force for `device` ("cpu", "cuda", ...), None if autocast is off."""
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4: any device type
        try:
            on = torch.is_autocast_enabled(device)
        except (RuntimeError, TypeError):  # a device type autocast does not know
            return None
        return torch.get_autocast_dtype(device) if on else None
    if device == "cpu":  # torch 2.2-2.3
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
