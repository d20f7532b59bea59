"""The guard's built-in checks, each against its bug class on a tiny hand-built model.

`Loop` trains a small token model with AdamW on random sequences; each test
breaks one thing at one step and expects the rule that names it within two
steps, and clean runs raise nothing. All checks run at every step here
(``check_every=1``); the defaults' latencies are measured in
``benchmarks/guard.py``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labcoat
from labcoat.sdk import read_journal
from labcoat.torch import Guard, GuardConfig, GuardError, GuardStop, guard_rules, watch

VOCAB = 20
FAST = {"check_every": 1, "min_history": 10, "window": 50}  # every check at every step


class Tiny(nn.Module):
    """ids (B, T) -> logits (B, T, VOCAB): embedding, a position-wise layer, dropout, head."""

    def __init__(self, dropout: float = 0.0, norm: bool = False) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.hidden = nn.Linear(16, 16)
        self.norm = nn.BatchNorm1d(16) if norm else nn.Identity()
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(16, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.hidden(self.emb(ids)))
        h = self.norm(h.transpose(1, 2)).transpose(1, 2)
        return self.out(self.drop(h))


class Loop:
    """A plain loop: forward, record the batch, zero_grad, backward, step, record the loss."""

    def __init__(self, seed: int = 0, *, dropout: float = 0.0, norm: bool = False,
                 model: nn.Module | None = None, lr: float = 1e-2, run: Any = None,
                 **options: Any) -> None:
        torch.manual_seed(seed)
        self.model = model if model is not None else Tiny(dropout, norm)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.gen = torch.Generator().manual_seed(seed)
        self.guard: Guard = watch(self.model, self.opt, run=run, **{**FAST, **options})
        self.step = 0

    def batch(self, size: int = 8, length: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
        seq = torch.randint(0, VOCAB, (size, length + 1), generator=self.gen)
        return seq[:, :-1], seq[:, 1:]  # next-token labels

    def train_step(self, batch: tuple[torch.Tensor, torch.Tensor] | None = None, *,
                   zero: bool = True, step: bool = True, scale: float = 1.0,
                   after_backward: Any = None, loss_value: float | None = None) -> None:
        self.step += 1
        inputs, labels = batch if batch is not None else self.batch()
        loss = F.cross_entropy(self.model(inputs).flatten(0, 1), labels.flatten())
        self.guard.record(batch=(inputs, labels))
        if zero:
            self.opt.zero_grad()
        (loss * scale).backward()
        if after_backward is not None:
            after_backward(self.model)
        if step:
            self.opt.step()
        self.guard.record(loss=loss.item() if loss_value is None else loss_value)

    def run(self, steps: int, **kwargs: Any) -> Loop:
        for _ in range(steps):
            self.train_step(**kwargs)
        return self

    def evaluate(self, *, switch: bool = True) -> None:
        if switch:
            self.model.eval()
        with torch.no_grad():
            self.model(self.batch()[0])
        if switch:
            self.model.train()

    @property
    def rules(self) -> set[str]:
        return {a.rule for a in self.guard.alerts}

    def first(self, rule: str) -> int:
        steps = [a.step for a in self.guard.alerts if a.rule == rule]
        assert steps, f"no {rule} alert; got {[str(a) for a in self.guard.alerts]}"
        return min(steps)


def flip_bit(t: torch.Tensor, bit: int = 24) -> None:
    """Flip one bit of t's first element through an integer view (no autograd write)."""
    bits = t.detach().view(-1).view(torch.int32)
    bits[0] = bits[0] ^ (1 << bit)


# --- clean runs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clean_runs_raise_nothing(seed: int) -> None:
    loop = Loop(seed, dropout=0.1, norm=True)
    for _ in range(6):
        loop.run(10)
        loop.evaluate()
    assert loop.guard.alerts == []
    assert loop.guard.steps_seen == 60


def test_clean_runs_with_default_settings_raise_nothing() -> None:
    torch.manual_seed(0)
    model = Tiny(0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    guard = watch(model, opt)  # the defaults: periodic checks every 21 steps
    gen = torch.Generator().manual_seed(0)
    for step in range(1, 121):
        seq = torch.randint(0, VOCAB, (8, 8), generator=gen)
        loss = F.cross_entropy(model(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        guard.record(loss=loss, batch=(seq[:, :-1], seq[:, 1:]))
        if step % 30 == 0:
            model.eval()
            with torch.inference_mode():
                model(seq[:, :-1])
            model.train()
    assert guard.alerts == []


# --- numerics ------------------------------------------------------------------------------------


def test_nan_gradient_is_critical_before_the_update_and_stop_on_stops() -> None:
    loop = Loop(stop_on="critical").run(12)
    before = loop.model.hidden.weight.detach().clone()

    def poison(model: Tiny) -> None:
        model.hidden.weight.grad[0, 0] = float("nan")

    with pytest.raises(GuardStop, match="stopped the run at step 13: rule nonfinite.grad"):
        loop.train_step(after_backward=poison)
    assert torch.equal(loop.model.hidden.weight, before)  # the update never happened
    (alert,) = loop.guard.alerts
    assert alert.severity == "critical" and alert.evidence["params"] == ["hidden.weight"]


def test_gradient_norm_every_other_step_sees_a_nan_one_step_late() -> None:
    """grad_norm_every=2: an odd step's NaN gradient goes unmeasured and poisons the
    update; the next step, measured, sees NaN in its gradients and loss."""
    def poison(model: Tiny) -> None:
        model.hidden.weight.grad[0, 0] = float("nan")

    for every, onset, seen in ((2, 13, 14), (2, 12, 12), (1, 13, 13)):
        loop = Loop(check_every=20, grad_norm_every=every).run(onset - 1)
        loop.train_step(after_backward=poison)
        loop.train_step()
        assert loop.first("nonfinite.grad") == seen, (every, onset)


def test_light_steps_judge_what_persists_at_the_next_full_step() -> None:
    """Default grad_norm_every=3 between check steps: steps 7 and 8 are light (training
    forwards counted, finite losses held), 9 is full. What persists is judged at 9; a held
    loss is judged at the next full step's record, under its own step."""
    kept = Loop(check_every=21).run(6)
    for _ in range(3):
        kept.train_step(zero=False)  # zero_grad() lost from step 7 on
    assert kept.first("grad.not_reset") == 9
    frozen = Loop(check_every=21).run(6)
    frozen.model.hidden.weight.requires_grad_(False)
    frozen.run(3)
    assert frozen.first("trainable.frozen") == 9
    stuck = Loop(dropout=0.1, check_every=21).run(6)
    stuck.model.eval()  # model.train() not called again after an evaluation
    stuck.run(3)
    assert stuck.first("mode.eval_in_train") == 9
    spiked = Loop(check_every=21).run(30)
    spiked.train_step(loss_value=1e4)  # step 31: light
    spiked.run(1)
    assert spiked.guard.alerts == []
    spiked.run(1)  # step 33: full
    assert spiked.first("loss.spike") == 31
    nan = Loop(check_every=21).run(30)
    nan.train_step(loss_value=math.nan)  # not finite: judged at once
    assert nan.first("nonfinite.loss") == 31
    closed = Loop(check_every=21).run(30)
    closed.train_step(loss_value=1e4)
    closed.guard.close()  # judges what it held
    assert closed.first("loss.spike") == 31


def test_optimizer_state_wiped_before_a_light_step() -> None:
    """Step 7's update rebuilds the state wiped before it (light: its size is not read); the
    step counter read at step 9 has gone back from 5 to 2."""
    loop = Loop(check_every=21).run(6)
    loop.opt.state.clear()
    loop.run(3)
    assert loop.first("optimizer.step_counter") == 9
    alert = next(a for a in loop.guard.alerts if a.rule == "optimizer.step_counter")
    assert (alert.evidence["before"], alert.evidence["after"]) == (5, 2)


def scheduled_loop(**options: Any) -> tuple[Loop, Any]:
    """A loop whose guard is told the AdamW's StepLR scheduler (and `options`)."""
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    loop = Loop(model=model)
    loop.guard.close()
    loop.opt = opt
    loop.guard = watch(model, opt, scheduler=sched, **options)
    return loop, sched


def test_a_stalled_scheduler_with_light_steps_between() -> None:
    loop, sched = scheduled_loop(check_every=21)
    for _ in range(13):
        loop.train_step()
        sched.step()
    assert loop.guard.alerts == []  # judged at 1, 3, 6, 9, 12: last_epoch moved by the gaps
    loop.run(3)  # scheduler.step() no longer called after step 13
    assert loop.first("lr.scheduler_stalled") == 15


def test_nan_loss_and_loss_spike() -> None:
    loop = Loop().run(15)
    loop.train_step(loss_value=1e4)
    assert loop.first("loss.spike") == 16
    loop.train_step(loss_value=math.nan)
    assert loop.first("nonfinite.loss") == 17


def test_a_loss_climbing_for_many_steps_is_divergence_not_a_spike() -> None:
    loop = Loop().run(30)
    base = math.log(VOCAB)  # random tokens: the loss stays near log(VOCAB)
    for k in range(1, 61):  # +1% a step: no single step is a spike
        loop.train_step(loss_value=base * 1.01**k)
    assert "loss.spike" not in loop.rules
    assert 30 < loop.first("loss.divergence") <= 90


def test_gradient_explosion_needs_two_steps_and_collapse_to_zero() -> None:
    loop = Loop().run(15)
    loop.train_step(scale=1e4)
    assert "grad_norm.explosion" not in loop.rules  # one step: a hard batch, not a bug
    loop.train_step(scale=1e4)
    assert loop.first("grad_norm.explosion") == 17
    loop.train_step(scale=0.0)
    assert loop.first("grad_norm.collapse") == 18


def _noisy_grads(model: nn.Module) -> None:
    for p in model.parameters():  # noise 10x each gradient's scale: no single step stands out
        p.grad.add_(torch.randn_like(p.grad) * (10 * float(p.grad.std())))


def test_a_sustained_jump_of_the_gradient_norm() -> None:
    loop = Loop(window=100, spike_z=1e3).run(40)  # spikes never count: only the level
    loop.run(20, after_backward=_noisy_grads)
    first = loop.first("grad_norm.explosion")
    assert 40 < first <= 56 and "sustained jump" in loop.guard.alerts[0].message  # 2 runs of 8


def test_nan_in_optimizer_state() -> None:
    loop = Loop().run(3)
    state = loop.opt.state[loop.model.out.weight]
    state["exp_avg_sq"][0, 0] = float("nan")
    loop.run(1)
    assert "nonfinite.optimizer_state" in loop.rules or "nonfinite.param" in loop.rules


# --- update integrity ----------------------------------------------------------------------------


def test_missing_zero_grad() -> None:
    loop = Loop().run(5)
    loop.train_step(zero=False)
    assert loop.first("grad.not_reset") == 6
    assert loop.guard.alerts[0].evidence["sentinels"] == ["emb.weight"]


def test_zero_grad_without_set_to_none_is_a_reset() -> None:
    loop = Loop()
    for _ in range(8):
        loop.opt.zero_grad(set_to_none=False)
        loop.train_step(zero=False)
    assert loop.guard.alerts == []


def test_skipped_optimizer_step_and_declared_accumulation() -> None:
    loop = Loop().run(5)
    loop.train_step(step=False)  # zero_grad, backward, but no optimizer.step()
    loop.train_step()
    assert loop.first("grad.accumulation") == 6  # the guard's 6th optimizer step
    accumulating = Loop(accumulation_steps=2)
    for _ in range(4):
        accumulating.train_step(step=False)
        accumulating.train_step(zero=False)
    assert accumulating.guard.alerts == []


def test_steps_a_grad_scaler_skips_are_expected() -> None:
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    guard = watch(model, opt, grad_scaler=scaler, **FAST)
    gen = torch.Generator().manual_seed(0)
    for step in range(1, 9):
        seq = torch.randint(0, VOCAB, (8, 8), generator=gen)
        loss = F.cross_entropy(model(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten())
        opt.zero_grad()
        scaler.scale(loss * (1e38 if step == 5 else 1.0)).backward()  # inf gradients at 5
        scaler.step(opt)  # skipped at 5
        scaler.update()
    assert guard.alerts == [] and guard.steps_seen == 7


def _drop_hidden_grad(model: nn.Module) -> None:
    model.hidden.weight.grad = None  # as if the layer were cut off from the loss


def test_gradients_that_stop_reaching_a_layer_or_every_layer() -> None:
    loop = Loop().run(8)  # learned over the first 5 check steps
    loop.train_step(after_backward=_drop_hidden_grad)
    assert loop.first("grad.missing") == 9
    (alert,) = [a for a in loop.guard.alerts if a.rule == "grad.missing"]
    assert alert.evidence["params"] == ["hidden.weight"] and "cut off" in alert.message
    late = Loop().run(8)
    late.train_step(after_backward=lambda model: late.opt.zero_grad(set_to_none=True))
    assert late.first("grad.missing") == 9
    assert "no parameter had a gradient" in late.guard.alerts[0].message
    sparse = Loop(check_every=21).run(110)  # between check steps: the count of gradients
    sparse.train_step(after_backward=_drop_hidden_grad)
    assert sparse.first("grad.missing") == 111


def test_a_layer_used_now_and_then_is_not_missing_its_gradient() -> None:
    loop = Loop()
    for step in range(1, 41):
        loop.train_step(after_backward=_drop_hidden_grad if step % 3 == 0 else None)
    assert "grad.missing" not in loop.rules


def test_parameter_missing_from_the_optimizer() -> None:
    loop = Loop().run(3)
    group = loop.opt.param_groups[0]
    group["params"] = [p for p in group["params"] if p is not loop.model.out.bias]
    loop.run(1)
    assert loop.first("optimizer.missing_param") == 4
    alert = next(a for a in loop.guard.alerts if a.rule == "optimizer.missing_param")
    assert alert.evidence["params"] == ["out.bias"]


def test_a_parameter_in_two_param_groups() -> None:
    loop = Loop().run(3)
    loop.opt.param_groups[0]["params"].append(loop.model.out.bias)  # add_param_group refuses
    loop.run(2)
    assert loop.first("optimizer.duplicate_param") == 4
    alert = next(a for a in loop.guard.alerts if a.rule == "optimizer.duplicate_param")
    assert alert.evidence["params"] == ["out.bias"]
    assert [a.rule for a in loop.guard.alerts].count("optimizer.duplicate_param") == 1


def test_a_module_replaced_after_the_optimizer_was_built() -> None:
    loop = Loop(check_every=5).run(7)
    loop.model.out = nn.Linear(16, VOCAB)  # e.g. a new head: the optimizer has the old one
    loop.run(3)  # seen at the next check step, where the guard walks the model again
    assert loop.first("optimizer.missing_param") == 10
    alert = next(a for a in loop.guard.alerts if a.rule == "optimizer.missing_param")
    assert alert.evidence["params"] == ["out.weight", "out.bias"]


class SkipsFirst(torch.optim.Optimizer):
    """A buggy SGD that never updates its first parameter."""

    def __init__(self, params: Any, lr: float) -> None:
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:
        for group in self.param_groups:
            for p in group["params"][1:]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])


def test_optimizer_leaving_a_parameter_alone() -> None:
    torch.manual_seed(0)
    model = Tiny()
    opt = SkipsFirst(model.parameters(), lr=0.1)
    guard = watch(model, opt, **FAST)
    seq = torch.randint(0, VOCAB, (8, 8))
    F.cross_entropy(model(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten()).backward()
    opt.step()
    (alert,) = guard.alerts
    assert alert.rule == "update.param_unchanged" and alert.evidence["params"] == ["emb.weight"]


class DoesNothing(torch.optim.Optimizer):
    """A buggy optimizer whose step() returns without touching any parameter."""

    def __init__(self, params: Any) -> None:
        super().__init__(params, {"lr": 0.1})

    def step(self, closure: Any = None) -> None:
        return None


def test_an_optimizer_step_that_changes_nothing() -> None:
    torch.manual_seed(0)
    model = Tiny()
    guard = watch(model, DoesNothing(model.parameters()), **FAST)
    seq = torch.randint(0, VOCAB, (8, 8))
    F.cross_entropy(model(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten()).backward()
    guard.optimizer.step()
    (alert,) = guard.alerts
    assert alert.rule == "update.skipped" and alert.step == 1


def test_frozen_layer_and_declarations() -> None:
    loop = Loop().run(4)
    loop.model.hidden.requires_grad_(False)
    loop.run(1)
    assert loop.first("trainable.frozen") == 5
    declared = Loop(frozen=["out.*"]).run(2)  # declared frozen, yet in the optimizer
    assert declared.first("trainable.unfrozen") == 1
    wanted = Loop(trainable=["hidden.*"])
    wanted.model.hidden.weight.requires_grad_(False)
    wanted.run(1)
    assert wanted.first("trainable.frozen") == 1
    with pytest.raises(GuardError, match="trainable pattern 'blocks.*' matches no parameter"):
        Loop(trainable=["blocks.*"])


def test_updates_lost_below_bfloat16_resolution() -> None:
    torch.manual_seed(0)
    model = Tiny().to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-7)
    guard = watch(model, opt, **FAST)
    gen = torch.Generator().manual_seed(0)
    for _ in range(4):
        seq = torch.randint(0, VOCAB, (8, 8), generator=gen)
        loss = F.cross_entropy(model(seq[:, :-1]).flatten(0, 1).float(), seq[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert {a.rule for a in guard.alerts} == {"update.lost"}
    assert min(a.step for a in guard.alerts) == 3  # LOST_CHECKS check steps running


def test_weights_written_between_steps() -> None:
    loop = Loop().run(4)
    with torch.no_grad():
        loop.model.out.weight.clamp_(-0.01, 0.01)  # "manual weight clipping"
    loop.run(1)
    assert loop.first("update.outside_step") == 5
    flip_bit(loop.model.hidden.weight.data)  # a hardware fault: no write recorded
    loop.run(1)
    assert loop.first("update.corrupted") == 6
    assert next(a for a in loop.guard.alerts if a.rule == "update.corrupted").severity \
        == "critical"


def test_a_weight_rescaled_between_check_steps_is_a_norm_jump() -> None:
    loop = Loop(check_every=5).run(42)
    assert loop.guard.alerts == []
    with torch.no_grad():
        loop.model.hidden.weight.mul_(1000.0)  # between steps 42 and 43: no check step near
    loop.run(3)
    assert loop.first("update.norm_jump") == 45  # the next check step
    (alert,) = [a for a in loop.guard.alerts if a.rule == "update.norm_jump"]
    assert alert.evidence["params"] == ["hidden.weight"] and "changed 1e+03x" in alert.message


def test_sparse_check_steps_judge_norm_jumps_after_about_100_steps() -> None:
    """check_every=20 (about the default): 5 intervals of history are enough (10 would be 200
    steps, later than many a bug)."""
    loop = Loop(check_every=20, min_history=20, window=100).run(122)
    with torch.no_grad():
        loop.model.hidden.weight.mul_(1000.0)
    loop.run(18)
    assert loop.first("update.norm_jump") == 140


def test_exact_checksums_catch_a_low_bit_flip_norms_miss() -> None:
    loop = Loop(state_every=2).run(3)  # checksums after step 3 and before step 4
    flip_bit(loop.model.out.weight.data, bit=0)  # changes the value by one ulp
    loop.run(1)
    assert loop.first("update.corrupted") == 4


def test_optimizer_state_reset() -> None:
    loop = Loop().run(5)
    loop.opt.state.clear()  # e.g. the optimizer rebuilt, or a checkpoint without its state
    loop.run(1)
    assert loop.first("optimizer.step_counter") == 6


def test_lr_schedule_scheduler_and_stall() -> None:
    loop, sched = scheduled_loop(**FAST)
    opt = loop.opt
    for _ in range(5):
        loop.train_step()
        sched.step()
    opt.param_groups[0]["lr"] = 1e-2  # someone overwrites the lr
    loop.train_step()
    assert loop.first("lr.mismatch") == 6
    loop.run(2)  # scheduler.step() no longer called
    assert loop.first("lr.scheduler_stalled") == 7
    declared = Loop(lr_schedule=lambda step: 1e-2).run(3)
    assert declared.guard.alerts == []
    declared.opt.param_groups[0]["lr"] = 5e-3
    declared.run(1)
    assert declared.first("lr.mismatch") == 4


# --- modes ---------------------------------------------------------------------------------------


def test_dropout_left_on_during_evaluation_and_eval_mode_not_switched_back() -> None:
    loop = Loop(dropout=0.2).run(3)
    loop.evaluate(switch=False)  # no model.eval()
    assert loop.first("mode.train_in_eval") == 3
    loop.model.eval()
    loop.run(1)  # training while in eval mode
    assert loop.first("mode.eval_in_train") == 4
    assert {a.rule for a in loop.guard.alerts} == {"mode.train_in_eval", "mode.eval_in_train"}


def test_evaluating_context_marks_evaluation_with_grad_on() -> None:
    loop = Loop(dropout=0.2).run(2)
    with loop.guard.evaluating():
        loop.model(loop.batch()[0])  # grad mode on, but declared evaluation
    assert loop.first("mode.train_in_eval") == 2


def test_batch_norm_frozen_from_the_start_is_respected_but_a_switch_is_not() -> None:
    frozen = Loop(norm=True)
    frozen.model.norm.eval()  # deliberately frozen statistics (fine-tuning)
    frozen.run(5)
    assert frozen.guard.alerts == []
    switched = Loop(norm=True).run(3)
    switched.model.norm.eval()
    switched.run(1)
    assert switched.first("mode.eval_in_train") == 4


# --- data ----------------------------------------------------------------------------------------


def test_token_ids_outside_the_embedding_alert_before_the_crash() -> None:
    loop = Loop().run(2)
    inputs, labels = loop.batch()
    inputs[0, 0] = VOCAB + 3  # a tokenizer with more tokens than the model
    with pytest.raises(IndexError):
        loop.train_step((inputs, labels))
    (alert,) = loop.guard.alerts
    assert alert.rule == "data.token_range" and alert.step == 3
    assert alert.evidence == {"module": "emb", "num_embeddings": VOCAB, "min_id": 0,
                              "max_id": VOCAB + 3}


def test_repeated_batch_and_batch_size_collapse() -> None:
    loop = Loop().run(12)
    same = loop.batch()
    loop.train_step(same)
    loop.train_step(same)
    assert loop.first("data.repeated_batch") == 14
    small = Loop().run(12)
    small.train_step(small.batch(size=2))
    assert "data.batch_size" not in small.rules  # one short batch: the end of an epoch
    small.train_step(small.batch(size=2))
    assert small.first("data.batch_size") == 14


def test_a_batch_repeated_a_few_steps_later_and_doubled_batches_at_the_default_interval() -> None:
    loop = Loop().run(12)
    again = loop.batch()
    loop.train_step(again)
    loop.run(3)
    loop.train_step(again)  # a loader looping over four batches
    assert loop.first("data.repeated_batch") == 17
    assert "4 steps earlier" in loop.guard.alerts[0].message
    doubled = Loop(check_every=21).run(29)  # default interval: only steps 20-21, 41-42, ...
    for _ in range(20):  # are hashed; from step 30 every batch comes twice (loader workers)
        batch = doubled.batch()
        doubled.train_step(batch)
        doubled.train_step(batch)
    assert doubled.first("data.repeated_batch") in (42, 63)  # an even interval could miss all


def test_a_loss_mask_that_breaks_mid_run() -> None:
    loop = Loop().run(12)
    inputs, labels = loop.batch()
    labels = labels.clone()  # a view of the inputs' sequence
    labels[4:] = -100  # a collate bug masks half the batch
    loop.train_step((inputs, labels))
    assert loop.first("data.label_mask") == 13
    assert "part of the batch masked out" in loop.guard.alerts[0].message


def test_labels_not_shifted_or_shifted_twice() -> None:
    loop = Loop(labels_shifted=True).run(3)
    inputs, _ = loop.batch()
    loop.train_step((inputs, inputs.clone()))  # labels = inputs: the model reads the answer
    assert loop.first("data.label_leak") == 4
    hf = Loop(labels_shifted=False)  # Hugging Face style: labels == inputs, the loss shifts
    inputs, _ = hf.batch()
    hf.train_step((inputs, inputs.clone()))
    assert hf.guard.alerts == []
    seq = torch.randint(0, VOCAB, (64, 8), generator=hf.gen)
    hf.train_step((seq[:, :-1], seq[:, 1:]))  # shifted here too: predicts two tokens ahead
    assert hf.first("data.label_offset") == 2
    learned = Loop()  # undeclared: the first batch's alignment is the run's
    learned.run(2)
    inputs, _ = learned.batch()
    learned.train_step((inputs, inputs.clone()))
    assert learned.first("data.label_leak") == 3


def test_labels_that_no_longer_belong_to_their_inputs() -> None:
    loop = Loop(labels_shifted=True).run(3)
    inputs, labels = loop.batch(size=32)
    loop.train_step((inputs, labels.roll(1, dims=0)))  # each row gets the next row's labels
    assert loop.first("data.label_offset") == 4
    assert "no longer belong" in loop.guard.alerts[0].message


def test_eval_items_in_training_rows() -> None:
    loop = Loop(pad_id=0)
    held_out = [[5, 6, 7], [8, 9, 10, 11]]
    assert loop.guard.register_eval_items(held_out) == 2
    loop.run(2)
    inputs, labels = loop.batch()
    inputs[3] = torch.tensor([8, 9, 10, 11, 0, 0, 0])  # an eval item, padded
    loop.train_step((inputs, labels))
    assert loop.first("data.eval_leak") == 3
    assert next(a for a in loop.guard.alerts if a.rule == "data.eval_leak").evidence[
        "rows"] == [3]


def test_token_distribution_shift() -> None:
    loop = Loop()
    for _ in range(15):
        seq = torch.randint(0, VOCAB // 2, (32, 8), generator=loop.gen)
        loop.train_step((seq[:, :-1], seq[:, 1:]))
    seq = torch.randint(VOCAB // 2, VOCAB, (32, 8), generator=loop.gen)  # another tokenizer
    loop.train_step((seq[:, :-1], seq[:, 1:]))
    assert loop.first("data.token_shift") == 16


# --- model probes --------------------------------------------------------------------------------


class Mixer(nn.Module):
    """A sequence model: causal (running mean over the past) or not (mean over everything)."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.emb = nn.Embedding(VOCAB, 16)
        self.out = nn.Linear(16, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        if self.causal:
            h = h.cumsum(1) / torch.arange(1, ids.shape[1] + 1).view(1, -1, 1)
        else:
            h = h.mean(1, keepdim=True).expand_as(h)
        return self.out(h)


def test_causality_probe() -> None:
    causal = Loop(model=Mixer(causal=True), causal=True, causal_every=1).run(3)
    assert causal.guard.alerts == []
    leaky = Loop(model=Mixer(causal=False), causal=True, causal_every=1).run(3)
    assert leaky.first("model.causality") == 1


def test_recomputation_catches_a_corrupted_gradient() -> None:
    def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(model(batch[0]).flatten(0, 1), batch[1].flatten())

    loop = Loop(dropout=0.3, recompute_every=1, loss_fn=loss_fn).run(4)
    assert loop.guard.alerts == []  # dropout replayed with the step's RNG state: bit for bit
    loop.train_step(after_backward=lambda m: flip_bit(m.hidden.weight.grad))
    assert loop.first("sdc.recompute") == 5
    clipped = Loop(recompute_every=1, loss_fn=loss_fn)
    clip = lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 1e-3)  # noqa: E731
    clipped.run(3, after_backward=clip)
    assert clipped.guard.alerts == []  # a common scale factor is allowed


# --- API, settings, journal ----------------------------------------------------------------------


def test_settings_are_validated_with_the_fix() -> None:
    with pytest.raises(GuardError, match="stop_on='fatal'; choose between None, 'warning'"):
        GuardConfig(stop_on="fatal")
    with pytest.raises(GuardError, match="recompute_every=5 needs loss_fn"):
        GuardConfig(recompute_every=5)
    with pytest.raises(GuardError, match="causal_every=15 must be a multiple of check_every=21"):
        GuardConfig(causal_every=15)
    with pytest.raises(GuardError, match="grad_norm_every=0 must be an integer >= 1"):
        GuardConfig(grad_norm_every=0)
    with pytest.raises(GuardError, match="min_history=30 must not exceed window=20"):
        GuardConfig(window=20, min_history=30)
    with pytest.raises(GuardError, match="unknown guard option.*spikez; choose from"):
        watch(Tiny(), torch.optim.SGD(Tiny().parameters(), lr=0.1), spikez=3)
    with pytest.raises(GuardError, match="disable: unknown rule or family 'datta'"):
        watch(Tiny(), torch.optim.SGD(Tiny().parameters(), lr=0.1), disable=["datta"])
    assert GuardConfig(check_every=7).state_every == 203  # the first multiple >= 200
    assert GuardConfig(check_every=7).causal_every == 105  # the first multiple >= 100


def test_disable_a_rule_or_a_family() -> None:
    loop = Loop(disable=["grad.not_reset"]).run(3)
    loop.train_step(zero=False)
    assert loop.guard.alerts == []
    assert not loop.guard.enabled("grad.not_reset") and loop.guard.enabled("grad.accumulation")
    assert not Loop(disable=["data"]).guard.enabled("data.eval_leak")
    assert "data.eval_leak" in guard_rules()


def test_stop_on_from_record() -> None:
    loop = Loop(stop_on="warning").run(15)
    with pytest.raises(GuardStop, match="rule loss.spike"):
        loop.train_step(loss_value=1e6)


def test_alerts_go_to_the_journal(home: Path) -> None:
    run = labcoat.init(experiment="guard-test", seed=0)
    loop = Loop(run=run).run(3)
    loop.train_step(zero=False)
    loop.guard.close()
    run.finish()
    (journal,) = (home / "adhoc" / "guard-test").rglob("journal.jsonl")
    events = [r for _, r in read_journal(journal).records if r["kind"] == "event"]
    names = [e["event"] for e in events]
    assert names[0] == "guard.started" and names[-1] == "guard.profile"
    (alert,) = [e for e in events if e["event"] == "guard.alert"]
    assert alert["step"] == 4 and alert["level"] == "error"
    assert alert["data"]["rule"] == "grad.not_reset" and alert["data"]["severity"] == "error"
    assert alert["message"].startswith("gradients were not reset between optimizer steps 3")
    profile = events[-1]["data"]["profile"]
    assert profile["format"] == "labcoat.guard.profile" and profile["steps"] == [1, 4]
    json.dumps(profile)


def test_record_belongs_to_the_step_in_progress_or_the_last() -> None:
    loop = Loop(min_history=10)
    loop.run(12)
    inputs, labels = loop.batch()
    loop.model(inputs)  # a training forward: step 13 is in progress
    loop.guard.record(loss=1e5)
    assert loop.first("loss.spike") == 13


def test_close_removes_every_hook() -> None:
    from torch.nn.modules import module as module_hooks

    global_hooks = (module_hooks._global_module_registration_hooks,
                    module_hooks._global_parameter_registration_hooks)
    before = [len(h) for h in global_hooks]
    loop = Loop().run(2)
    assert [len(h) for h in global_hooks] == [n + 1 for n in before]
    loop.guard.close()
    loop.guard.close()  # idempotent
    loop.train_step(zero=False)
    assert loop.guard.alerts == [] and loop.guard.steps_seen == 2
    assert [len(h) for h in global_hooks] == before  # the global registration hooks too


def test_the_guard_leaves_training_bit_identical() -> None:
    def losses(guarded: bool) -> list[float]:
        torch.manual_seed(0)
        model = Tiny(0.2, norm=True)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        if guarded:
            watch(model, opt, causal=True, causal_every=1, **FAST)
        gen = torch.Generator().manual_seed(0)
        out = []
        for _ in range(8):
            seq = torch.randint(0, VOCAB, (8, 8), generator=gen)
            loss = F.cross_entropy(model(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    assert losses(True) == losses(False)


# --- the per-step path: cheap work every step, the rest around check steps -----------------------


def test_embedding_hooks_are_attached_only_for_check_steps() -> None:
    loop = Loop(check_every=10)
    hooks = loop.model.emb._forward_pre_hooks
    assert hooks  # step 1 is a check step
    loop.run(1)
    assert not hooks  # steps 2-8 measure nothing per embedding call
    loop.run(7)
    assert not hooks
    loop.run(1)  # step 9 done: step 10 is a check step
    assert hooks
    inputs, labels = loop.batch()
    inputs[0, 0] = VOCAB + 3
    with pytest.raises(IndexError):
        loop.train_step((inputs, labels))
    assert loop.first("data.token_range") == 10
    loop.guard.close()
    assert not hooks


def test_host_row_hashes_and_label_counts_match_the_torch_ones() -> None:
    from labcoat.torch.guard._checks_data import _label_counts_host, _row_hashes_matmul
    from labcoat.torch.guard._measure import row_hashes

    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, VOCAB, (16, 9), generator=gen)
    x[:, -3:] = 0
    for pad in (None, 0, 5):
        assert _row_hashes_matmul(x.numpy(), pad).tolist() == row_hashes(x, pad).tolist()
    labels = torch.randint(0, VOCAB, (16, 9), generator=gen)
    labels[:, 1:] = torch.where(labels[:, 1:] % 2 == 0, x[:, :-1], labels[:, 1:])
    labels[0, :4] = -100
    mask = labels != -100
    expected = [int(mask.sum()), int(((labels == x) & mask).sum()),
                int(mask[:, 1:].sum()), int(((labels[:, 1:] == x[:, :-1]) & mask[:, 1:]).sum()),
                int(mask[:, :-1].sum()), int(((labels[:, :-1] == x[:, 1:]) & mask[:, :-1]).sum())]
    assert _label_counts_host(x.numpy(), labels.numpy(), -100) == expected


def test_profile_observations_queued_between_check_steps_are_all_kept() -> None:
    # steps 21-25 are queued when the profile is built; grad_norm_every=1: a norm every step
    loop = Loop(check_every=10, grad_norm_every=1).run(25)
    phases = loop.guard.profile()["phases"]
    assert sum(p["grad_norm"]["n"] for p in phases if p["grad_norm"]) == 25
    assert sum(p["loss"]["n"] for p in phases if p["loss"]) == 25
