"""Fault injection: silent training bugs switched on at a chosen step, for testing the guard.

    from labcoat.workloads.tinylm import Config, Fault, train
    result = train(Config(steps=300), fault=Fault("frozen_block", step=150), guard=True)
    result.alerts        # what the guard said

or ``python -m labcoat.workloads.tinylm --fault frozen_block --fault-step 150``.

Every fault is silent: training goes on without an exception and the loss
keeps a plausible shape; only the model is quietly worse (or its numbers
wrong). Each reproduces a bug class seen in real code (TrainCheck, OSDI 2025,
collects twenty). "From K" faults stay on from step K; "at K" faults happen
once, at step K; evaluation faults act on the first evaluation at or after K.
The training loop calls the `Injector`'s hooks at fixed points; without a
fault they do nothing and the run is bit-identical to a run without hooks.
"""

from __future__ import annotations

import itertools
import time
import types
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from labcoat.errors import LabcoatError
from labcoat.workloads.tinylm._model import CausalSelfAttention, TinyLM
from labcoat.workloads.tinylm._tasks import IGNORE, PAD_ID, EvalSet, TrainStream, collate

# name -> what the bug is (and when it acts)
FAULTS: dict[str, str] = {
    "causal_mask_off": "from K, attention is not causal: every position sees the future tokens",
    "frozen_block": "at K, the first transformer block is frozen (requires_grad=False)",
    "no_zero_grad": "from K, optimizer.zero_grad() is skipped: gradients accumulate",
    "dropout_in_eval": "from K, evaluation forgets model.eval(): dropout stays on",
    "eval_mode_stuck": "from K, evaluation leaves the model in eval mode: training continues "
                       "without dropout",
    "token_shift": "from K, token ids come from another tokenizer (every id shifted by 3)",
    "labels_unshifted": "from K, labels are the inputs themselves (the next-token shift is lost)",
    "repeated_batch": "from K, the data loader returns step K's batch again and again",
    "batch_collapse": "from K, batches shrink to 1/16 of their size (a sharding bug)",
    "lr_stuck": "from K, the schedule is no longer applied: the lr stays at step K-1's",
    "param_dropped": "at K, the last block's MLP input weight is dropped from the optimizer",
    "grad_nan": "at K, one gradient element becomes NaN before the update",
    "weight_blowup": "at K, the first block's MLP input weight is multiplied by 1000",
    "loss_scale": "from K, the loss is scaled by 2^16 before backward and never unscaled "
                  "(a mixed-precision bug): gradients explode",
    "eval_leak": "from K, a quarter of every batch are eval items",
    "sdc_param": "at K, one bit of one weight flips in memory (x4 or /4; no write recorded)",
    "sdc_grad": "at K, one bit of one gradient element flips after backward (x4 or /4)",
    "step_skipped": "from K, optimizer.step() runs only at even steps (a wrong condition)",
    "optimizer_reset": "at K, the optimizer state is wiped (Adam moments and step counts)",
}
# Held out: written after the guard's rules and defaults were fixed (2026-12-03), in batches,
# each run once before anything was changed for it, to measure how the guard does on bugs it
# was not shaped around (first-run results in benchmarks/README.md).
HELD_OUT_FAULTS: dict[str, str] = {
    "zero_grad_late": "from K, optimizer.zero_grad() runs between backward and step (the "
                      "gradients are gone before the update)",
    "pos_emb_detached": "from K, the position embedding's output is detached: it no longer "
                        "learns",
    "block_skipped": "from K, the last block returns its input (dead code behind a wrong "
                     "flag): its weights get no gradient",
    "labels_shuffled": "from K, each row gets the labels of the next row (pairs mismatched)",
    "data_cycle": "from K, the loader cycles through the same 5 batches (a truncated shard)",
    "pad_in_loss": "from K, padding positions are labelled with the pad token (the loss "
                   "learns padding)",
    # second batch, written after the first batch had led to grad.missing and the wider
    # data.repeated_batch
    "double_step": "from K, optimizer.step() runs twice per backward (a duplicated line)",
    "embedding_reinit": "at K, the token embedding is re-initialized in place (a resize that "
                        "re-draws the weights)",
    "labels_half_masked": "from K, the second half of each batch has every label masked (a "
                          "collate bug): half the data is silently unused",
    "batches_doubled": "from K, every batch comes twice in a row (an iterable dataset "
                       "replicated across loader workers)",
    "lr_units": "from K, the lr is 10x the schedule's (a config in other units)",
    # third batch, written after the second had led to data.label_mask, the label-offset
    # check and check_every=21
    "grad_clip_zero": "from K, gradients are clipped to norm 0 (max_norm=0 meant 'off' "
                      "elsewhere)",
    "tokens_truncated": "from K, rows are cut to their first 8 tokens (a max_length too "
                        "small): many answers are cut away",
    "input_noise": "from K, 30% of the input tokens are replaced by random ones (an "
                   "augmentation left on)",
    "head_untied": "at K, the output head gets its own copy of the tied embedding, a "
                   "parameter the optimizer does not have",
    "lr_group_zero": "from K, the second param group (norms and biases) trains at lr 0 (a "
                     "per-group multiplier bug)",
    # fourth batch, written after the third had led to tracking parameters added after watch()
    "block_eval_mode": "from K, the first block stays in eval mode while the rest trains "
                       "(a submodule's .eval() left in): no dropout there",
    "tokens_clamped": "from K, token ids above 40 are clamped to 40 (a tokenizer with a smaller "
                      "vocabulary)",
    "param_in_two_groups": "at K, the first block's MLP input weight is also appended to the "
                           "second param group: two updates per step",
    "wd_units": "from K, weight decay is 100x the configured one (a config in other units)",
    "grad_noise": "from K, Gaussian noise 10x the gradient's own scale is added to every "
                  "gradient (a noise multiplier in the wrong units)",
}
# Faults of data-parallel runs (torchrun, `ranks: N`); with one process they do nothing.
RANK_FAULTS: dict[str, str] = {
    "replica_drift": "at K, the last rank's copy of the first block's MLP input weight is "
                     "nudged by 0.1% (a rank-local bug): the replicas no longer agree",
}
# Faults that appear only above some size, for `labcoat shrink` (docs/shrink.md): below the
# threshold each does nothing, so the smallest reproduction keeps exactly the size that matters.
SIZE_FAULTS: dict[str, str] = {
    "deep_overflow": "from K, in models of depth >= 2 the second block's MLP output overflows "
                     "to inf (a cast that only deep stacks take): the loss is NaN",
    "long_mask_leak": "from K, attention with dropout > 0 on rows longer than 16 tokens takes a "
                      "'fused' path that drops the causal mask",
    "accumulation_no_zero_grad": "from K, with --accumulation > 1 optimizer.zero_grad() is "
                                 "skipped (it sits in the no-accumulation branch): gradients "
                                 "pile up across steps",
}
# Faults that only make steps slower (nothing computed changes), for the slow-step alarm
# (docs/phases.md); in a data-parallel run they act on the last rank alone.
SLOW_FAULTS: dict[str, str] = {
    "slow_data": "from K, fetching each batch takes 15 ms longer (a slow disk or a starved "
                 "loader worker; on the last rank only when there are several)",
}
ALL_FAULTS = {**FAULTS, **HELD_OUT_FAULTS, **RANK_FAULTS, **SIZE_FAULTS, **SLOW_FAULTS}
SLOW_DATA_S = 0.015  # slow_data: seconds added to each batch fetch
LEAK_LENGTH = 16  # long_mask_leak: rows longer than this leak
NEEDS_DROPOUT = ("dropout_in_eval", "eval_mode_stuck", "block_eval_mode")  # bugs if dropout > 0
FLIP_BIT = 24  # float32 bit 24 is the exponent's second bit: the value becomes x4 or /4
SHIFT = 3  # token_shift: ids move by this many places (mod the vocabulary)
LR_UNITS = 10.0  # lr_units: the factor
CLAMP = 40  # tokens_clamped: the largest id left
WD_UNITS = 100.0  # wd_units: the factor
GRAD_NOISE = 10.0  # grad_noise: noise scale in units of each gradient's own std
TRUNCATE = 8  # tokens_truncated: tokens kept per row
NOISE = 0.3  # input_noise: share of input tokens replaced
CYCLE = 5  # data_cycle: batches in the loop
LOSS_SCALE = 2.0**16  # loss_scale: torch.amp.GradScaler's initial scale


@dataclass(frozen=True)
class Fault:
    """A silent bug: `name` (one of `FAULTS`) switched on at optimizer step `step` (1-based)."""

    name: str
    step: int

    def __post_init__(self) -> None:
        if self.name not in ALL_FAULTS:
            raise LabcoatError(f"unknown fault {self.name!r}; choose from "
                               f"{', '.join(ALL_FAULTS)}")
        if isinstance(self.step, bool) or not isinstance(self.step, int) or self.step < 1:
            raise LabcoatError(f"fault step {self.step!r} must be an integer >= 1")


class Injector:
    """The hook points of tinylm's training loop; each does nothing unless its fault is on."""

    def __init__(self, fault: Fault | None, model: TinyLM, optimizer: torch.optim.Optimizer,
                 eval_set: EvalSet, stream: TrainStream, vocab_size: int, *,
                 accumulation: int = 1) -> None:
        self.accumulation = accumulation  # micro-batches per step (accumulation_no_zero_grad)
        self.name = fault.name if fault else ""
        self.start = fault.step if fault else 0
        self.model = model
        self.optimizer = optimizer
        self.stream = stream
        self.vocab_size = vocab_size
        self.kept: tuple[torch.Tensor, torch.Tensor] | None = None
        self.cycle: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.noise = torch.Generator().manual_seed(self.start)  # input_noise
        self.eval_items = itertools.cycle([ex for xs in eval_set.items.values() for ex in xs])

    def _on(self, name: str, step: int, *, once: bool = False) -> bool:
        return self.name == name and (step == self.start if once else step >= self.start)

    # --- data ------------------------------------------------------------------------------------

    def batch(self, step: int, inputs: torch.Tensor,
              labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.name or step < self.start:
            return inputs, labels
        if self.name == "slow_data" and _slowed_rank():
            time.sleep(SLOW_DATA_S)
        if self.name == "token_shift":
            shifted = (labels + SHIFT) % self.vocab_size
            return (inputs + SHIFT) % self.vocab_size, torch.where(labels == IGNORE, labels,
                                                                   shifted)
        if self.name == "labels_unshifted":
            return inputs, torch.where(labels == IGNORE, labels, inputs)
        if self.name == "repeated_batch":
            if self.kept is None:
                self.kept = (inputs, labels)
            return self.kept
        if self.name == "data_cycle":
            if len(self.cycle) < CYCLE:
                self.cycle.append((inputs, labels))
            return self.cycle[(step - self.start) % CYCLE]
        if self.name == "labels_half_masked":
            half = labels.clone()
            half[labels.shape[0] // 2:] = IGNORE
            return inputs, half
        if self.name == "batches_doubled":
            if (step - self.start) % 2:
                assert self.kept is not None
                return self.kept
            self.kept = (inputs, labels)
            return inputs, labels
        if self.name == "tokens_truncated":
            return inputs[:, :TRUNCATE], labels[:, :TRUNCATE]
        if self.name == "input_noise":
            noisy = torch.rand(inputs.shape, generator=self.noise) < NOISE
            random = torch.randint(0, self.vocab_size, inputs.shape, generator=self.noise)
            return torch.where(noisy & (inputs != PAD_ID), random, inputs), labels
        if self.name == "tokens_clamped":
            return inputs.clamp(max=CLAMP), labels.where(labels == IGNORE, labels.clamp(max=CLAMP))
        if self.name == "labels_shuffled":
            return inputs, labels.roll(1, dims=0)
        if self.name == "pad_in_loss":
            return inputs, torch.where(inputs == PAD_ID, PAD_ID, labels)
        if self.name == "batch_collapse":
            keep = max(1, inputs.shape[0] // 16)
            return inputs[:keep], labels[:keep]
        if self.name == "eval_leak":
            n = inputs.shape[0]
            leaked = [next(self.eval_items) for _ in range(n // 4)]
            return collate(leaked + [self.stream.example() for _ in range(n - len(leaked))])
        return inputs, labels

    # --- the step --------------------------------------------------------------------------------

    def sets_lr(self, step: int) -> bool:
        return not self._on("lr_stuck", step)

    def lr_factor(self, step: int, group: int) -> float:
        if self._on("lr_group_zero", step) and group == 1:
            return 0.0
        return LR_UNITS if self._on("lr_units", step) else 1.0

    def before_forward(self, step: int) -> None:
        if not self.name or step < self.start:
            return
        blocks = self.model.blocks
        if self._on("block_eval_mode", step):
            blocks[0].eval()
        if self._on("wd_units", step, once=True):
            for group in self.optimizer.param_groups:
                group["weight_decay"] *= WD_UNITS
        if self._on("causal_mask_off", step, once=True):
            for block in blocks:
                block.attn.forward = types.MethodType(_non_causal_forward, block.attn)
        elif self._on("frozen_block", step, once=True):
            for p in blocks[0].parameters():
                p.requires_grad_(False)
        elif self._on("param_dropped", step, once=True):
            target = blocks[-1].mlp.up.weight
            for group in self.optimizer.param_groups:
                group["params"] = [p for p in group["params"] if p is not target]
        elif self._on("weight_blowup", step, once=True):
            with torch.no_grad():
                blocks[0].mlp.up.weight.mul_(1000.0)
        elif self._on("pos_emb_detached", step, once=True):
            _detach_output(self.model.pos_emb)
        elif self._on("block_skipped", step, once=True):
            blocks[-1].forward = lambda x: x
        elif self._on("embedding_reinit", step, once=True):
            with torch.no_grad():
                self.model.tok_emb.weight.normal_(0.0, 0.02)
        elif self._on("head_untied", step, once=True):
            self.model.head.weight = torch.nn.Parameter(self.model.head.weight.detach().clone())
        elif self._on("param_in_two_groups", step, once=True):
            self.optimizer.param_groups[1]["params"].append(blocks[0].mlp.up.weight)
        elif self._on("sdc_param", step, once=True):
            _flip(blocks[0].attn.qkv.weight.data)
        elif self._on("optimizer_reset", step, once=True):
            self.optimizer.state.clear()
        elif self._on("replica_drift", step, once=True) and _last_rank():
            with torch.no_grad():
                blocks[0].mlp.up.weight.mul_(1.001)
        elif self._on("deep_overflow", step, once=True) and len(blocks) >= 2:
            _overflow_output(blocks[1].mlp)
        elif self._on("long_mask_leak", step, once=True):
            for block in blocks:
                block.attn.forward = types.MethodType(_leaky_long_forward, block.attn)

    def loss_scale(self, step: int) -> float:
        return LOSS_SCALE if self._on("loss_scale", step) else 1.0

    def zeroes_grad(self, step: int) -> bool:
        if self._on("accumulation_no_zero_grad", step) and self.accumulation > 1:
            return False
        return not self._on("no_zero_grad", step)

    def after_backward(self, step: int) -> None:
        if self._on("zero_grad_late", step):
            self.optimizer.zero_grad(set_to_none=True)
        elif self._on("grad_clip_zero", step):
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 0.0)
        elif self._on("grad_noise", step):
            for p in self.model.parameters():
                if p.grad is not None:
                    noise = torch.randn(p.grad.shape, generator=self.noise)
                    p.grad.add_(noise * (GRAD_NOISE * float(p.grad.std())))
        elif self._on("grad_nan", step, once=True):
            grad = self.model.blocks[0].mlp.up.weight.grad
            if grad is not None:
                grad[0, 0] = float("nan")
        elif self._on("sdc_grad", step, once=True):
            grad = self.model.blocks[0].mlp.down.weight.grad
            if grad is not None:
                _flip(grad)

    def steps_optimizer(self, step: int) -> bool:
        return not (self._on("step_skipped", step) and step % 2)

    def after_step(self, step: int) -> None:
        if self._on("double_step", step):
            self.optimizer.step()

    # --- evaluation ------------------------------------------------------------------------------

    def evaluation_mode(self, step: int) -> str:
        """How evaluation sets modes: 'normal', 'no_eval' (forgets eval()), 'stuck' (no train())."""
        if self._on("dropout_in_eval", step):
            return "no_eval"
        if self._on("eval_mode_stuck", step):
            return "stuck"
        return "normal"


def _slowed_rank() -> bool:
    """The process slow faults act on: the last rank of a group, or the only process."""
    dist = torch.distributed
    return not (dist.is_available() and dist.is_initialized()) or _last_rank()


def _last_rank() -> bool:
    """This process is the last rank of an initialized data-parallel group of 2 or more."""
    dist = torch.distributed
    return (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
            and dist.get_rank() == dist.get_world_size() - 1)


def _detach_output(module: torch.nn.Module) -> None:
    forward = module.forward
    module.forward = lambda *args: forward(*args).detach()


def _flip(t: torch.Tensor) -> None:
    """Flip bit FLIP_BIT of the largest-magnitude element, through an integer view (no autograd
    write is recorded, like a hardware fault)."""
    flat = t.detach().view(-1)
    i = int(flat.abs().argmax())
    bits = flat.view(torch.int32)
    bits[i] = bits[i] ^ (1 << FLIP_BIT)


def _non_causal_forward(self: CausalSelfAttention, x: torch.Tensor) -> torch.Tensor:
    """CausalSelfAttention.forward with is_causal=False: the bug, everything else unchanged."""
    B, T, C = x.shape
    q, k, v = self.qkv(x).split(C, dim=2)
    q, k, v = (z.view(B, T, self.heads, C // self.heads).transpose(1, 2) for z in (q, k, v))
    y = F.scaled_dot_product_attention(
        q, k, v, is_causal=False, dropout_p=self.dropout if self.training else 0.0
    )
    y = y.transpose(1, 2).reshape(B, T, C)
    return self.resid_dropout(self.proj(y))


def _overflow_output(module: torch.nn.Module) -> None:
    forward = module.forward
    module.forward = lambda *args: forward(*args) * float("inf")


def _leaky_long_forward(self: CausalSelfAttention, x: torch.Tensor) -> torch.Tensor:
    """The causal forward, except rows longer than LEAK_LENGTH with dropout configured."""
    if x.shape[1] > LEAK_LENGTH and self.dropout > 0:
        return _non_causal_forward(self, x)
    return CausalSelfAttention.forward(self, x)


def describe() -> str:
    """One line per fault, for --help."""
    return "; ".join(f"{name}: {text}" for name, text in FAULTS.items())


def check_dropout(fault: Fault | None, dropout: float) -> None:
    if fault is not None and fault.name in NEEDS_DROPOUT and dropout <= 0:
        raise LabcoatError(f"fault {fault.name} is only a bug with dropout > 0; "
                           "add e.g. --dropout 0.1")
