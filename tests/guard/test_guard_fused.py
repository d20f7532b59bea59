"""A fused optimizer updates parameters in place without bumping their version counters
(torch 2.13): the guard must not read its steps as skipped (found through Trainer, whose
default optimizer is adamw_torch_fused; a hand-written loop with fused=True had the same
false alert at step 1)."""

import torch
from torch import nn

from labcoat.torch import watch


def _train(fused: bool, lr: float) -> list[tuple[int, str]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, fused=fused)
    guard = watch(model, opt)
    for _ in range(12):
        x = torch.randn(32, 8)
        loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        guard.record(loss=loss.item())
    guard.close()
    return [(a.step, a.rule) for a in guard.alerts]


def test_a_fused_optimizer_raises_no_false_alert():
    assert _train(fused=True, lr=1e-3) == _train(fused=False, lr=1e-3) == []

