"""Mode bugs: train/eval modes that do not fit the forward, random draws and early evaluations.

Rules (family ``modes``):

    mode.train_in_eval      error     an evaluation forward with active dropout or batch-norm in
                                      training mode (model.eval() forgotten: noisy metrics, and
                                      batch-norm statistics updated with eval data)
    mode.eval_in_train      error     a training forward with dropout in eval mode, or
                                      batch-norm switched to eval since training began
                                      (model.train() never called after an evaluation)
    mode.eval_random        error     an evaluation forward changed the CPU random generator's
                                      state: something in the model samples while it is
                                      evaluated (functional dropout such as ``F.dropout(x, p,
                                      training=True)`` or
                                      ``scaled_dot_product_attention(dropout_p=0.1)`` called
                                      with a constant, random masking or noise not gated on
                                      ``self.training``), so eval metrics are noisy and differ
                                      from run to run
    mode.eval_before_train  warning   an evaluation forward through modules whose state is
                                      updated only by training-mode forwards while that state is
                                      still what the constructor left: the evaluation measures a
                                      model that training would never produce

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

``mode.eval_random``, randomness in evaluation. Why the generator and not the modules:
functional dropout leaves no module in training mode for ``mode.train_in_eval`` to
see, but every random draw advances the generator. The state (~5 KB) is copied at the
model's forward pre-hook of an evaluation forward and compared in its forward hook;
training forwards pay nothing. An eval forward with a dropout or batch-norm module
left in training mode is left to ``mode.train_in_eval`` (one bug, one alert). Needs no
declaration or reference: a correct model's eval forward is deterministic. The CUDA
generators are not compared (CPU only, for now).

``mode.eval_before_train``, state only training forwards set, read by an evaluation
before any training forward set it. Bug class: modules that compute part of their
function from state they update in training mode only. The old
``torch.nn.utils.spectral_norm`` draws its power-iteration vectors ``u``/``v`` at
random and iterates them only in training forwards, so an evaluation of a fresh model
divides the weight by a wrong sigma (pytorch#51800: outputs orders of magnitude off);
batch-norm's running statistics start at mean 0 / variance 1, so a fresh model
evaluated first runs without normalization. Either way an "evaluate the
initialization" step, a GAN's generator sampled before its first update, or an
eval-first loop reports numbers of a model that does not exist.

"Never set" is read from the state itself, so a model restored from a
checkpoint is not flagged: a spectral-norm vector is never set while its
tensor version counter is 0 (created and registered, never written: a
training forward's power iteration and ``load_state_dict``'s copy both write
it; ``torch.nn.utils.parametrizations.spectral_norm`` iterates at
construction, so it never qualifies); a batch-norm layer while it has tracked
no batch and its statistics are exactly the reset values (zeros and ones: a
pretrained checkpoint saved without ``num_batches_tracked`` still carries real
statistics). Cost: the list of such modules is built once at ``watch()``; each
evaluation forward before the first training step reads a few attributes per
module; after the first optimizer step the check is off (training has set the
state, or the modules are unused). Both callbacks are periodic (the guard
calls them only near check steps, and steps 0 and 1 are), so the other steps
never call them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import _DropoutNd
from torch.nn.utils.spectral_norm import SpectralNorm

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Forward, Step


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


class TrainOnlyState(Check):
    """Train-only state at construction values when the model is first evaluated."""

    family = "modes"
    rules = {
        "mode.eval_before_train": Rule("warning", "an evaluation through modules whose state "
                                                  "only training forwards set, while that state "
                                                  "is still what the constructor left (old "
                                                  "`spectral_norm` vectors never iterated, "
                                                  "batch norm with no batch tracked and exactly "
                                                  "0/1 statistics); a restored checkpoint is "
                                                  "not flagged"),
    }
    # before step 1 the guard is at step 0, a multiple of check_every, and step 1 is a check
    # step: both callbacks matter only there, so the steps between never call them
    periodic = frozenset({"on_forward", "on_post_step"})

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.spectral: list[tuple[str, nn.Module, str]] = []  # (module, its u buffer name)
        self.norms: list[tuple[str, _BatchNorm]] = []
        for name, m in ctx.model.named_modules():
            for hook in m._forward_pre_hooks.values():
                if isinstance(hook, SpectralNorm):
                    self.spectral.append((name or type(m).__name__, m, hook.name + "_u"))
            if (isinstance(m, _BatchNorm) and m.track_running_stats
                    and m.running_mean is not None and m.num_batches_tracked is not None):
                self.norms.append((name or type(m).__name__, m))
        self.on = bool(self.spectral or self.norms)

    def active(self) -> bool:
        return self.on and super().active()

    def on_forward(self, fwd: Forward) -> None:
        if fwd.training or not self.on:
            return
        # a module in training mode sets its state in this very forward
        unset = [name for name, m, u in self.spectral
                 if not m.training and getattr(m, u)._version == 0]
        unset += [name for name, m in self.norms if not m.training and _reset_stats(m)]
        if not unset:
            return
        self.on = False  # once: the first evaluation says it
        listed = ", ".join(unset[:5]) + (f" and {len(unset) - 5} more" if len(unset) > 5 else "")
        self.ctx.alert(
            "mode.eval_before_train", "warning",
            f"an evaluation forward after step {fwd.step} ran through {listed}, whose state "
            "only training forwards set and which none has set yet (spectral-norm power "
            "iteration never run, batch-norm running statistics still 0/1): the evaluation "
            "measures a model training never produces; run one training-mode forward first, "
            "load a checkpoint, or use torch.nn.utils.parametrizations.spectral_norm",
            step=fwd.step, evidence={"modules": unset[:20]})

    def on_post_step(self, step: Step) -> None:
        self.on = False  # training has set the state (or these modules are unused)


def _reset_stats(m: _BatchNorm) -> bool:
    """Whether batch-norm `m` has tracked no batch and holds exactly the reset statistics."""
    if int(m.num_batches_tracked) != 0:
        return False
    mean, var = m.running_mean, m.running_var
    return bool((mean == 0).all()) and var is not None and bool((var == 1).all())
