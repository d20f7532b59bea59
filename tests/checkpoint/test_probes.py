"""Built-in replay probes against brute-force references (numpy loops, torch's own MHA)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from labcoat.torch.checkpoint._probes import Activations, AttentionEntropy, GradNorms, ProbeContext
from labcoat.workloads.tinylm._model import CausalSelfAttention


def _context(**modules: nn.Module) -> ProbeContext:
    return ProbeContext(step=1, modules=modules, optimizers={})


def test_causal_attention_entropy_equals_a_loop_over_positions():
    torch.manual_seed(0)
    attn = CausalSelfAttention(width=8, heads=2, dropout=0.0)
    probe = AttentionEntropy()
    probe.attach(_context(model=attn))
    x = torch.randn(3, 5, 8)
    attn(x)  # a training forward (train mode, grad enabled)
    found = probe.collect()

    q, k, _ = (t.detach().numpy().astype(np.float64) for t in attn.qkv(x).split(8, dim=2))
    for head in range(2):
        cols = slice(4 * head, 4 * head + 4)
        entropies = []
        for b in range(3):
            for t in range(5):
                scores = np.array([q[b, t, cols] @ k[b, s, cols] / 2.0 for s in range(t + 1)])
                p = np.exp(scores - scores.max())
                p /= p.sum()
                entropies.append(-(p * np.log(p)).sum())
        assert found[f"model/head{head}"] == pytest.approx(np.mean(entropies), rel=1e-5)


def test_mha_entropy_uses_the_weights_it_returns():
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    probe = AttentionEntropy()
    probe.attach(_context(model=mha))
    x = torch.randn(2, 4, 8)
    _, weights = mha(x, x, x)  # default: weights averaged over heads, (B, T, T)
    p = weights.detach().double()
    expected = float(-(p * p.log()).sum(-1).mean())
    assert probe.collect() == {"model/heads_averaged": pytest.approx(expected, rel=1e-9)}


def test_eval_forwards_are_not_recorded_and_stats_match_numpy():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
    probe = Activations()
    probe.attach(_context(model=model))
    with torch.no_grad():
        model(torch.randn(5, 4))  # an eval-like forward: ignored
    assert probe.collect() == {}
    x = torch.randn(5, 4)
    out = model[0](x).detach().numpy().astype(np.float64)
    model(x)
    found = probe.collect()
    assert found["0/mean"] == pytest.approx(out.mean())
    assert found["0/std"] == pytest.approx(out.std(ddof=1))
    assert found["0/rms"] == pytest.approx(math.sqrt((out**2).mean()))
    assert found["0/absmax"] == pytest.approx(np.abs(out).max())
    assert found["1/absmax"] == pytest.approx(np.maximum(out, 0).max())


def test_grad_norms_are_read_before_the_optimizer_step():
    torch.manual_seed(3)
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    probe = GradNorms()
    probe.attach(ProbeContext(step=1, modules={"model": model}, optimizers={"opt": opt}))
    model(torch.randn(4, 3)).square().sum().backward()
    expected = {n: float(p.grad.double().norm()) for n, p in model.named_parameters()}
    opt.step()
    found = probe.collect()
    assert found["weight"] == pytest.approx(expected["weight"])
    assert found["bias"] == pytest.approx(expected["bias"])
    assert found["total"] == pytest.approx(math.hypot(*expected.values()))
