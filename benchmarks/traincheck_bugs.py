"""Peer benchmark (partial): TrainCheck's bug classes re-expressed on CPU, guard on defaults.

    .venv/bin/python benchmarks/traincheck_bugs.py [--seeds 10]

Each case is one small plain-PyTorch loop with the bug switched on from step
ONSET, and its clean twin (same loop, bug removed) for false alarms. The guard
runs with ``watch(model, optimizer)`` defaults and ``guard.record(loss, batch)``.
Mechanisms are our own code, named after the TrainCheck-Evaluation-Workloads
id they re-express (OrderLab, silent-issue-detection/README.md). Partial: only
the ids listed in CASES are reproduced so far (see benchmarks/README.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from labcoat.torch import watch

STEPS, ONSET = 60, 30


class _Net(nn.Module):
    """An MLP whose hidden layer goes through functional dropout."""

    def __init__(self, ungated_dropout: bool) -> None:
        super().__init__()
        self.stem = nn.Linear(16, 32)
        self.head = nn.Linear(32, 4)
        self.ungated = ungated_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        return self.head(F.dropout(h, 0.1, training=True if self.ungated else self.training))


def _eval_dropout(bug: bool, seed: int) -> tuple[nn.Module, Callable[[int], None]]:
    """Functional dropout not gated on self.training: eval forwards draw random numbers
    (a miss class named in issue 18: attention dropout passed as a constant; which
    TrainCheck id it re-expresses is not yet checked against upstream). The bug exists from
    the start; onset = the first evaluation (step 10)."""
    model = _Net(ungated_dropout=bug)
    return model, lambda step: None


def _frozen_trained(bug: bool, seed: int) -> tuple[nn.Module, Callable[[int], None]]:
    """mmpretrain-702 (frozen_stages ignored): the config freezes the stem (declared with
    watch(frozen=...)), but from ONSET the framework's train() re-enables its gradients,
    so the frozen stage is silently trained. Clean twin: the stem stays frozen."""
    model = _Net(ungated_dropout=False)
    model.stem.requires_grad_(False)

    def hook(step: int) -> None:
        if bug and step == ONSET:
            model.stem.requires_grad_(True)
    return model, hook


class _Head(nn.Module):
    """The head of `_Net`, optionally run under ``autocast(enabled=False)`` from a switch."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.outside = False

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if not self.outside:
            return self.inner(h)
        with torch.autocast("cpu", enabled=False):  # the bug: fp32 matmul inside a bf16 run
            return self.inner(h.float())


def _autocast_leak(bug: bool, seed: int) -> tuple[nn.Module, Callable[[int], None]]:
    """lightning-thunder-725 class (linear outputs leave the autocast dtype): the loop trains
    under ``torch.autocast("cpu", dtype=torch.bfloat16)``; from ONSET the head runs inside
    ``autocast(enabled=False)`` (an upcast region a library or refactor added), so its
    matmul is fp32. Clean twin: the head stays under autocast."""
    model = _Net(ungated_dropout=False)
    model.head = head = _Head(model.head)

    def hook(step: int) -> None:
        if bug and step == ONSET:
            head.outside = True
    return model, hook


class _Noisy(torch.utils.data.Dataset):
    """Distinct items (a fixed random base) plus NumPy noise augmentation drawn in the
    worker from the global ``np.random``; labels from the base."""

    def __init__(self, seed: int, size: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.base = torch.randn(size, 16, generator=g)
        self.labels = torch.randint(0, 4, (size,), generator=g)

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        noise = torch.from_numpy(np.random.normal(0, 0.1, 16).astype(np.float32))
        return self.base[i] + noise, self.labels[i]


class _SameSeed:
    """worker_init_fn seeding every worker's NumPy with the run's one seed (the bug)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __call__(self, worker_id: int) -> None:
        np.random.seed(self.seed)


def _per_worker_seed(worker_id: int) -> None:
    np.random.seed(torch.initial_seed() % 2**32)  # torch's per-worker seed: the fix


def _worker_rng(bug: bool, seed: int) -> tuple[nn.Module, Callable[[int], None],
                                               torch.utils.data.DataLoader]:
    """Loader workers sharing one RNG (issue 18 miss class; the pre-1.9 PyTorch NumPy fork
    bug re-expressed with a worker_init_fn that seeds every worker alike): 2 workers,
    NumPy noise augmentation, so worker 0's k-th batch gets the same noise as worker 1's.
    The bug exists from step 1 (onset 1); the loader is given with ``loaders=``. Clean twin:
    the workers seed NumPy from ``torch.initial_seed()``."""
    loader = torch.utils.data.DataLoader(
        _Noisy(seed, 32 * STEPS), batch_size=32, shuffle=True, num_workers=2,
        worker_init_fn=_SameSeed(seed) if bug else _per_worker_seed,
        generator=torch.Generator().manual_seed(seed))
    return _Net(ungated_dropout=False), lambda step: None, loader


OPTIONS = {_frozen_trained: {"frozen": ["stem.*"]}}  # declarations of intent
AUTOCAST = {_autocast_leak}  # cases whose loop trains under CPU bfloat16 autocast
ONSETS = {_eval_dropout: 10, _worker_rng: 1}  # first step the bug can show (else ONSET)
CASES = {"eval-random (issue 18 miss class)": _eval_dropout,
         "mmpretrain-702 (frozen stage trained)": _frozen_trained,
         "lightning-thunder-725 (autocast dtype)": _autocast_leak,
         "worker-rng (issue 18 miss class)": _worker_rng}


def run(case: Callable, bug: bool, seed: int) -> list[tuple[int, str]]:
    torch.manual_seed(seed)
    made = case(bug, seed)  # (model, hook) or (model, hook, loader): a case's own data
    model, hook = made[:2]
    loader = made[2] if len(made) > 2 else None
    options = dict(OPTIONS.get(case, {}))
    if loader is not None:
        options["loaders"] = [loader]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = watch(model, opt, **options)
    g = torch.Generator().manual_seed(seed)
    batches = iter(loader) if loader is not None else None
    for step in range(1, STEPS + 1):
        hook(step)
        model.train()
        if batches is not None:
            x, y = next(batches)
        else:
            x, y = torch.randn(32, 16, generator=g), torch.randint(0, 4, (32,), generator=g)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=case in AUTOCAST):
            loss = F.cross_entropy(model(x).float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        guard.record(loss=loss.item(), batch=(x, y))
        if step % 10 == 0:
            model.eval()
            with torch.no_grad():
                model(x)
    guard.close()
    return [(a.step, a.rule) for a in guard.alerts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    seeds = range(parser.parse_args().seeds)
    print(f"{'id':42} {'caught':>7} {'rule':24} {'latency':>8} {'false alarms':>13}")
    for name, case in CASES.items():
        hits = [run(case, True, s) for s in seeds]
        clean = [run(case, False, s) for s in seeds]
        caught = sum(bool(h) for h in hits)
        rules = sorted({h[0][1] for h in hits if h})
        onset = ONSETS.get(case, ONSET)
        lat = [h[0][0] - onset for h in hits if h]
        fa = sum(bool(c) for c in clean)
        print(f"{name:42} {caught:>3}/{len(seeds):<3} {','.join(rules) or '-':24} "
              f"{(max(lat) if lat else '-')!s:>8} {fa:>6}/{len(seeds)}")


if __name__ == "__main__":
    main()
