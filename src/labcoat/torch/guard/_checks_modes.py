"""Mode bugs: dropout or batch-norm in the wrong mode for what the model is doing.

Rules (family ``modes``):

    mode.train_in_eval   error  an evaluation forward with active dropout or batch-norm in
                                training mode (model.eval() forgotten: noisy metrics, and
                                batch-norm statistics updated with eval data)
    mode.eval_in_train   error  a training forward with dropout in eval mode, or batch-norm
                                switched to eval since training began (model.train() never
                                called after an evaluation)

"Evaluation" is a forward under ``torch.no_grad()``/``inference_mode`` or
inside ``with guard.evaluating():``. Mode-sensitive modules are dropout
layers with p > 0, batch-norm layers that track running statistics, and
``nn.MultiheadAttention`` with dropout; their ``training`` flags are read at
the model's forward pre-hook, so the cost is one attribute read per such
module per call (at every evaluation forward, and at the training forwards
of full steps: a mode left wrong persists, so a light step's is judged at
the next full step). Batch-norm kept in eval mode from the first training step
on (frozen statistics, common when fine-tuning) is respected; only a change
counts. Dropout in eval mode during training is never intended: its p would be 0.
"""

from __future__ import annotations

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import _DropoutNd

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Forward


class Modes(Check):
    """Module train/eval flags at each forward, against what the forward is for."""

    family = "modes"
    rules = {
        "mode.train_in_eval": Rule("error", "dropout/batch-norm in training mode during "
                                            "evaluation"),
        "mode.eval_in_train": Rule("error", "dropout/batch-norm in eval mode during training: "
                                            "eval mode never switched back"),
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.modules: list[tuple[str, nn.Module, bool]] = [  # (name, module, is dropout-like)
            (name or type(m).__name__, m, not isinstance(m, _BatchNorm))
            for name, m in ctx.model.named_modules() if _sensitive(m)]
        self.first_train: tuple[bool, ...] | None = None
        self.ok: dict[bool, tuple[bool, ...]] = {}  # context -> last pattern found fine

    def active(self) -> bool:
        return bool(self.modules) and super().active()

    def on_forward(self, fwd: Forward) -> None:
        pattern = tuple(m.training for _, m, _ in self.modules)
        if self.ok.get(fwd.training) == pattern:
            return
        if fwd.training:
            self._training(fwd, pattern)
        else:
            self._evaluation(fwd, pattern)

    def _training(self, fwd: Forward, pattern: tuple[bool, ...]) -> None:
        if self.first_train is None:
            self.first_train = pattern
        off = [name for (name, _, dropout), on, first in
               zip(self.modules, pattern, self.first_train, strict=True)
               if not on and (dropout or first)]
        if off:
            self.ctx.alert(
                "mode.eval_in_train", "error",
                f"training step {fwd.step} runs with {_names(off)} in eval mode: model.train() "
                "was not called after an evaluation, so dropout is off (or batch-norm frozen) "
                "while the model trains",
                step=fwd.step, evidence={"modules": off[:20], "count": len(off)})
        else:
            self.ok[True] = pattern

    def _evaluation(self, fwd: Forward, pattern: tuple[bool, ...]) -> None:
        on = [name for (name, _, _), training in zip(self.modules, pattern, strict=True)
              if training]
        if on:
            self.ctx.alert(
                "mode.train_in_eval", "error",
                f"an evaluation forward after step {fwd.step} (no_grad / inference_mode / "
                f"guard.evaluating) runs {_names(on)} in training mode: model.eval() was not "
                "called, so eval metrics are noisy and batch-norm learns from eval data",
                step=fwd.step, evidence={"modules": on[:20], "count": len(on)})
        else:
            self.ok[False] = pattern


def _sensitive(m: nn.Module) -> bool:
    if isinstance(m, _DropoutNd):
        return m.p > 0
    if isinstance(m, _BatchNorm):
        return m.track_running_stats
    if isinstance(m, nn.MultiheadAttention):
        return m.dropout > 0
    return False


def _names(names: list[str]) -> str:
    more = f" and {len(names) - 4} more" if len(names) > 4 else ""
    return ", ".join(names[:4]) + more
