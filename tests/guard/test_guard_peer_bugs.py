"""Rules added for TrainCheck's bug classes (benchmarks/traincheck_bugs.py): bug and clean twin."""

from __future__ import annotations

from typing import Any

import numpy as np
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


class _Mixed(nn.Module):
    """An MLP whose head optionally runs under ``autocast(enabled=False)`` (the bug)."""

    def __init__(self, head_fp32: bool) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)
        self.head_fp32 = head_fp32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.lin(x))
        if self.head_fp32:
            with torch.autocast("cpu", enabled=False):
                return self.out(h.float())
        return self.out(h)


def _autocast_loop(model: nn.Module, steps: int = 25) -> list:
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    guard = watch(model, opt)
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        guard.record(loss=loss.item(), batch=(x, y))
    guard.close()
    return guard.alerts


def test_autocast_dtype_linear_outside_autocast_is_caught() -> None:
    alerts = [a for a in _autocast_loop(_Mixed(head_fp32=True))
              if a.rule == "numerics.autocast_dtype"]
    assert len(alerts) == 1  # once per run
    assert alerts[0].step == 1 and alerts[0].evidence["modules"] == ["out"]


def test_autocast_dtype_clean_twin_is_quiet() -> None:
    assert "numerics.autocast_dtype" not in [a.rule for a in _autocast_loop(_Mixed(False))]


def test_autocast_dtype_fp32_run_is_not_judged() -> None:
    """No autocast at the outer forward: float32 linears are what the user asked for."""
    assert "numerics.autocast_dtype" not in _loop(_Mixed(head_fp32=True))


def test_autocast_dtype_hooks_only_at_check_steps() -> None:
    model = _Mixed(head_fp32=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    guard = watch(model, opt)
    x = torch.randn(4, 8)
    model_hooks = len(model._forward_hooks)  # the guard's own, always there
    for _ in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x).float().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert not model.out._forward_hooks and len(model._forward_hooks) == model_hooks
    guard.close()


class _Augmented(torch.utils.data.Dataset):
    """Distinct items with NumPy noise augmentation (the workers' np.random draws it)."""

    def __init__(self, pure_noise: bool = False) -> None:
        self.base = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
        self.pure_noise = pure_noise

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        noise = torch.from_numpy(np.random.normal(size=8).astype(np.float32))
        return (noise if self.pure_noise else self.base[i] + 0.1 * noise), i % 2


def _same_seed(worker_id: int) -> None:
    np.random.seed(0)  # the bug: every worker gets one seed


def _worker_seed(worker_id: int) -> None:
    np.random.seed(torch.initial_seed() % 2**32)  # the fix: each worker its own


def _loader_loop(init: Any, pure_noise: bool = False, watch_loader: bool = True) -> list[str]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = torch.utils.data.DataLoader(_Augmented(pure_noise), batch_size=8, shuffle=True,
                                         num_workers=2, worker_init_fn=init)
    guard = watch(model, opt, loaders=[loader] if watch_loader else [])
    for _ in range(2):  # epochs of 8 steps: judged at step 1 (a check step) and at close
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            guard.record(loss=loss.item(), batch=(x, y))
    guard.close()
    assert loader.worker_init_fn is init  # given back at close
    return [a.rule for a in guard.alerts]


def test_worker_rng_same_seed_in_every_worker_is_caught() -> None:
    assert "data.worker_rng" in _loader_loop(_same_seed)


def test_worker_rng_clean_twins_are_quiet() -> None:
    assert "data.worker_rng" not in _loader_loop(_worker_seed)
    assert "data.worker_rng" not in _loader_loop(None)  # PyTorch's own per-worker seeds


def test_worker_rng_is_invisible_in_the_batches() -> None:
    """Without loaders=, augmented distinct items look like any batches: no batch rule
    fires, which is why the generators are compared instead."""
    assert _loader_loop(_same_seed, watch_loader=False) == []
