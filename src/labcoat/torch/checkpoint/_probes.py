"""Probes for hindsight logging: quantities a run never logged, measured while replaying it.

Built-in probes (names for ``labcoat replay --probe``):

    activations        per module: mean, std, rms and max |x| of its output in training
                       forwards (averaged over the forwards of a step)
    grad_norms         per parameter: L2 norm of its gradient as the optimizer step sees it,
                       and ``total`` (the global norm)
    attention_entropy  per attention module and head: entropy (nats) of the attention
                       weights, averaged over batch and query positions. Recognized:
                       ``nn.MultiheadAttention`` (its returned weights; ``heads_averaged``
                       when it averages them, its default) and modules with a ``qkv``
                       Linear and a ``heads`` count (causal, as in GPT-2/nanoGPT/tinylm)
    update_ratios      per parameter: ||p_after - p_before|| / ||p_before|| of the step

A user probe is ``MODULE:FUNCTION``: ``FUNCTION(context)`` is called after each
replayed step in range and returns ``{name: number}``; `ProbeContext` gives it the
step and the tracked modules and optimizers, as they are after the step.

Probes only read: forward hooks return nothing, optimizer hooks read gradients and
copy weights, and user functions run with every RNG's state saved and restored.
`labcoat replay` checks anyway that the replayed loss equals the recorded one at
every step, so a probe that changed the run would be caught.
"""

from __future__ import annotations

import importlib
import math
import numbers
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from labcoat.torch.checkpoint._errors import CheckpointError

BUILTIN = ("activations", "grad_norms", "attention_entropy", "update_ratios")


@dataclass
class ProbeContext:
    """What a probe sees. modules/optimizers: the Checkpointer's tracked ones, by name."""

    step: int
    modules: dict[str, nn.Module]
    optimizers: dict[str, torch.optim.Optimizer]
    tracked: dict[str, Any] = field(default_factory=dict)
    recording: Callable[[], bool] = lambda: True  # True while a step in range is computed


class Probe:
    """A probe: `attach` once after the restore, `collect` after each step in range."""

    name = "probe"

    def attach(self, context: ProbeContext) -> None:
        self.context = context

    def collect(self) -> dict[str, float]:
        raise NotImplementedError


def _named_modules(context: ProbeContext) -> list[tuple[str, nn.Module]]:
    """Every submodule, named as in named_modules(); prefixed by the tracked name when
    several models are tracked."""
    several = len(context.modules) > 1
    out = []
    for label, model in context.modules.items():
        for name, module in model.named_modules():
            full = f"{label}.{name}" if several and name else (name or label)
            out.append((full, module))
    return out


def _named_parameters(context: ProbeContext) -> dict[int, str]:
    several = len(context.modules) > 1
    names: dict[int, str] = {}
    for label, model in context.modules.items():
        for name, param in model.named_parameters():
            names.setdefault(id(param), f"{label}.{name}" if several else name)
    return names


def _training_forward(module: nn.Module) -> bool:
    return module.training and torch.is_grad_enabled()


class Activations(Probe):
    name = "activations"

    def attach(self, context: ProbeContext) -> None:
        super().attach(context)
        self.sums: dict[str, list[float]] = {}
        self.counts: dict[str, int] = {}
        for name, module in _named_modules(context):
            if isinstance(module, nn.ModuleList | nn.ModuleDict | nn.Sequential) and name:
                continue
            module.register_forward_hook(self._hook(name))

    def _hook(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            if not (self.context.recording() and _training_forward(module)):
                return
            tensor = output[0] if isinstance(output, tuple | list) else output
            if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
                return
            with torch.no_grad():
                x = tensor.detach().double()
                stats = [x.mean().item(), x.std().item() if x.numel() > 1 else 0.0,
                         x.square().mean().sqrt().item(), x.abs().max().item()]
            old = self.sums.get(name, [0.0] * 4)
            self.sums[name] = [a + b for a, b in zip(old, stats, strict=True)]
            self.counts[name] = self.counts.get(name, 0) + 1
        return hook

    def collect(self) -> dict[str, float]:
        out = {}
        for name, sums in self.sums.items():
            n = self.counts[name]
            for stat, total in zip(("mean", "std", "rms", "absmax"), sums, strict=True):
                out[f"{name}/{stat}"] = total / n
        self.sums, self.counts = {}, {}
        return out


class _OptimizerProbe(Probe):
    """Hooks on every tracked optimizer's step (pre and post)."""

    def attach(self, context: ProbeContext) -> None:
        super().attach(context)
        self.names = _named_parameters(context)
        self.values: dict[str, float] = {}
        for optimizer in context.optimizers.values():
            optimizer.register_step_pre_hook(lambda opt, args, kwargs: self._pre(opt))
            optimizer.register_step_post_hook(lambda opt, args, kwargs: self._post(opt))

    def _params(self, optimizer: torch.optim.Optimizer) -> list[tuple[str, torch.Tensor]]:
        return [(self.names.get(id(p), f"param{i}"), p)
                for i, p in enumerate(p for g in optimizer.param_groups for p in g["params"])]

    def _pre(self, optimizer: torch.optim.Optimizer) -> None:
        pass

    def _post(self, optimizer: torch.optim.Optimizer) -> None:
        pass

    def collect(self) -> dict[str, float]:
        out, self.values = self.values, {}
        return out


class GradNorms(_OptimizerProbe):
    name = "grad_norms"

    @torch.no_grad()
    def _pre(self, optimizer: torch.optim.Optimizer) -> None:
        if not self.context.recording():
            return
        total = 0.0
        for name, p in self._params(optimizer):
            if p.grad is None:
                continue
            norm = p.grad.detach().double().norm().item()
            self.values[name] = norm
            total += norm * norm
        self.values["total"] = math.sqrt(total)


class UpdateRatios(_OptimizerProbe):
    name = "update_ratios"

    @torch.no_grad()
    def _pre(self, optimizer: torch.optim.Optimizer) -> None:
        self.before = ([(n, p, p.detach().clone()) for n, p in self._params(optimizer)]
                       if self.context.recording() else [])

    @torch.no_grad()
    def _post(self, optimizer: torch.optim.Optimizer) -> None:
        for name, p, before in self.before:
            scale = before.double().norm().item()
            change = (p.detach().double() - before.double()).norm().item()
            self.values[name] = change / scale if scale > 0 else math.inf
        self.before = []


class AttentionEntropy(Probe):
    name = "attention_entropy"

    def attach(self, context: ProbeContext) -> None:
        super().attach(context)
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        found = 0
        for name, module in _named_modules(context):
            if isinstance(module, nn.MultiheadAttention):
                module.register_forward_hook(self._mha_hook(name))
                found += 1
            elif isinstance(getattr(module, "qkv", None), nn.Linear) and isinstance(
                    getattr(module, "heads", None), int):
                module.register_forward_hook(self._qkv_hook(name))
                found += 1
        if not found:
            raise CheckpointError(
                "probe attention_entropy found no attention module (nn.MultiheadAttention, or "
                "a module with a `qkv` Linear and a `heads` count); drop it or write your own "
                "probe (MODULE:FUNCTION)")

    def _add(self, name: str, weights: torch.Tensor, labels: list[str] | None = None) -> None:
        """weights: (B, H, Tq, Tk) attention probabilities."""
        p = weights.double().clamp_min(1e-300)
        entropy = -(weights.double() * p.log()).sum(-1)  # (B, H, Tq)
        per_head = entropy.mean(dim=(0, 2))
        for head, value in enumerate(per_head.tolist()):
            key = f"{name}/{labels[head] if labels else f'head{head}'}"
            self.sums[key] = self.sums.get(key, 0.0) + value
            self.counts[key] = self.counts.get(key, 0) + 1

    def _qkv_hook(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            if self.context.recording() and _training_forward(module):
                with torch.no_grad():
                    self._qkv_entropy(name, module, inputs[0])
        return hook

    def _qkv_entropy(self, name: str, module: nn.Module, x: torch.Tensor) -> None:
        """Recompute the causal attention probabilities from the module's own projection
        (fused kernels such as scaled_dot_product_attention never materialize them)."""
        B, T, C = x.shape
        H = module.heads
        q, k, _ = module.qkv(x).split(C, dim=2)
        q, k = (z.view(B, T, H, C // H).transpose(1, 2) for z in (q, k))
        scale = getattr(module, "scale", None) or 1 / math.sqrt(C // H)
        scores = (q @ k.transpose(-2, -1)) * scale
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        self._add(name, scores.masked_fill(~mask, float("-inf")).softmax(-1))

    def _mha_hook(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            if not (self.context.recording() and _training_forward(module)):
                return
            weights = output[1] if isinstance(output, tuple) else None
            if weights is None:
                return  # called with need_weights=False
            if weights.dim() == 3:  # average_attn_weights=True: heads already averaged
                self._add(name, weights.detach()[:, None], ["heads_averaged"])
            else:
                self._add(name, weights.detach())
        return hook

    def collect(self) -> dict[str, float]:
        out = {k: self.sums[k] / self.counts[k] for k in self.sums}
        self.sums, self.counts = {}, {}
        return out


class UserProbe(Probe):
    """``MODULE:FUNCTION``, called after each step with a `ProbeContext`."""

    def __init__(self, spec: str) -> None:
        self.name = spec
        self.function = load_function(spec)

    def collect(self) -> dict[str, float]:
        with torch.random.fork_rng(devices=[]), _host_rngs_kept():
            values = self.function(self.context)
        if not isinstance(values, Mapping):
            raise CheckpointError(f"probe {self.name} returned {type(values).__name__}; "
                                  "return a dict of name -> number")
        out = {}
        for key, value in values.items():
            if hasattr(value, "item"):
                value = value.item()
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise CheckpointError(f"probe {self.name} returned {key}={value!r}; values "
                                      "must be numbers")
            out[str(key)] = float(value)
        return out


class _host_rngs_kept:
    def __enter__(self) -> None:
        self.python, self.numpy = random.getstate(), np.random.get_state()

    def __exit__(self, *exc: object) -> None:
        random.setstate(self.python)
        np.random.set_state(self.numpy)


def load_function(spec: str) -> Callable[[ProbeContext], Mapping[str, Any]]:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CheckpointError(f"probe {spec!r} is not a built-in ({', '.join(BUILTIN)}) nor "
                              "MODULE:FUNCTION")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise CheckpointError(f"probe {spec}: cannot import {module_name!r} ({err}); put it on "
                              "PYTHONPATH or next to the training script") from None
    function = module
    for part in attribute.split("."):
        function = getattr(function, part, None)
        if function is None:
            raise CheckpointError(f"probe {spec}: {module_name!r} has no {attribute!r}")
    if not callable(function):
        raise CheckpointError(f"probe {spec}: {attribute!r} is not callable")
    return function


def make_probe(spec: str) -> Probe:
    builtins = {"activations": Activations, "grad_norms": GradNorms,
                "attention_entropy": AttentionEntropy, "update_ratios": UpdateRatios}
    if spec in builtins:
        return builtins[spec]()
    return UserProbe(spec)
