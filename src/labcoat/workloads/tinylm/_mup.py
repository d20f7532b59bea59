"""Maximal update parametrization (muP) for tinylm, and the coordinate check that verifies it.

muP (Yang & Hu 2021, "Tensor Programs IV"; Yang et al. 2022, "Tensor Programs
V") scales initialization, multipliers and per-layer learning rates with width
so that every activation, and every update of it, stays the same size as the
model widens; then the best learning rate found on a narrow model transfers to
a wide one. We follow the formulation of Tensor Programs V, Table 8 (the
"easier implementation" variant the authors' `mup` package implements: MuReadout
multiplies the readout's input by 1/width_mult, MuAdam divides the Adam learning
rate of hidden matrices by width_mult and multiplies their decoupled weight
decay by it), with width_mult = width / base_width:

- hidden matrices (attention qkv and proj, MLP up and down): init std divided
  by sqrt(width_mult) (variance ~ 1/fan_in); Adam lr / width_mult and weight
  decay * width_mult (their product, AdamW's actual decay rate, is unchanged);
- embeddings, biases, LayerNorms ("vector-like": one width dimension): init
  and lr unchanged;
- readout: the LM head's input multiplied by 1/width_mult (works with tied
  embeddings: MuSharedReadout); an untied head starts at zero;
- attention logits scaled by 1/d (head width d) instead of 1/sqrt(d), as
  sqrt(d_base)/d so that it equals 1/sqrt(d) at the base width (the `mup`
  README's "8/d" for d_base = 64); the query projection starts at zero.

At width == base_width everything equals the standard parametrization except
the zero query (and untied readout), so a learning rate tuned at the base width
in either parametrization is the one muP carries to other widths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from labcoat.workloads.tinylm._model import TinyLM

PARAMETRIZATIONS = ("standard", "mup")
# Parameters with two width dimensions (fan_in and fan_out both scale with width).
HIDDEN_MATRICES = ("attn.qkv.weight", "attn.proj.weight", "mlp.up.weight", "mlp.down.weight")


def width_mult(width: int, base_width: int) -> float:
    return width / base_width


def mup_model_options(width: int, heads: int, base_width: int) -> dict[str, float]:
    """TinyLM keyword arguments for muP: attention scale sqrt(d_base)/d, output multiplier
    1/width_mult (d: head width; equal to the standard values at width == base_width)."""
    d, d_base = width / heads, base_width / heads
    return {"attn_scale": math.sqrt(d_base) / d, "output_mult": 1.0 / width_mult(width,
                                                                                  base_width)}


def is_hidden_matrix(name: str) -> bool:
    return name.endswith(HIDDEN_MATRICES)


@torch.no_grad()
def apply_mup_init(model: TinyLM, base_width: int) -> None:
    """Turn a freshly `init_weights`-initialized TinyLM into muP's initialization.

    Rescales in place (no new random draws, so the init stream is unchanged):
    hidden matrices by 1/sqrt(width_mult); the query rows of every qkv weight
    and bias to zero; an untied LM head to zero.
    """
    width = model.tok_emb.weight.shape[1]
    scale = 1.0 / math.sqrt(width_mult(width, base_width))
    for name, p in model.named_parameters():
        if is_hidden_matrix(name):
            p.mul_(scale)
    for block in model.blocks:
        block.attn.qkv.weight[:width].zero_()  # rows 0..C-1 produce q
        block.attn.qkv.bias[:width].zero_()
    if model.head.weight is not model.tok_emb.weight:
        model.head.weight.zero_()


def mup_param_groups(model: nn.Module, *, lr: float, weight_decay: float, base_width: int
                     ) -> list[dict[str, Any]]:
    """AdamW parameter groups for muP (as `mup.MuAdamW`).

    Each group carries ``lr_scale``, its lr as a multiple of the schedule's lr,
    which the training loop applies at every step.
    """
    width = model.tok_emb.weight.shape[1]
    mult = width_mult(width, base_width)
    hidden, matrices, vectors = [], [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if is_hidden_matrix(name):
            hidden.append(p)
        elif p.dim() >= 2:
            matrices.append(p)
        else:
            vectors.append(p)
    return [
        {"params": hidden, "lr": lr / mult, "lr_scale": 1.0 / mult,
         "weight_decay": weight_decay * mult},
        {"params": matrices, "lr": lr, "lr_scale": 1.0, "weight_decay": weight_decay},
        {"params": vectors, "lr": lr, "lr_scale": 1.0, "weight_decay": 0.0},
    ]


# --- coordinate check ------------------------------------------------------------------------


@dataclass(frozen=True)
class CoordCheck:
    """Activation sizes across widths (Yang et al. 2022, §5 and the `mup` README's coord check).

    l1: layer -> (len(widths), steps + 1) mean |x| of that layer's output on a
    fixed batch, column t measured after t optimizer updates (t = 0: at init).
    Under muP every row should be flat in width once training has started;
    under the standard parametrization with Adam the outputs grow with width.
    """

    parametrization: str
    widths: tuple[int, ...]
    steps: int
    lr: float
    l1: dict[str, np.ndarray]

    def slope(self, layer: str, step: int = -1) -> float:
        """Log-log slope of mean |x| against width at `step`: ~0 flat, ~0.5 grows as sqrt(width)."""
        y = np.log(self.l1[layer][:, step])
        x = np.log(np.asarray(self.widths, dtype=float))
        return float(np.polyfit(x, y, 1)[0])

    def growth(self, layer: str, step: int = -1) -> float:
        """mean |x| at the widest width divided by that at the narrowest, at `step`."""
        col = self.l1[layer][:, step]
        return float(col[-1] / col[0])

    def table(self, step: int = -1) -> str:
        """One line per layer: mean |x| per width at `step`, and the log-log slope."""
        head = f"{'layer':<14}" + "".join(f"{w:>10}" for w in self.widths) + "     slope"
        lines = [head]
        for layer, values in self.l1.items():
            cells = "".join(f"{v:>10.4g}" for v in values[:, step])
            lines.append(f"{layer:<14}{cells}{self.slope(layer, step):>10.2f}")
        return "\n".join(lines)


def coord_check(widths: Sequence[int] = (32, 64, 128, 256), *, parametrization: str = "mup",
                steps: int = 4, lr: float = 2e-2, base_width: int = 32, depth: int = 2,
                heads: int = 4, batch_size: int = 32, seed: int = 0,
                threads: int | None = 1) -> CoordCheck:
    """Train each width for `steps` AdamW updates on one fixed batch and record, before
    each update and after the last, the mean |x| of: the embedding sum, every
    block's attention and MLP outputs and residual stream, and the logits.

    Deterministic given `seed` (init, data and the batch all derive from it).
    """
    from labcoat.workloads.tinylm._tasks import TrainStream
    from labcoat.workloads.tinylm._train import (
        Config,
        _torch_settings,
        build_model,
        build_optimizer,
        masked_loss,
    )

    if parametrization not in PARAMETRIZATIONS:
        raise ValueError(f"parametrization={parametrization!r}; choose between 'standard' and "
                         "'mup'")
    widths = tuple(int(w) for w in widths)
    if len(widths) < 2 or any(w % heads for w in widths):
        raise ValueError(f"widths={widths} must be two or more, each divisible by heads={heads}")
    l1: dict[str, list[list[float]]] = {}
    for width in widths:
        cfg = Config(width=width, depth=depth, heads=heads, lr=lr, warmup=0,
                     schedule="constant", steps=max(steps, 1), batch_size=batch_size,
                     seed=seed, parametrization=parametrization, mup_base_width=base_width,
                     threads=threads, eval_items=1)
        with _torch_settings(cfg), torch.random.fork_rng(devices=[]):
            model = build_model(cfg)
            optimizer = build_optimizer(model, cfg)
            inputs, labels = TrainStream(cfg.seed_for("data"), set(), cfg.tasks).batch(batch_size)
            seen: dict[str, float] = {}
            hooks = [m.register_forward_hook(_recorder(seen, name))
                     for name, m in _watched(model).items()]
            rows: dict[str, list[float]] = {}
            try:
                model.train()
                for t in range(steps + 1):
                    optimizer.zero_grad(set_to_none=True)
                    loss = masked_loss(model(inputs), labels)
                    for name, value in seen.items():
                        rows.setdefault(name, []).append(value)
                    if t < steps:
                        loss.backward()
                        optimizer.step()
            finally:
                for h in hooks:
                    h.remove()
        for name, values in rows.items():
            l1.setdefault(name, []).append(values)
    return CoordCheck(parametrization=parametrization, widths=widths, steps=steps, lr=lr,
                      l1={k: np.array(v) for k, v in l1.items()})


def _watched(model: TinyLM) -> dict[str, nn.Module]:
    out: dict[str, nn.Module] = {"embedding": model.dropout}
    for i, block in enumerate(model.blocks):
        out[f"block{i}.attn"] = block.attn
        out[f"block{i}.mlp"] = block.mlp
        out[f"block{i}"] = block
    out["logits"] = model.head
    return out


def _recorder(store: dict[str, float], name: str) -> Any:
    def hook(module: nn.Module, args: Any, output: torch.Tensor) -> None:
        store[name] = float(output.detach().abs().mean())
    return hook
