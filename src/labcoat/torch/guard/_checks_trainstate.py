"""State only training forwards set, read by an evaluation before any training forward set it.

Rule (family ``modes``):

    mode.eval_before_train  warning  an evaluation forward through modules whose state is
                                     updated only by training-mode forwards while that state
                                     is still what the constructor left: the evaluation
                                     measures a model that training would never produce

Bug class: modules that compute part of their function from state they
update in training mode only. The old ``torch.nn.utils.spectral_norm`` draws
its power-iteration vectors ``u``/``v`` at random and iterates them only in
training forwards, so an evaluation of a fresh model divides the weight by a
wrong sigma (pytorch#51800: outputs orders of magnitude off); batch-norm's
running statistics start at mean 0 / variance 1, so a fresh model evaluated
first runs without normalization. Either way an "evaluate the initialization"
step, a GAN's generator sampled before its first update, or an eval-first
loop reports numbers of a model that does not exist.

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

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.utils.spectral_norm import SpectralNorm

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Forward, Step


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
