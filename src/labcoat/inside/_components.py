"""What can be patched in a model: components named by module path, found or given.

A component is one activation of one module, read and replaced by hooks, so any
``torch.nn.Module`` works without its own model classes (TransformerLens needs its
``HookedTransformer``). Four kinds:

- ``output``: the module's output (an attention module's or an MLP's, or any module's).
- ``update``: a residual block's own contribution, output minus input: patching it
  keeps the receiving model's residual stream and swaps what this block adds (patching
  a block's *output* would swap the whole stream and trivially restore everything).
- ``head``: one head's result, its share of an attention output projection (a
  ``nn.Linear`` whose input is the heads' outputs side by side): ``x[..., h] @ W[:, h].T``
  (TransformerLens's ``hook_result``). A variant whose projection differs only there
  differs only in this component.
- ``head_input``: head h's slice of that projection's input (TransformerLens's
  ``hook_z``), before the projection's weights.

Found (`find_components`): blocks are the items of the largest ``nn.ModuleList``
whose items map a tensor to one of the same shape; in each block its attention
module (name or class mentions "attn"/"attention") and its MLP ("mlp", "ffn",
"feed_forward"); heads where the attention module states its head count (``heads``,
``num_heads``, ``n_heads``, ``num_attention_heads``) and has an output projection
``nn.Linear`` (``proj``, ``out_proj``, ``o_proj``, ``c_proj``, ``dense``) whose input
width that count divides. A trial run checks every found hook fires (torch's
``nn.MultiheadAttention`` calls its ``out_proj`` weights without the module, so its
heads are not offered).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from torch import nn

from labcoat.errors import LabcoatError

Kind = Literal["output", "update", "head", "head_input"]
KINDS: tuple[str, ...] = ("output", "update", "head", "head_input")
_HEAD_COUNTS = ("heads", "num_heads", "n_heads", "num_attention_heads", "n_head")
_PROJECTIONS = ("proj", "out_proj", "o_proj", "c_proj", "dense", "out")
_ATTENTION = re.compile(r"attn|attention", re.IGNORECASE)
_MLP = re.compile(r"mlp|ffn|feed_?forward", re.IGNORECASE)
_HEAD_NAME = re.compile(r"^(?P<attn>.+)\.head(?P<z>_input)?(?P<head>\d+)$")


class UnknownComponent(LabcoatError):
    """A component name that names no module (or no head) of the model."""


@dataclass(frozen=True)
class Component:
    """One patchable activation.

    name: how reports show it (``blocks.0``, ``blocks.0.attn``, ``blocks.0.attn.head2``).
    module: the path of the hooked module (`nn.Module.get_submodule`).
    kind: see the module doc. head, heads: for ``head`` and ``head_input``, which head
    of how many (the projection's input splits into `heads` equal slices).
    group: the name of the component this one is part of ("" for none): a head's
    attention module, an attention module's or MLP's block. Rankings compare the finest
    components (those no other component is part of).
    """

    name: str
    module: str
    kind: Kind = "output"
    head: int | None = None
    heads: int | None = None
    group: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}; choose from {', '.join(KINDS)}")
        if (self.kind in ("head", "head_input")) != (self.head is not None):
            raise ValueError(f"{self.name}: a head index goes with kind head or head_input")
        if self.head is not None and not (self.heads and 0 <= self.head < self.heads):
            raise ValueError(f"{self.name}: head {self.head} is not one of heads={self.heads}")


def find_components(model: nn.Module, *, head_inputs: bool = False) -> list[Component]:
    """The blocks (as updates), attention and MLP outputs and heads (results) labcoat finds
    in `model`, in forward order; ``head_inputs=True`` adds each head's input slice.
    Empty when the model has no ``nn.ModuleList`` of blocks: then name modules."""
    blocks_path, blocks = _block_list(model)
    found: list[Component] = []
    for i, block in enumerate(blocks):
        block_name = f"{blocks_path}.{i}" if blocks_path else str(i)
        found.append(Component(block_name, block_name, "update"))
        for child_name, child in block.named_children():
            path = f"{block_name}.{child_name}"
            label = f"{child_name} {type(child).__name__}"
            if _ATTENTION.search(label):
                found.append(Component(path, path, "output", group=block_name))
                found += _heads(path, child, head_inputs)
            elif _MLP.search(label):
                found.append(Component(path, path, "output", group=block_name))
    return found


def resolve(model: nn.Module, names: Sequence[str], found: Sequence[Component] | None = None
            ) -> list[Component]:
    """Components by name: a found component's name, ``ATTN.headK`` / ``ATTN.head_inputK``
    for a head of a found attention module, any module path (its output), or
    ``PATH:output`` / ``PATH:update`` for that kind (``blocks.0:output`` is the residual
    stream after block 0, where ``blocks.0`` is the block's update)."""
    found = list(found if found is not None else find_components(model, head_inputs=True))
    by_name = {c.name: c for c in found}
    modules = dict(model.named_modules())
    out = []
    for name in names:
        path, _, kind = name.partition(":")
        if kind:
            if kind not in ("output", "update") or path not in modules:
                why = ("no module has this path" if path not in modules else
                       f"':{kind}' is not a kind; use ':output' or ':update'")
                raise UnknownComponent(_unknown(name, found, why))
            out.append(Component(name, path, kind))  # type: ignore[arg-type]
        elif name in by_name:
            out.append(by_name[name])
        elif (match := _HEAD_NAME.match(name)) and match["attn"] in modules:
            heads = _heads(match["attn"], modules[match["attn"]], True)
            kind = "head_input" if match["z"] else "head"
            hit = [c for c in heads if c.kind == kind and c.head == int(match["head"])]
            if not hit:
                raise UnknownComponent(_unknown(name, found, f"{match['attn']} has no head "
                                                             f"{match['head']} labcoat can hook"))
            out.append(hit[0])
        elif name in modules and name:
            out.append(Component(name, name, "output"))
        else:
            raise UnknownComponent(_unknown(name, found, "no module has this path"))
    return out


def leaves(components: Sequence[Component]) -> list[Component]:
    """The components no other listed component is part of (the finest level)."""
    groups = {c.group for c in components}
    return [c for c in components if c.name not in groups]


def check_hooks_fire(model: nn.Module, components: Sequence[Component],
                     run: Callable[[], object]) -> list[Component]:
    """The components whose module runs during `run()` (a forward of the model)."""
    fired: set[str] = set()
    handles = [model.get_submodule(path).register_forward_hook(
        lambda *_, path=path: fired.add(path)) for path in {c.module for c in components}]
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    return [c for c in components if c.module in fired]


def _block_list(model: nn.Module) -> tuple[str, nn.ModuleList]:
    lists = [(path, m) for path, m in model.named_modules() if isinstance(m, nn.ModuleList)]
    lists.sort(key=lambda pm: -len(pm[1]))
    return lists[0] if lists else ("", nn.ModuleList())


def _heads(attn_path: str, attn: nn.Module, head_inputs: bool) -> list[Component]:
    count = next((getattr(attn, a) for a in _HEAD_COUNTS
                  if isinstance(getattr(attn, a, None), int)), None)
    proj_name = next((p for p in _PROJECTIONS
                      if isinstance(getattr(attn, p, None), nn.Linear)), None)
    if not count or proj_name is None:
        return []
    proj: nn.Linear = getattr(attn, proj_name)
    if proj.in_features % count:
        return []
    module = f"{attn_path}.{proj_name}"
    out = [Component(f"{attn_path}.head{h}", module, "head", h, count, group=attn_path)
           for h in range(count)]
    if head_inputs:
        out += [Component(f"{attn_path}.head_input{h}", module, "head_input", h, count,
                          group=attn_path) for h in range(count)]
    return out


def _unknown(name: str, found: Sequence[Component], why: str) -> str:
    names = [c.name for c in found if c.kind != "head_input"]
    listed = ", ".join(names[:16]) + (f", ... ({len(names)} in all)" if len(names) > 16 else "")
    return (f"unknown component {name!r} ({why}); components found: {listed or 'none'}; "
            "or name any module path (its output is patched)")
