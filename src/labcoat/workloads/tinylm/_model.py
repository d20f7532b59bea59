"""A small decoder-only transformer (GPT-2 shape, pre-LayerNorm), written to be read.

Shapes: B batch, T sequence length (<= max_len), C width, H heads, V vocab.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t sees only positions <= t.

    scale: multiplier of the attention logits q.k; None is 1/sqrt(head width)
    (Vaswani et al. 2017); muP uses one proportional to 1/(head width) (see `_mup`).
    """

    def __init__(self, width: int, heads: int, dropout: float,
                 scale: float | None = None) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.scale = scale
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, C) -> (B, T, C)."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, H, T, C/H): each head attends independently.
        q, k, v = (z.view(B, T, self.heads, C // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0,
            scale=self.scale,
        )
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward block, 4x wide with GELU (Radford et al. 2019)."""

    def __init__(self, width: int, dropout: float) -> None:
        super().__init__()
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, C) -> (B, T, C)."""
        return self.dropout(self.down(F.gelu(self.up(x))))


class Block(nn.Module):
    """Pre-LN residual block: x + attn(ln(x)), then x + mlp(ln(x)) (Xiong et al. 2020)."""

    def __init__(self, width: int, heads: int, dropout: float,
                 attn_scale: float | None = None) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, dropout, attn_scale)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = MLP(width, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, C) -> (B, T, C)."""
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """Token + learned position embeddings, `depth` pre-LN blocks, final LN, LM head.

    With `tie_embeddings` the output head reuses the token embedding matrix
    (Press & Wolf 2017), which saves parameters and usually helps at this size.
    Weights are set by `init_weights` from an explicit generator, so the
    initialization never depends on (or disturbs) torch's global RNG.
    `attn_scale` and `output_mult` (the final hidden state is multiplied by it
    before the LM head) are 1/sqrt(head width) and 1 in the standard
    parametrization; `_mup.mup_model_options` sets them for muP.
    """

    def __init__(self, *, vocab_size: int, max_len: int, width: int, depth: int, heads: int,
                 dropout: float = 0.0, tie_embeddings: bool = True,
                 attn_scale: float | None = None, output_mult: float = 1.0) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} must be divisible by heads {heads}")
        self.max_len = max_len
        self.output_mult = output_mult
        self.tok_emb = nn.Embedding(vocab_size, width)
        self.pos_emb = nn.Embedding(max_len, width)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, dropout, attn_scale)
                                    for _ in range(depth))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size, bias=False)
        if tie_embeddings:
            self.head.weight = self.tok_emb.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx: (B, T) token ids -> logits (B, T, V)."""
        T = idx.shape[1]
        if T > self.max_len:
            raise ValueError(f"sequence of {T} tokens exceeds max_len {self.max_len}")
        pos = torch.arange(T, device=idx.device)
        x = self.dropout(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        if self.output_mult != 1.0:
            x = x * self.output_mult
        return self.head(x)

    @torch.no_grad()
    def init_weights(self, generator: torch.Generator) -> None:
        """GPT-2 initialization drawn from `generator` only.

        Linear and embedding weights ~ N(0, 0.02); residual output projections
        scaled by 1/sqrt(2 * depth) so the residual stream's variance does not
        grow with depth (Radford et al. 2019); biases 0; LayerNorm 1 and 0.
        """
        residual_std = 0.02 / math.sqrt(2 * len(self.blocks))
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                std = residual_std if name.endswith(("attn.proj", "mlp.down")) else 0.02
                if module is self.head and self.head.weight is self.tok_emb.weight:
                    continue  # tied: already set through tok_emb
                nn.init.normal_(module.weight, 0.0, std, generator=generator)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
