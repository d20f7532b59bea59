"""Forward hooks that read, replace and differentiate one component's activation.

Every hook sees the module's input and output as the model computes them, so patching
needs nothing of the model but its module paths. Activations are (B, T, ...) with the
batch first; `position` (an index into dim 1) restricts a patch to one position, as
TransformerLens's ``*_by_pos`` patching does; None patches every position.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from labcoat.inside._components import Component


def value(component: Component, module: nn.Module, inputs: tuple[Any, ...],
          output: torch.Tensor | None) -> torch.Tensor:
    """The component's activation, from its module's input and output."""
    if component.kind == "output":
        return _tensor(output, component)
    if component.kind == "update":
        return _tensor(output, component) - _tensor(inputs[0], component)
    x = _tensor(inputs[0], component)
    sl = _slice(component, x.shape[-1])
    if component.kind == "head_input":
        return x[..., sl]
    weight = module.weight  # a Linear projection: the head's share of its output
    return x[..., sl] @ weight[:, sl].T


@contextmanager
def capture(model: nn.Module, components: list[Component],
            into: dict[str, list[torch.Tensor]]) -> Iterator[None]:
    """Append each component's activation (detached) to ``into[name]`` at every forward."""
    handles = []
    for c in components:
        module = model.get_submodule(c.module)

        def hook(mod: nn.Module, inputs: tuple[Any, ...], output: Any, c: Component = c) -> None:
            into.setdefault(c.name, []).append(value(c, mod, inputs, output).detach())
        handles.append(module.register_forward_hook(hook))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def patch(model: nn.Module, component: Component, source: torch.Tensor,
          position: int | None = None) -> Iterator[None]:
    """While open, the component's activation is `source` (another model's, same input)."""
    module = model.get_submodule(component.module)
    if component.kind == "head_input":
        def pre(mod: nn.Module, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
            x = _tensor(inputs[0], component).clone()
            sl = _slice(component, x.shape[-1])
            _assign(x, (..., sl), source, position)
            return (x, *inputs[1:])
        handle = module.register_forward_pre_hook(pre)
    else:
        def hook(mod: nn.Module, inputs: tuple[Any, ...], output: Any) -> torch.Tensor:
            out = _tensor(output, component)
            here = value(component, mod, inputs, output)
            return out + _at(source - here, position)
        handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def differentiate(model: nn.Module, components: list[Component],
                  sources: dict[str, torch.Tensor], position: int | None,
                  found: list[tuple[Component, torch.Tensor, torch.Tensor]],
                  starts: dict[str, torch.Tensor] | None = None) -> Iterator[None]:
    """Record, per component, the tensor whose gradient attribution needs and the change a
    patch would make to it: ``(component, tensor, source - own activation)``.

    The tensor is the module's output (its input for ``head_input``): a patch adds the
    change there. A hooked tensor that does not require grad (frozen weights, integer
    inputs) becomes a leaf that does, so every later one is differentiable too.
    starts: where given, the change is ``source - starts[name]`` instead (a gradient taken
    on a path between two models weighs the change between the path's two ends).
    """
    handles = []

    def start(c: Component, own: torch.Tensor) -> torch.Tensor:
        return own if starts is None else starts[c.name]

    for c in components:
        module = model.get_submodule(c.module)
        if c.kind == "head_input":
            def pre(mod: nn.Module, inputs: tuple[Any, ...], c: Component = c) -> Any:
                x = _differentiable(_tensor(inputs[0], c))
                sl = _slice(c, x.shape[-1])
                change = torch.zeros_like(x)
                change[..., sl] = sources[c.name] - start(c, x[..., sl].detach())
                found.append((c, x, _at(change, position)))
                return (x, *inputs[1:])
            handles.append(module.register_forward_pre_hook(pre))
        else:
            def hook(mod: nn.Module, inputs: tuple[Any, ...], output: Any,
                     c: Component = c) -> Any:
                out = _differentiable(_tensor(output, c))
                here = start(c, value(c, mod, inputs, output).detach())
                found.append((c, out, _at(sources[c.name] - here, position)))
                return out
            handles.append(module.register_forward_hook(hook))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _differentiable(x: torch.Tensor) -> torch.Tensor:
    return x if x.requires_grad else x.detach().requires_grad_(True)


def _at(change: torch.Tensor, position: int | None) -> torch.Tensor:
    """`change` at one position of dim 1 only (zero elsewhere), or everywhere."""
    if position is None:
        return change
    kept = torch.zeros_like(change)
    kept[:, position] = change[:, position]
    return kept


def _assign(x: torch.Tensor, index: tuple[Any, ...], source: torch.Tensor,
            position: int | None) -> None:
    if position is None:
        x[index] = source
    else:
        x[(slice(None), position, *index[1:])] = source[:, position]


def _slice(component: Component, width: int) -> slice:
    assert component.heads is not None and component.head is not None
    size = width // component.heads
    return slice(component.head * size, (component.head + 1) * size)


def _tensor(x: Any, component: Component) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, tuple) and x and isinstance(x[0], torch.Tensor):
        raise TypeError(f"{component.module} returns a tuple; labcoat patches modules that "
                        "return one tensor (name a submodule that does)")
    raise TypeError(f"{component.module}: expected a tensor activation, got {type(x).__name__}")
