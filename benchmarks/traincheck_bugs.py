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


OPTIONS = {_frozen_trained: {"frozen": ["stem.*"]}}  # declarations of intent
CASES = {"eval-random (issue 18 miss class)": _eval_dropout,
         "mmpretrain-702 (frozen stage trained)": _frozen_trained}


def run(case: Callable, bug: bool, seed: int) -> list[tuple[int, str]]:
    torch.manual_seed(seed)
    model, hook = case(bug, seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = watch(model, opt, **OPTIONS.get(case, {}))
    g = torch.Generator().manual_seed(seed)
    for step in range(1, STEPS + 1):
        hook(step)
        model.train()
        x, y = torch.randn(32, 16, generator=g), torch.randint(0, 4, (32,), generator=g)
        loss = F.cross_entropy(model(x), y)
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
        onset = 10 if case is _eval_dropout else ONSET
        lat = [h[0][0] - onset for h in hits if h]
        fa = sum(bool(c) for c in clean)
        print(f"{name:42} {caught:>3}/{len(seeds):<3} {','.join(rules) or '-':24} "
              f"{(max(lat) if lat else '-')!s:>8} {fa:>6}/{len(seeds)}")


if __name__ == "__main__":
    main()
