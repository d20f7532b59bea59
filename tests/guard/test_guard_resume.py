"""The guard on long healthy runs and across a resume (issue 30, points 1 and 3).

A noiseless regression trained to float32 precision stops moving its weights: its
gradients are rounding noise, not lost updates. A resumed run numbers its steps as the
loop does (from the tracked guard state, or the optimizer's step counter), so its check
steps are the uninterrupted run's. Wrong input to ``guard.record`` is one clear error.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from torch import nn

from labcoat.errors import LabcoatError
from labcoat.torch import Checkpointer, GuardError, watch


def regression(steps: range, model: nn.Module, opt: torch.optim.Optimizer, guard, *,
               noise: float = 0.0, gen: torch.Generator | None = None) -> None:
    """The README's loop: y = sum(x) (+ noise), MSE, one optimizer step per batch."""
    for _ in steps:
        x = torch.randn(32, 8, generator=gen)
        y = x.sum(1, keepdim=True) + noise * torch.randn(32, 1, generator=gen)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        guard.record(loss=loss.item())


def test_a_fit_converged_to_float_precision_is_not_a_lost_update() -> None:
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    guard = watch(model, opt)
    weight = model.weight.detach().clone()
    regression(range(500), model, opt, guard)
    # the premise: the weights stopped moving (loss ~1e-13, updates below float32's ulp)
    regression(range(63), model, opt, guard)
    assert not guard.alerts, guard.alerts
    assert not torch.equal(weight, model.weight)
    stuck = model.weight.detach().clone()
    regression(range(42), model, opt, guard)
    # stopped to float32's resolution: each weight sits still or steps between neighbours
    # of 1.0 (which, depends on the CPU's kernels: one ulp apart on some machines)
    assert torch.allclose(stuck, model.weight, rtol=0, atol=2 * torch.finfo(torch.float32).eps)
    assert not guard.alerts, guard.alerts


def test_a_tiny_lr_late_in_a_healthy_run_is_still_a_lost_update() -> None:
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    guard = watch(model, opt)
    regression(range(200), model, opt, guard, noise=0.5)  # gradients stay noise-sized
    assert not guard.alerts
    opt.param_groups[0]["lr"] = 1e-12  # a schedule bug: updates far below the resolution
    regression(range(100), model, opt, guard, noise=0.5)
    assert "update.lost" in {a.rule for a in guard.alerts}


def train_with_checkpoints(directory: Path, last: int, *, track_guard: bool,
                           optimizer: str = "sgd", zero_grad_from: int | None = None,
                           noise: float = 1.0):
    """One process of a resumable run (watch() before restore(), as in the README)."""
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = (torch.optim.SGD(model.parameters(), lr=0.05) if optimizer == "sgd"
           else torch.optim.Adam(model.parameters(), lr=0.01))
    guard = watch(model, opt)
    ckpt = Checkpointer(directory, every=50)
    ckpt.track(model=model, optimizer=opt, **({"guard": guard} if track_guard else {}))
    start = ckpt.restore()
    for step in range(start + 1, last + 1):
        x = torch.randn(32, 8)
        y = x.sum(1, keepdim=True) + noise * torch.randn(32, 1)
        loss = nn.functional.mse_loss(model(x), y)
        if zero_grad_from is None or step < zero_grad_from:
            opt.zero_grad()
        loss.backward()
        opt.step()
        guard.record(loss=loss.item())
        if ckpt.should_save(step):
            ckpt.save(step)
    ckpt.close()
    guard.close()
    return start, guard


@pytest.mark.parametrize("track_guard, optimizer", [(True, "sgd"), (False, "adam")])
def test_a_resumed_guard_numbers_steps_as_the_loop_does(tmp_path: Path, track_guard: bool,
                                                        optimizer: str) -> None:
    train_with_checkpoints(tmp_path, 100, track_guard=track_guard, optimizer=optimizer)
    start, guard = train_with_checkpoints(tmp_path, 160, track_guard=track_guard,
                                          optimizer=optimizer, zero_grad_from=130)
    assert start == 100 and guard.step == 160
    first = min(a.step for a in guard.alerts if a.rule == "grad.not_reset")
    assert 130 <= first <= 132  # the loop's step (a full step at most 2 later), not 30


@pytest.mark.parametrize("track_guard", [True, False])
def test_a_converged_fit_resumed_raises_no_lost_update(tmp_path: Path,
                                                       track_guard: bool) -> None:
    """The README loop resumed late (tracked guard: its gradient history comes back;
    untracked: unknown, so update.lost does not judge a fit it cannot tell from stuck)."""
    train_with_checkpoints(tmp_path, 150, track_guard=track_guard, noise=0.0)
    start, guard = train_with_checkpoints(tmp_path, 450, track_guard=track_guard, noise=0.0)
    assert start == 150 and guard.step == (450 if track_guard else 300)  # SGD: no counter
    assert not [a for a in guard.alerts if a.rule == "update.lost"], guard.alerts


def test_a_resume_the_guard_cannot_number_says_so_once(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    train_with_checkpoints(tmp_path, 100, track_guard=False)
    with caplog.at_level(logging.WARNING, logger="labcoat.torch.guard"):
        start, guard = train_with_checkpoints(tmp_path, 120, track_guard=False)
    said = [m for m in (r.getMessage() for r in caplog.records)
            if "optimizer was restored after watch()" in m]
    assert start == 100 and len(said) == 1
    assert "ckpt.track(..., guard=guard)" in said[0] and "start_step=start" in said[0]


def test_pretrained_weights_loaded_after_watch_are_not_a_resume(
        caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    guard = watch(model, opt)
    model.load_state_dict(nn.Linear(8, 1).state_dict())  # fine-tuning from a checkpoint
    with caplog.at_level(logging.WARNING, logger="labcoat.torch.guard"):
        regression(range(5), model, opt, guard)
    assert not caplog.records and guard.step == 5


def test_a_guard_state_from_another_program_is_refused() -> None:
    model = nn.Linear(2, 1)
    guard = watch(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(GuardError, match="not a guard state"):
        guard.load_state_dict({"step": "ten"})


@pytest.mark.parametrize("loss, shown", [("high", "str 'high'"), ([0.5], "list [0.5]"),
                                         (torch.ones(3), "Tensor of shape (3,)"),
                                         (True, "bool True")])
def test_a_loss_that_is_not_a_number_is_one_clear_error(loss: object, shown: str) -> None:
    model = nn.Linear(2, 1)
    guard = watch(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(LabcoatError) as caught:
        guard.record(loss=loss)
    message = str(caught.value)
    assert message.startswith("guard.record(loss=...) takes a number or a one-element tensor")
    assert shown in message and caught.value.__cause__ is None
    guard.record(loss=torch.tensor(0.5))  # what it accepts still works
    guard.record(loss=1)
