"""Default-cadence guard rules against bugs that start early, at a resume or mid-run, and their
false-alarm twins (issue 18: onsets, one-shot corruption, false alarms).

Every test watches with the default settings (check steps 1, 21, 42, ...; full steps every
3 and near check steps), so the latencies are the ones users get. A resume is a guard
created with ``start_step`` on a model and optimizer already trained without one.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from labcoat.torch import Guard, watch

VOCAB = 20


class Net(nn.Module):
    """ids (B, T) -> logits: an embedding + linear trunk and a linear head; ``cut`` detaches
    the head's input from the trunk (the mid-run ``.detach()`` bug)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.hidden = nn.Linear(16, 16)
        self.out = nn.Linear(16, VOCAB)
        self.cut = False

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.hidden(self.emb(ids)))
        return self.out(h.detach() if self.cut else h)


class Loop:
    """AdamW on random next-token batches; `pretrain` steps run before the guard (a resume)."""

    def __init__(self, *, pretrain: int = 0, **options: Any) -> None:
        torch.manual_seed(0)
        self.model = Net()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.gen = torch.Generator().manual_seed(0)
        self.step = 0
        self.guard: Guard | None = None
        self.run(pretrain)
        self.guard = watch(self.model, self.opt, start_step=pretrain, **options)

    def train_step(self, loss_value: float | None = None) -> None:
        self.step += 1
        seq = torch.randint(0, VOCAB, (8, 8), generator=self.gen)
        loss = F.cross_entropy(self.model(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten())
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        if self.guard is not None:
            self.guard.record(loss=loss.item() if loss_value is None else loss_value)

    def run(self, steps: int) -> Loop:
        for _ in range(steps):
            self.train_step()
        return self

    def until(self, step: int) -> Loop:
        return self.run(step - self.step)

    def alerts(self, rule: str) -> list[int]:
        assert self.guard is not None
        return [a.step for a in self.guard.alerts if a.rule == rule]

    def others(self, *rules: str) -> list[str]:
        assert self.guard is not None
        return [str(a) for a in self.guard.alerts if a.rule not in rules]


def flip_bit(t: torch.Tensor, bit: int) -> None:
    bits = t.detach().view(-1).view(torch.int32)
    bits[0] = bits[0] ^ (1 << bit)


ONSETS = [(0, 2), (100, 103), (0, 30)]  # (steps before the guard, onset): start, resume, mid-run


# --- one-shot corruption: a norm jump needs no history -------------------------------------------


@pytest.mark.parametrize(("pretrain", "onset"), ONSETS)
@pytest.mark.parametrize("corrupt", ["scale", "bit"])
def test_a_parameter_corrupted_once_is_caught_at_the_next_check_step(
        pretrain: int, onset: int, corrupt: str) -> None:
    loop = Loop(pretrain=pretrain).until(onset - 1)
    with torch.no_grad():
        if corrupt == "scale":
            loop.model.hidden.weight.mul_(1e6)
        else:  # the top exponent bit of one float32: x 2**128
            flip_bit(loop.model.hidden.weight.data, 30)
    loop.run(25)
    next_check = next(n for n in range(onset, onset + 25) if n % 21 == 0)
    if corrupt == "scale":
        caught = loop.alerts("update.norm_jump")
    else:  # 2**128 overflows the forward: NaN/Inf rules see it first, at once
        caught = [a.step for a in loop.guard.alerts if a.severity == "critical"]
    assert caught and caught[0] <= next_check, loop.others()


@pytest.mark.parametrize(("pretrain", "onset"), ONSETS)
def test_clean_twins_raise_nothing(pretrain: int, onset: int) -> None:
    loop = Loop(pretrain=pretrain).until(onset + 60)
    assert loop.others() == []


# --- a trunk cut off from the gradient ---------------------------------------------------------


@pytest.mark.parametrize(("pretrain", "onset"), [(100, 122), (0, 22), (0, 30), (0, 64)])
def test_a_trunk_detached_mid_run_is_grad_missing_at_the_next_full_step(
        pretrain: int, onset: int) -> None:
    """Learned over 8 full steps (~20 steps after watch(), resumed or not; before, 5 check
    steps: ~84), then judged at every full step (the head still trains)."""
    loop = Loop(pretrain=pretrain).until(onset - 1)
    loop.model.cut = True
    loop.run(4)
    caught = loop.alerts("grad.missing")
    assert caught and caught[0] <= onset + 2, loop.others()
    alert = next(a for a in loop.guard.alerts if a.rule == "grad.missing")
    assert set(alert.evidence["params"]) == {"emb.weight", "hidden.weight", "hidden.bias"}


# --- optimizer state --------------------------------------------------------------------------


@pytest.mark.parametrize(("pretrain", "onset"), [(0, 2), (100, 104), (0, 25)])
def test_a_step_counter_running_twice_as_fast_is_caught_at_the_next_full_step(
        pretrain: int, onset: int) -> None:
    """Something adds to Adam's step counter between steps (not only near check steps)."""
    loop = Loop(pretrain=pretrain).until(onset - 1)
    for _ in range(4):
        loop.train_step()
        for state in loop.opt.state.values():
            state["step"] += 1
    caught = loop.alerts("optimizer.step_counter")
    assert caught and caught[0] <= onset + 3, loop.others()


@pytest.mark.parametrize("pretrain", [0, 100])
def test_optimizer_state_reloaded_from_an_earlier_step_is_caught(pretrain: int) -> None:
    """A stale checkpoint reloaded mid-run: the state's step counters go back."""
    loop = Loop(pretrain=pretrain).until(pretrain + 10)
    stale = {"model": {k: v.clone() for k, v in loop.model.state_dict().items()},
             "opt": copy.deepcopy(loop.opt.state_dict())}
    loop.run(20)
    loop.model.load_state_dict(stale["model"])
    loop.opt.load_state_dict(stale["opt"])
    reload_step = loop.step
    loop.run(4)
    caught = loop.alerts("optimizer.step_counter")
    assert caught and caught[0] <= reload_step + 3, loop.others()


# --- false alarms ------------------------------------------------------------------------------


def test_a_freeze_after_watch_before_the_first_step_is_intent() -> None:
    """mmcv/mmpretrain freeze stages in a hook that runs after the guard is set up."""
    loop = Loop()
    loop.model.emb.weight.requires_grad_(False)
    loop.run(45)
    assert loop.others() == []


def test_a_freeze_after_the_first_step_is_still_a_frozen_layer() -> None:
    loop = Loop().run(4)
    loop.model.emb.weight.requires_grad_(False)
    loop.run(3)
    assert loop.alerts("trainable.frozen")[:1] == [6]


def _converged_losses(n: int = 200) -> list[float]:
    """A loss decaying from ~3 to ~0.002 within 40 steps (a model fitting its data), then
    flat with batch noise for longer than the window (its spread is all the window sees)."""
    gen = torch.Generator().manual_seed(1)
    noise = torch.rand(n, generator=gen).tolist()
    return [3.0 * 0.8**k + 0.0019 * (0.8 + 0.4 * u) for k, u in enumerate(noise)]


def test_a_hard_batch_near_zero_loss_is_not_a_spike() -> None:
    """0.13 against a median of 0.0019 (robust z 41 on the window alone) is batch noise."""
    loop = Loop()
    for value in _converged_losses():
        loop.train_step(loss_value=value)
    loop.train_step(loss_value=0.13)
    loop.guard.close()  # judges the held loss
    assert loop.alerts("loss.spike") == []


def test_a_real_spike_near_zero_loss_is_a_spike() -> None:
    loop = Loop()
    for value in _converged_losses():
        loop.train_step(loss_value=value)
    loop.train_step(loss_value=1.0)  # a third of the initial loss
    loop.guard.close()
    assert loop.alerts("loss.spike") == [201]


# --- labels collapsed to one class ---------------------------------------------------------


def classify(steps: int, *, pretrain: int = 0, onset: int | None = None, classes: int = 5,
             weights: list[float] | None = None, size: int = 32) -> Guard:
    """A linear classifier on random features; from `onset` on every label is class 0."""
    torch.manual_seed(0)
    model = nn.Linear(16, classes)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    probs = torch.tensor(weights or [1.0] * classes)
    guard: Guard | None = None
    for step in range(1, pretrain + steps + 1):
        if step == pretrain + 1:
            guard = watch(model, opt, start_step=pretrain)
        x = torch.randn(size, 16, generator=gen)
        y = torch.multinomial(probs, size, replacement=True, generator=gen)
        if onset is not None and step >= onset:
            y = torch.zeros_like(y)
        loss = F.cross_entropy(model(x), y)
        if guard is not None:
            guard.record(batch=(x, y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if guard is not None:
            guard.record(loss=loss.item())
    assert guard is not None
    return guard


@pytest.mark.parametrize(("pretrain", "onset"), ONSETS)
def test_labels_collapsed_to_one_class_are_caught_at_the_next_check_step(
        pretrain: int, onset: int) -> None:
    guard = classify(onset - pretrain + 25, pretrain=pretrain, onset=onset)
    caught = [a.step for a in guard.alerts if a.rule == "data.label_collapse"]
    next_check = next(n for n in range(onset, onset + 25) if n % 21 == 0)
    assert caught and caught[0] == next_check, [str(a) for a in guard.alerts]


@pytest.mark.parametrize(("weights", "size"), [(None, 32), ([0.9, 0.1], 8), ([0.97, 0.03], 64)])
def test_one_class_batches_of_imbalanced_labels_are_not_a_collapse(
        weights: list[float] | None, size: int) -> None:
    """A batch of 8 labels at 90% / 10% is all class 0 nearly half the time: plausible."""
    guard = classify(200, classes=len(weights or [0] * 5), weights=weights, size=size)
    assert [str(a) for a in guard.alerts if a.rule == "data.label_collapse"] == []
