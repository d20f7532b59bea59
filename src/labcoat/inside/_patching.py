"""Exact and attribution patching between two models on the same inputs.

Between arms, the two runs of activation patching are two *models* on one input, not
one model on a clean and a corrupted input: the source model (say the variant) runs
once with its activations captured; the receiving model (the control) runs once per
component with that one activation replaced by the source's. The per-item metric of
the patched run, against the receiver's own, says how much of the source's behaviour
that activation carries.

Attribution patching (Nanda 2023; Syed, Rager & Conmy 2023) estimates all of them from
one forward and one backward pass of the receiver: the change of the metric is about
``(a_source - a_receiver) . dmetric/da`` at the receiver's activation a. It is a
first-order screen: exact patching verifies the components it ranks highest.

metric(model, batch) -> (B,) one differentiable number per item (e.g. the log
probability of the item's answer); batches are whatever the metric takes. Items never
interact within a batch (no batch norm), so one backward of the summed metric gives
every item's own gradient.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from labcoat.inside import _hooks
from labcoat.inside._components import Component

Metric = Callable[[nn.Module, Any], torch.Tensor]


def metric_values(model: nn.Module, batches: Sequence[Any], metric: Metric) -> np.ndarray:
    """(N,) the metric of every item, batches concatenated."""
    with _evaluating(model), torch.no_grad():
        return np.concatenate([_numbers(metric(model, b)) for b in batches])


def exact_patching(receiver: nn.Module, source: nn.Module, batches: Sequence[Any],
                   metric: Metric, components: Sequence[Component], *,
                   position: int | None = None) -> np.ndarray:
    """(K, N) the receiver's metric with component k's activation taken from `source`.

    position: patch one position (dim 1) only; None: every position.
    """
    components = list(components)
    out = np.empty((len(components), 0))
    with _evaluating(receiver), _evaluating(source), torch.no_grad():
        for batch in batches:
            cached = _capture(source, batch, metric, components)
            rows = []
            for c in components:
                with _hooks.patch(receiver, c, cached[c.name], position):
                    rows.append(_numbers(metric(receiver, batch)))
            out = np.concatenate([out, np.array(rows).reshape(len(components), -1)], axis=1)
    return out


def attribution_patching(receiver: nn.Module, source: nn.Module, batches: Sequence[Any],
                         metric: Metric, components: Sequence[Component], *,
                         position: int | None = None) -> np.ndarray:
    """(K, N) first-order estimate of exact patching's change of the receiver's metric:
    ``(a_source - a_receiver) . dmetric/da`` per item, one forward and backward per batch
    (plus the source's forward)."""
    components = list(components)
    out = np.empty((len(components), 0))
    with _evaluating(receiver), _evaluating(source):
        for batch in batches:
            with torch.no_grad():
                cached = _capture(source, batch, metric, components)
            rows = _gradient_dot(receiver, batch, metric, components, cached, position)
            out = np.concatenate([out, rows], axis=1)
    return out


def integrated_attribution(control: nn.Module, variant: nn.Module, batches: Sequence[Any],
                           metric: Metric, components: Sequence[Component], *, steps: int = 4,
                           position: int | None = None) -> np.ndarray:
    """(K, N) attribution of the change from the control to the variant, the gradient
    integrated along the straight path between the two models' weights:
    ``(a_V - a_C) . mean over alpha of dmetric/da at the model (1 - alpha) C + alpha V``.

    Integrated gradients (Sundararajan et al. 2017) as EAP-IG (Hanna et al. 2024) uses
    them, with the path between the two models' weights in place of the path between a
    clean and a corrupted input (between arms, the input is the same; the weights differ).
    The trapezoid rule on `steps` equal intervals takes steps + 1 gradients; steps=1 is
    the two ends (`attribution_patching` from each side, averaged); 0 is the control's
    gradient alone (classic attribution patching). The models need the same parameter
    names and shapes (the same architecture, as patching does).
    """
    if steps < 0:
        raise ValueError(f"steps={steps} must be >= 0")
    components = list(components)
    if steps == 0:
        return attribution_patching(control, variant, batches, metric, components,
                                    position=position)
    alphas = [i / steps for i in range(steps + 1)]
    weights = [(0.5 if i in (0, steps) else 1.0) / steps for i in range(steps + 1)]
    between = _Blend(control, variant) if steps > 1 else None
    out = np.empty((len(components), 0))
    with _evaluating(control), _evaluating(variant):
        for batch in batches:
            with torch.no_grad():
                at_c = _capture(control, batch, metric, components)
                at_v = _capture(variant, batch, metric, components)
            total = np.zeros((len(components), 0))
            for alpha, weight in zip(alphas, weights, strict=True):
                model = (control if alpha == 0 else variant if alpha == 1
                         else between.at(alpha))  # type: ignore[union-attr]
                rows = weight * _gradient_dot(model, batch, metric, components, at_v,
                                              position, starts=at_c)
                total = rows if total.size == 0 else total + rows
            out = np.concatenate([out, total], axis=1)
    return out


class _Blend:
    """One copy of the control whose floating-point weights and buffers are set to
    ``(1 - alpha) control + alpha variant`` on demand (tied weights counted once)."""

    def __init__(self, control: nn.Module, variant: nn.Module) -> None:
        self.model = copy.deepcopy(control).eval()  # no dropout, as `_evaluating`
        own = _floats(control)
        other = _floats(variant)
        if own.keys() != other.keys() or any(own[k].shape != other[k].shape for k in own):
            raise ValueError("the control and the variant differ in their parameters' names "
                             "or shapes; integrated attribution needs one architecture "
                             "(steps <= 1 does not)")
        self.ends = [(t, own[name], other[name]) for name, t in _floats(self.model).items()]

    def at(self, alpha: float) -> nn.Module:
        with torch.no_grad():
            for t, start, end in self.ends:
                t.copy_(torch.lerp(start, end, alpha))
        return self.model


def _floats(model: nn.Module) -> dict[str, torch.Tensor]:
    tensors = dict(model.named_parameters())  # shared (tied) parameters once
    tensors.update(model.named_buffers())
    return {k: v for k, v in tensors.items() if v.is_floating_point()}


def _gradient_dot(model: nn.Module, batch: Any, metric: Metric, components: list[Component],
                  sources: dict[str, torch.Tensor], position: int | None,
                  starts: dict[str, torch.Tensor] | None = None) -> np.ndarray:
    """(K, B) ``(source - start) . dmetric/da`` per component and item at `model`'s
    activations; start: the model's own activation unless `starts` names one."""
    found: list[tuple[Component, torch.Tensor, torch.Tensor]] = []
    with torch.enable_grad(), _hooks.differentiate(model, components, sources, position,
                                                   found, starts):
        total = metric(model, batch).sum()
        tensors = _unique([t for _, t, _ in found])
        grads = dict(zip(map(id, tensors),
                         torch.autograd.grad(total, tensors, allow_unused=True),
                         strict=True))
    by_name: dict[str, torch.Tensor] = {}
    for c, tensor, change in found:
        grad = grads[id(tensor)]
        by_name[c.name] = (torch.zeros(change.shape[0]) if grad is None
                           else (change * grad).flatten(1).sum(1))
    rows = [by_name[c.name].detach().double().numpy() for c in components]
    return np.array(rows).reshape(len(components), -1)


def _capture(model: nn.Module, batch: Any, metric: Metric, components: list[Component]
             ) -> dict[str, torch.Tensor]:
    into: dict[str, list[torch.Tensor]] = {}
    with _hooks.capture(model, components, into):
        metric(model, batch)
    missing = [c.name for c in components if c.name not in into]
    if missing:
        raise ValueError(f"components {', '.join(missing)} did not run in the model's "
                         "forward pass; name modules the forward calls")
    repeated = [c.name for c in components if len(into[c.name]) != 1]
    if repeated:
        raise ValueError(f"components {', '.join(repeated)} ran more than once per forward "
                         "(a module reused in a loop); patch a module called once")
    return {name: values[0] for name, values in into.items()}


def _unique(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    seen: dict[int, torch.Tensor] = {}
    for t in tensors:
        seen.setdefault(id(t), t)
    return list(seen.values())


def _numbers(values: torch.Tensor) -> np.ndarray:
    return values.detach().double().reshape(-1).numpy()


@contextmanager
def _evaluating(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and denormals flushed while patching, then as it was.

    Flushing matters: models trained at a high learning rate carry denormal floats,
    which x86 CPUs process many times slower (see tinylm's `_torch_settings`).
    """
    was = model.training
    model.eval()
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)  # torch's default; it offers no getter
        model.train(was)
