"""Rules added for TrainCheck's bug classes (benchmarks/traincheck_bugs.py): bug and clean twin."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from labcoat.torch import watch


class _Attn(nn.Module):
    """Dropout applied functionally; `gated` says whether it honours self.training."""

    def __init__(self, gated: bool) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)
        self.gated = gated

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.dropout(self.lin(x), 0.2, training=self.training if self.gated else True)
        return self.out(h)


def _loop(model: nn.Module, steps: int = 12) -> list[str]:
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    guard = watch(model, opt)
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    for step in range(steps):
        model.train()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        guard.record(loss=loss.item(), batch=(x, y))
        if step % 4 == 3:
            model.eval()
            with torch.no_grad():
                model(x)
    guard.close()
    return [a.rule for a in guard.alerts]


def test_eval_random_functional_dropout_is_caught() -> None:
    assert "mode.eval_random" in _loop(_Attn(gated=False))


def test_eval_random_clean_twin_is_quiet() -> None:
    assert "mode.eval_random" not in _loop(_Attn(gated=True))
