"""Rules added for the rest of TrainCheck's non-distributed ids and issue 18's miss classes
(benchmarks/traincheck_bugs.py): each bug fires its rule, each clean twin stays quiet."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from labcoat.torch import watch


class _Net(nn.Module):
    def __init__(self, norm: nn.Module | None = None) -> None:
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.norm = norm if norm is not None else nn.Identity()
        self.head = nn.Linear(16, 3)
        self.cut = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.norm(self.stem(x)))
        return self.head(h.detach() if self.cut else h)


def _loop(model: nn.Module, steps: int = 25, *, opt: torch.optim.Optimizer | None = None,
          before: Callable[[int, nn.Module, torch.optim.Optimizer], None] | None = None,
          clip: Callable[[nn.Module], None] | None = None, eval_first: bool = False,
          backward: Callable[[int], bool] = lambda step: True, start: int = 0,
          **options: Any) -> list[tuple[int, str]]:
    torch.manual_seed(0)
    opt = opt or torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = watch(model, opt, start_step=start, **options)
    g = torch.Generator().manual_seed(1)
    if eval_first:
        model.eval()
        with torch.no_grad():
            model(torch.randn(8, 8, generator=g))
    for step in range(start + 1, start + steps + 1):
        if before is not None:
            before(step, model, opt)
        model.train()
        x, y = torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g)
        opt.zero_grad()
        if backward(step):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if clip is not None:
                clip(model)
            guard.record(loss=loss.item(), batch=(x, y))
        opt.step()
    guard.close()
    return [(a.step, a.rule) for a in guard.alerts]


def _rules(alerts: list[tuple[int, str]]) -> set[str]:
    return {rule for _, rule in alerts}


# --- mode.eval_before_train ----------------------------------------------------------------------

def test_old_spectral_norm_evaluated_before_training_is_caught() -> None:
    model = _Net()
    model.stem = nn.utils.spectral_norm(model.stem)
    assert (0, "mode.eval_before_train") in _loop(model, eval_first=True)


def test_parametrized_spectral_norm_evaluated_first_is_quiet() -> None:
    model = _Net()
    model.stem = nn.utils.parametrizations.spectral_norm(model.stem)  # iterates at construction
    assert "mode.eval_before_train" not in _rules(_loop(model, eval_first=True))


def test_fresh_batch_norm_evaluated_first_is_caught() -> None:
    assert (0, "mode.eval_before_train") in _loop(_Net(nn.BatchNorm1d(16)), eval_first=True)


def test_batch_norm_restored_from_a_checkpoint_and_evaluated_first_is_quiet() -> None:
    trained = _Net(nn.BatchNorm1d(16))
    trained(torch.randn(32, 8))  # a training-mode forward sets the running statistics
    model = _Net(nn.BatchNorm1d(16))
    model.load_state_dict(trained.state_dict())
    assert _loop(model, eval_first=True) == []


def test_a_pretrained_batch_norm_without_a_batch_count_is_quiet() -> None:
    model = _Net(nn.BatchNorm1d(16))
    with torch.no_grad():  # statistics loaded, num_batches_tracked left at 0 (old checkpoints)
        model.norm.running_mean.uniform_(-1, 1)
        model.norm.running_var.uniform_(0.5, 2)
    assert _loop(model, eval_first=True) == []


def test_batch_norm_and_spectral_norm_evaluated_after_training_are_quiet() -> None:
    model = _Net(nn.BatchNorm1d(16))
    model.stem = nn.utils.spectral_norm(model.stem)

    def evaluate(step: int, m: nn.Module, opt: torch.optim.Optimizer) -> None:
        if step == 5:
            m.eval()
            with torch.no_grad():
                m(torch.randn(4, 8))
    assert _loop(model, before=evaluate) == []


# --- grad.partial_clip ---------------------------------------------------------------------------

def _clipper(skip: str | None) -> Callable[[nn.Module], None]:
    def clip(m: nn.Module) -> None:
        grads = [p.grad for p in m.parameters() if p.grad is not None]
        total = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
        coef = torch.clamp(0.01 / (total + 1e-6), max=1.0)
        for name, p in m.named_parameters():
            if p.grad is not None and not (skip and name.startswith(skip)):
                p.grad.mul_(coef)
    return clip


def test_a_clip_coefficient_applied_to_part_of_the_gradients_is_caught() -> None:
    alerts = _loop(_Net(nn.LayerNorm(16)), clip=_clipper(skip="norm."))
    assert (1, "grad.partial_clip") in alerts


def test_clipping_every_gradient_or_none_is_quiet() -> None:
    assert _loop(_Net(nn.LayerNorm(16)), clip=_clipper(skip=None)) == []
    assert _loop(_Net(nn.LayerNorm(16))) == []
    clip_all = lambda m: nn.utils.clip_grad_norm_(m.parameters(), 0.01)  # noqa: E731
    assert _loop(_Net(nn.LayerNorm(16)), clip=clip_all) == []


def test_elementwise_value_clipping_is_not_a_partial_clip() -> None:
    clip = lambda m: nn.utils.clip_grad_value_(m.parameters(), 0.01)  # noqa: E731
    assert "grad.partial_clip" not in _rules(_loop(_Net(nn.LayerNorm(16)), clip=clip))


def test_partial_clipping_from_a_later_check_step_is_caught_there() -> None:
    part, whole = _clipper(skip="norm."), _clipper(skip=None)
    alerts = _loop(_Net(nn.LayerNorm(16)), steps=45,
                   clip=lambda m: (part if m.partial else whole)(m),  # type: ignore[attr-defined]
                   before=lambda step, m, opt: setattr(m, "partial", step >= 30))
    assert [a for a in alerts if a[1] == "grad.partial_clip"] == [(42, "grad.partial_clip")]


# --- update.outside_step over a whole check interval ---------------------------------------------

def _reinit_at(step_no: int) -> Callable[[int, nn.Module, torch.optim.Optimizer], None]:
    def before(step: int, m: nn.Module, opt: torch.optim.Optimizer) -> None:
        if step == step_no:
            with torch.no_grad():
                m.stem.weight.normal_(0, 0.02)
    return before


def test_weights_reinitialized_mid_interval_are_caught_at_the_next_check_step() -> None:
    alerts = _loop(_Net(), before=_reinit_at(10))
    assert (21, "update.outside_step") in alerts


def test_weights_reloaded_from_an_earlier_step_are_caught() -> None:
    saved: dict[str, Any] = {}

    def before(step: int, m: nn.Module, opt: torch.optim.Optimizer) -> None:
        if step == 3:
            saved.update(copy.deepcopy(m.state_dict()))
        if step == 12:
            m.load_state_dict(saved)  # weights only: the optimizer keeps its later state
    assert (21, "update.outside_step") in _loop(_Net(), before=before)


def test_a_write_of_the_loop_at_every_step_is_not_an_interval_alarm() -> None:
    def before(step: int, m: nn.Module, opt: torch.optim.Optimizer) -> None:
        with torch.no_grad():  # weight clipping that never binds: a version bump per step
            m.stem.weight.clamp_(-100, 100)
    assert _loop(_Net(), steps=45, before=before) == []


def test_a_parameter_used_every_other_step_is_not_an_interval_alarm() -> None:
    class Sometimes(_Net):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls = getattr(self, "calls", 0) + 1
            h = torch.relu(self.stem(x))
            return self.head(self.norm(h) if self.calls % 2 else h)
    model = Sometimes(nn.LayerNorm(16))
    assert _loop(model, steps=45) == []


# --- grad.missing: declared trainable, skipped backward ------------------------------------------

def test_a_trunk_cut_from_step_1_is_caught_with_a_declaration() -> None:
    model = _Net()
    model.cut = True
    assert (1, "grad.missing") in _loop(model, trainable=["stem.*", "head.*"])
    assert "grad.missing" not in _rules(_loop(_Net(), trainable=["stem.*", "head.*"]))


def test_a_trunk_cut_at_a_resume_is_caught_with_a_declaration() -> None:
    model = _Net()
    model.cut = True
    assert (41, "grad.missing") in _loop(model, start=40, trainable=["stem.*"])


def test_a_zero_initialized_factor_declared_trainable_is_quiet_at_step_1() -> None:
    class Lora(_Net):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Parameter(torch.randn(16, 2) * 0.1)
            self.b = nn.Parameter(torch.zeros(2, 16))  # LoRA: B starts at 0, so A's grad is 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.stem(x))
            return self.head(h + h @ self.a @ self.b)
    assert "grad.missing" not in _rules(_loop(Lora(), trainable=["a", "b"]))


def test_a_step_without_backward_is_not_a_missing_gradient() -> None:
    assert _loop(_Net(), backward=lambda step: step != 12, opt=None) == []


def test_zero_grad_between_backward_and_step_is_still_caught() -> None:
    model = _Net()

    def clip(m: nn.Module) -> None:
        if clip.calls >= 30:  # type: ignore[attr-defined]
            m.zero_grad()
        clip.calls += 1  # type: ignore[attr-defined]
    clip.calls = 0  # type: ignore[attr-defined]
    assert "grad.missing" in _rules(_loop(model, steps=40, clip=clip))


# --- optimizer.step_counter at a resume ----------------------------------------------------------

def _trained(steps: int = 10) -> tuple[nn.Module, torch.optim.Optimizer]:
    model = _Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 3, (16,))).backward()
        opt.step()
    return model, opt


def test_a_resume_with_a_fresh_optimizer_state_is_caught_at_its_first_step() -> None:
    old, _ = _trained()
    model = _Net()
    model.load_state_dict(old.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    assert (11, "optimizer.step_counter") in _loop(model, opt=opt, start=10)


def test_a_resume_with_the_optimizer_state_restored_is_quiet() -> None:
    old, old_opt = _trained()
    model = _Net()
    model.load_state_dict(old.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt.load_state_dict(old_opt.state_dict())
    assert _loop(model, opt=opt, start=10) == []


def test_a_fresh_optimizer_without_a_resume_is_quiet() -> None:
    assert _loop(_Net()) == []


# --- invariant.eval_length -----------------------------------------------------------------------

class _LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(16, 8)
        self.out = nn.Linear(8, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.tok(ids))


def _lm_run(new_tokens: int, reference: list[dict[str, Any]] | None = None
            ) -> tuple[list[str], dict[str, Any]]:
    torch.manual_seed(0)
    model = _LM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = watch(model, opt, reference=reference or [])
    for step in range(1, 13):
        ids = torch.randint(0, 16, (8, 10))
        opt.zero_grad()
        F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()).backward()
        opt.step()
        if step % 4 == 0:
            model.eval()
            with torch.no_grad():
                seq = torch.zeros(1, 5, dtype=torch.long)
                for _ in range(new_tokens):
                    seq = torch.cat([seq, model(seq)[:, -1:].argmax(-1)], dim=1)
    guard.close()
    return [a.rule for a in guard.alerts], guard.profile()


def test_generation_past_the_references_longest_input_is_caught() -> None:
    _, profile = _lm_run(new_tokens=6)
    assert profile["eval_length"] == 10  # 5 prompt tokens + 5 fed back (the 6th is not fed)
    assert "invariant.eval_length" in _lm_run(new_tokens=12, reference=[profile])[0]


def test_generation_within_the_references_budget_is_quiet() -> None:
    _, profile = _lm_run(new_tokens=6)
    assert "invariant.eval_length" not in _lm_run(new_tokens=6, reference=[profile])[0]
