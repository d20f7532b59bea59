"""Peer benchmark: TrainCheck's silent bugs re-expressed on CPU in plain PyTorch, guard on defaults.

    .venv/bin/python benchmarks/traincheck_bugs.py [--seeds 10] [--only SUBSTRING] [--no-dist]
                                                   [--quick]

Each case is one small plain-PyTorch loop with the bug switched on (from step
``ONSET`` unless the case says otherwise) and its clean twin (same loop, bug
removed) for false alarms. The guard runs with ``watch(model, optimizer)``
defaults plus ``guard.record(loss, batch)``, and a case's declaration of intent
or clean reference runs only where the case says so. Cases are named after the
OrderLab TrainCheck-Evaluation-Workloads id they re-express
(silent-issue-detection/README.md); each docstring says whether the loop is a
faithful reproduction or the same mechanism in plain PyTorch. The distributed ids
are in ``benchmarks/traincheck_dist.py`` (2 gloo ranks); this command runs them too
(``traincheck_dist.run``) unless ``--no-dist`` or ``--only`` is given.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import _harness as bench
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from labcoat.torch import watch

STEPS, ONSET = 60, 30


def _nothing(step: int) -> None:
    return None


def _mlp_batch(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(32, 16, generator=g), torch.randint(0, 4, (32,), generator=g)


def _mlp_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x).float(), y)


def _mlp_eval(model: nn.Module, x: torch.Tensor) -> None:
    model(x)


@dataclass(kw_only=True)
class Setup:
    """One loop of a case: what the generic loop in `run` needs to know."""

    model: nn.Module
    hook: Callable[[int], None] = _nothing  # called before each step's forward (the bug)
    loader: Any = None  # a DataLoader the case draws its batches from (given to loaders=)
    options: dict[str, Any] = field(default_factory=dict)  # watch() options: declarations
    onset: int = ONSET  # first step at which the bug can show (0: before step 1)
    optimizer: torch.optim.Optimizer | None = None  # None: AdamW(lr=1e-2) over the model
    backward: Callable[[int], bool] = lambda step: True  # run loss.backward() at this step?
    zero_grad: bool = True  # call optimizer.zero_grad() before each backward
    clip: Callable[[nn.Module], None] | None = None  # between backward and step
    autocast: bool = False  # train under CPU bfloat16 autocast
    evaluate_first: bool = False  # evaluate (model.eval(), no_grad) before step 1
    start_step: int = 0  # a resumed run: optimizer steps taken before this one started
    references: int = 0  # clean reference runs (other seeds) given as reference=
    batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]] = _mlp_batch
    loss: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor] = _mlp_loss
    evaluate: Callable[[nn.Module, torch.Tensor], None] = _mlp_eval  # under eval()/no_grad


class _Net(nn.Module):
    """An MLP whose hidden layer goes through functional dropout; ``cut`` detaches the trunk."""

    def __init__(self, ungated_dropout: bool = False) -> None:
        super().__init__()
        self.stem = nn.Linear(16, 32)
        self.head = nn.Linear(32, 4)
        self.ungated = ungated_dropout
        self.cut = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        if self.cut:
            h = h.detach()
        return self.head(F.dropout(h, 0.1, training=True if self.ungated else self.training))


class _NormNet(nn.Module):
    """Linear -> normalization -> ReLU -> Linear (names as in EfficientNet: ``bn``, ``_fc``)."""

    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.stem = nn.Linear(16, 32)
        self.bn = norm
        self._fc = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._fc(torch.relu(self.bn(self.stem(x))))


def _pretrain(model: nn.Module, steps: int, seed: int) -> torch.optim.Optimizer:
    """Train `model` unwatched for `steps` AdamW steps (the run before a resume)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(seed + 1000)
    for _ in range(steps):
        x, y = torch.randn(32, 16, generator=g), torch.randint(0, 4, (32,), generator=g)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return opt


# --- the ids -------------------------------------------------------------------------------------

def _transformers_33844(bug: bool, seed: int) -> Setup:
    """transformers-33844 (M2M100/Bart FlashAttention2 dropout in eval): the attention passes
    its dropout rate to a functional kernel without gating it on ``self.training``, so
    evaluation forwards still draw random numbers. Same mechanism in plain PyTorch:
    ``F.dropout(h, 0.1, training=True)``. The bug exists from the start; onset = the first
    evaluation (step 10). Clean twin: ``training=self.training`` (the upstream fix)."""
    return Setup(model=_Net(ungated_dropout=bug), onset=10)


def _mmpretrain_702(bug: bool, seed: int) -> Setup:
    """mmpretrain-702 (frozen_stages ignored): the config freezes the stem (declared with
    watch(frozen=...)), but from ONSET the framework's train() re-enables its gradients,
    so the frozen stage is silently trained. Simulated as upstream (TrainCheck's trace is
    simulated too). Clean twin: the stem stays frozen."""
    model = _Net()
    model.stem.requires_grad_(False)

    def hook(step: int) -> None:
        if bug and step == ONSET:
            model.stem.requires_grad_(True)
    return Setup(model=model, hook=hook, options={"frozen": ["stem.*"]})


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


def _lightning_thunder_725(bug: bool, seed: int) -> Setup:
    """lightning-thunder-725 class (linear outputs leave the autocast dtype): the loop trains
    under ``torch.autocast("cpu", dtype=torch.bfloat16)``; from ONSET the head runs inside
    ``autocast(enabled=False)`` (an upcast region a library or refactor added), so its
    matmul is fp32. Mechanism re-expressed (upstream: thunder's autocast transform), as
    TrainCheck simulates it. Clean twin: the head stays under autocast."""
    model = _Net()
    model.head = head = _Head(model.head)

    def hook(step: int) -> None:
        if bug and step == ONSET:
            head.outside = True
    return Setup(model=model, hook=hook, autocast=True)


def _pytorch_51800(bug: bool, seed: int) -> Setup:
    """pytorch-51800 (spectral_norm not initialized if used with eval first), faithful: the
    stem is wrapped in ``torch.nn.utils.spectral_norm``, whose power-iteration vector ``u``
    is drawn at random and only iterated by training-mode forwards; the loop evaluates the
    freshly built model (model.eval(), no_grad) before step 1, so that evaluation divides
    the weight by a wrong sigma (outputs orders of magnitude off). Onset 0 (before step 1).
    Clean twin: ``torch.nn.utils.parametrizations.spectral_norm``, the API that replaced it
    and iterates ``u``, ``v`` at construction (the upstream fix)."""
    model = _Net()
    if bug:
        model.stem = nn.utils.spectral_norm(model.stem)
    else:
        model.stem = nn.utils.parametrizations.spectral_norm(model.stem)
    return Setup(model=model, onset=0, evaluate_first=True)


def _bn_eval_first(bug: bool, seed: int) -> Setup:
    """Batch-norm evaluated before its first training forward (issue 18 miss class; the
    batch-norm form of pytorch-51800): the loop evaluates a freshly built model, whose
    running statistics are still mean 0 / variance 1, so the evaluation measures a network
    without normalization. Onset 0. Clean twin: the same evaluation of the model restored
    from a checkpoint of a trained run (statistics set by training)."""
    model = _NormNet(nn.BatchNorm1d(32))
    if not bug:
        trained = _NormNet(nn.BatchNorm1d(32))
        _pretrain(trained, 20, seed)
        model.load_state_dict(trained.state_dict())
    return Setup(model=model, onset=0, evaluate_first=True)


class _StuckAfterNone(torch.optim.Adam):
    """Adam whose step stops updating anything once it has run with no gradients at all:
    what dynamo's compiled training loop did in pytorch-115607 (a step with ``grad=None``
    leaves the step counter, and every later update, frozen)."""

    stuck = False

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        if self.stuck:
            return None
        if all(p.grad is None for g in self.param_groups for p in g["params"]):
            self.stuck = True
        return super().step(closure)


def _pytorch_115607(bug: bool, seed: int) -> Setup:
    """pytorch-115607 (dynamo: after an iteration whose gradients are None, Adam's step
    counter and every later update stay frozen). Same mechanism without dynamo: the loop
    skips backward at ONSET (``zero_grad(set_to_none=True)``, then ``step()`` with no
    gradients, as upstream's ``simple_buggy.py``); the optimizer then stops updating
    (`_StuckAfterNone`). Clean twin: the same skipped backward under eager Adam (which
    skips the gradient-less step and resumes)."""
    model = _Net()
    opt = (_StuckAfterNone if bug else torch.optim.Adam)(model.parameters(), lr=1e-2)
    return Setup(model=model, optimizer=opt, backward=lambda step: step != ONSET,
                 onset=ONSET + 1)


def _forum_84911(bug: bool, seed: int) -> Setup:
    """pytorch-forum-84911 (transfer learning that does not learn), faithful in structure:
    the optimizer is built over ``model._fc`` only, then every parameter whose name lacks
    ``bn`` is frozen, and ``_fc`` too, before training starts, so only the batch-norm
    affine parameters get gradients, and no optimizer holds them (EfficientNet-b0 on
    CIFAR-100 upstream; a small Linear-BN-Linear net here). Onset 1. Clean twin (the
    upstream fix): every layer trainable, the optimizer over all parameters."""
    model = _NormNet(nn.BatchNorm1d(32))
    if bug:
        opt = torch.optim.Adam(model._fc.parameters(), lr=1e-3)
        for name, p in model.named_parameters():
            if "bn" not in name:
                p.requires_grad = False
        for p in model._fc.parameters():
            p.requires_grad = False
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return Setup(model=model, optimizer=opt, onset=1)


def _stackoverflow_60335387(bug: bool, seed: int) -> Setup:
    """stackoverflow-60335387 (MNIST example does not converge), faithful: the loop never
    calls ``optimizer.zero_grad()``, so gradients accumulate from step 1 (Adam, lr 1e-4
    upstream; lr 1e-3 here). Onset 1. Clean twin: zero_grad() at every step."""
    model = _Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return Setup(model=model, optimizer=opt, zero_grad=not bug, onset=1)


def _gpt2_init(module: nn.Module) -> None:
    """GPT-2's _init_weights for the modules of `_Net` (normal(0, 0.02), zero bias)."""
    if isinstance(module, nn.Linear):
        with torch.no_grad():
            module.weight.normal_(0.0, 0.02)
            module.bias.zero_()


def _transformers_17877(bug: bool, seed: int) -> Setup:
    """transformers-17877 (GPT-2's init re-run over the same tensors). Upstream the
    re-initialization happens 4x per tensor while the model is built, before any training
    step, which no training-loop guard watches (TrainCheck instruments ``normal_`` calls at
    construction). Re-expressed as the same mechanism where it hurts: an init routine
    applied again to already-initialized (here: trained) weights, ``model.apply(_init_weights)``
    at ONSET (a helper that rebuilds a head and re-runs ``post_init()``), so the trained
    weights are redrawn. Clean twin: the init runs once, before watch()."""
    model = _Net()
    model.apply(_gpt2_init)

    def hook(step: int) -> None:
        if bug and step == ONSET:
            model.apply(_gpt2_init)
    return Setup(model=model, hook=hook)


def _deepspeed_1801(bug: bool, seed: int) -> Setup:
    """deepspeed-1801 (BF16_Optimizer clips only part of the gradients). Upstream, on tensor-
    parallel ranks > 0, the list of gradients to clip skipped the replicated layer-norm
    weights, so they were updated unclipped (and drifted across ranks). Same mechanism in
    one process: the total gradient norm is computed over every gradient, but the clip
    coefficient is applied only to the gradients that are not the layer norm's, from step
    1 (max_norm 0.05, so every step clips). Onset 1. Clean twin: the coefficient applied to
    every gradient (``clip_grad_norm_``)."""
    model = _NormNet(nn.LayerNorm(32))

    def clip(m: nn.Module) -> None:
        grads = [p.grad for p in m.parameters() if p.grad is not None]
        total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        coef = torch.clamp(0.05 / (total + 1e-6), max=1.0)
        for name, p in m.named_parameters():
            if p.grad is not None and not (bug and name.startswith("bn.")):
                p.grad.mul_(coef)
    return Setup(model=model, clip=clip, onset=1)


class _TinyLM(nn.Module):
    """A decoder-only token model: token + learned position embeddings, one tanh layer."""

    def __init__(self, vocab: int = 32, positions: int = 128) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, 16)
        self.pos = nn.Embedding(positions, 16)
        self.out = nn.Linear(16, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.tok(ids) + self.pos(torch.arange(ids.shape[-1]))
        return self.out(torch.tanh(h))


def _lm_batch(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, 32, (32, 25), generator=g)
    return ids[:, :-1], ids[:, 1:]  # labels: the next token


def _lm_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


PROMPT = torch.randint(0, 32, (60,), generator=torch.Generator().manual_seed(7))
CONTEXT_PROMPT, MAX_NEW = 20, 10  # prompt tokens kept for the context; the token budget


def _generate(bug: bool) -> Callable[[nn.Module, torch.Tensor], None]:
    """Greedy generation after a long prompt, Whisper's prompt handling re-expressed: the
    budget of new tokens is computed from the prompt's length *before* it is trimmed to
    its last CONTEXT_PROMPT tokens (the bug), or after (the fix)."""
    def evaluate(model: nn.Module, x: torch.Tensor) -> None:
        budget = MAX_NEW + (len(PROMPT) - CONTEXT_PROMPT if bug else 0)
        ids = PROMPT[-CONTEXT_PROMPT:][None]
        for _ in range(budget):  # no KV cache: the whole sequence at each call
            ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], dim=1)
    return evaluate


def _transformers_23723(bug: bool, seed: int) -> Setup:
    """transformers-23723 (Whisper ``generate`` ignores ``max_new_tokens`` with a long
    ``prompt_ids``): the budget was recomputed from the prompt's length before the prompt
    was trimmed to fit the context, so generation ran past it (25 new tokens for
    ``max_new_tokens=10`` upstream). Same mechanism in plain PyTorch (`_generate`): a tiny
    decoder trained on next-token prediction, evaluated every 10 steps by greedy generation
    after a 60-token prompt trimmed to 20, budget 10; the bug computes the budget from the
    untrimmed prompt (50 new tokens). Intent comes from one clean reference run (another
    seed, TrainCheck's invariant source too): the longest evaluation input it had. Onset
    10 (the first evaluation). Clean twin: the budget after trimming (the upstream fix)."""
    return Setup(model=_TinyLM(), batch=_lm_batch, loss=_lm_loss, evaluate=_generate(bug),
                 onset=10, references=1)


def _weights_reload(bug: bool, seed: int) -> Setup:
    """Weights that jump back to an earlier state (issue 18 miss class): at ONSET the loop
    reloads the weights saved at step 10 (``model.load_state_dict``, weights only; the
    optimizer keeps its later moments): a resume path taken by mistake, a callback restoring
    the "best" checkpoint. Clean twin: the state is saved but never restored."""
    model = _Net()
    saved: dict[str, torch.Tensor] = {}

    def hook(step: int) -> None:
        if step == 11:
            saved.update(copy.deepcopy(model.state_dict()))
        if bug and step == ONSET:
            model.load_state_dict(saved)
    return Setup(model=model, hook=hook)


def _optimizer_reload(bug: bool, seed: int) -> Setup:
    """Optimizer state that jumps back to an earlier state (issue 18 miss class): at ONSET
    the loop restores the optimizer state saved at step 10 (moments and step counter go
    back 20 steps; the weights stay). Clean twin: saved, never restored."""
    model = _Net()
    holder: dict[str, Any] = {}

    def hook(step: int) -> None:
        opt = holder["opt"]
        if step == 11:
            holder["saved"] = copy.deepcopy(opt.state_dict())
        if bug and step == ONSET:
            opt.load_state_dict(holder["saved"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    holder["opt"] = opt
    return Setup(model=model, optimizer=opt, hook=hook)


def _trunk_cut(bug: bool, seed: int) -> Setup:
    """A trunk cut off from the gradient mid-run (issue 18 miss class): from ONSET the stem's
    output is ``.detach()``-ed (a refactor moving a feature extractor under a stop-gradient),
    so the stem stops learning while the head trains on. Clean twin: never cut."""
    model = _Net()

    def hook(step: int) -> None:
        if bug and step == ONSET:
            model.cut = True
    return Setup(model=model, hook=hook)


def _trunk_cut_step1(bug: bool, seed: int) -> Setup:
    """The same cut from step 1 (early onset): no history says the stem ever had a gradient,
    and a parameter that never gets one is also what an unused module looks like, so
    intent is declared: ``watch(trainable=["stem.*", "head.*"])``. Onset 1. Clean twin: not
    cut."""
    model = _Net()
    model.cut = bug
    return Setup(model=model, onset=1, options={"trainable": ["stem.*", "head.*"]})


def _trunk_cut_resume(bug: bool, seed: int) -> Setup:
    """The same cut from the first step after a resume (early onset): 20 steps trained
    before, ``watch(start_step=20, trainable=[...])``; the stem is detached from step 21.
    Onset 21. Clean twin: not cut."""
    model = _Net()
    opt = _pretrain(model, 20, seed)
    model.cut = bug
    return Setup(model=model, optimizer=opt, start_step=20, onset=21,
                 options={"trainable": ["stem.*", "head.*"]})


def _resume_fresh_optimizer(bug: bool, seed: int) -> Setup:
    """A resume that restores the weights but not the optimizer state (early onset, at a
    resume): 20 steps trained, the weights saved and loaded into a new model, and a fresh
    AdamW (moments zero, step counter 0: bias correction restarts, a silent lr spike) with
    ``watch(start_step=20)``. Onset 21. Clean twin: the optimizer state restored too."""
    trained = _Net()
    opt_before = _pretrain(trained, 20, seed)
    model = _Net()
    model.load_state_dict(trained.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    if not bug:
        opt.load_state_dict(opt_before.state_dict())
    return Setup(model=model, optimizer=opt, start_step=20, onset=21)


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


def _worker_rng(bug: bool, seed: int) -> Setup:
    """stackoverflow-67180955 (loader workers apply the same augmentation: before PyTorch
    1.9 every forked worker inherited one NumPy RNG state; TrainCheck marks it not
    reproducible, since it needs torch 1.8 and its old Python; issue 18's miss class). Same
    mechanism on current torch: a worker_init_fn that seeds every worker's NumPy alike
    (what the fork did), 2 workers, NumPy noise augmentation, so worker 0's k-th batch gets
    the same noise as worker 1's. The bug exists from step 1 (onset 1); the loader is
    given with ``loaders=``. Clean twin: the workers seed NumPy from
    ``torch.initial_seed()``."""
    loader = torch.utils.data.DataLoader(
        _Noisy(seed, 32 * STEPS), batch_size=32, shuffle=True, num_workers=2,
        worker_init_fn=_SameSeed(seed) if bug else _per_worker_seed,
        generator=torch.Generator().manual_seed(seed))
    return Setup(model=_Net(), loader=loader, onset=1)


CASES: dict[str, Callable[[bool, int], Setup]] = {
    "pytorch-51800 (spectral norm, eval first)": _pytorch_51800,
    "pytorch-115607 (step frozen after None grads)": _pytorch_115607,
    "pytorch-forum-84911 (all but bn frozen)": _forum_84911,
    "stackoverflow-60335387 (no zero_grad)": _stackoverflow_60335387,
    "transformers-17877 (init re-run)": _transformers_17877,
    "transformers-23723 (generation past budget)": _transformers_23723,
    "transformers-33844 (eval dropout)": _transformers_33844,
    "deepspeed-1801 (partial grad clipping)": _deepspeed_1801,
    "mmpretrain-702 (frozen stage trained)": _mmpretrain_702,
    "lightning-thunder-725 (autocast dtype)": _lightning_thunder_725,
    "stackoverflow-67180955 (workers share an RNG)": _worker_rng,
    "miss: batch norm evaluated first": _bn_eval_first,
    "miss: weights-only reload": _weights_reload,
    "miss: optimizer state reload": _optimizer_reload,
    "miss: trunk cut mid-run": _trunk_cut,
    "miss: trunk cut from step 1": _trunk_cut_step1,
    "miss: trunk cut at a resume": _trunk_cut_resume,
    "miss: resume without optimizer state": _resume_fresh_optimizer,

}


def run(case: Callable[[bool, int], Setup], bug: bool, seed: int,
        profiles: list[dict[str, Any]] | None = None,
        want_profile: bool = False) -> list[tuple[int, str]] | dict[str, Any]:
    """One loop of `case`; the (step, rule) of every alert (or the guard's profile)."""
    torch.manual_seed(seed)
    setup = case(bug, seed)
    model = setup.model
    options = dict(setup.options)
    if setup.loader is not None:
        options["loaders"] = [setup.loader]
    if setup.start_step:
        options["start_step"] = setup.start_step
    if profiles:
        options["reference"] = profiles
    opt = setup.optimizer or torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = watch(model, opt, **options)
    g = torch.Generator().manual_seed(seed)
    batches = iter(setup.loader) if setup.loader is not None else None
    if setup.evaluate_first:
        model.eval()
        with torch.no_grad():
            model(torch.randn(32, 16, generator=g))
    for step in range(setup.start_step + 1, setup.start_step + STEPS + 1):
        setup.hook(step)
        model.train()
        x, y = next(batches) if batches is not None else setup.batch(g)
        if setup.zero_grad:
            opt.zero_grad()
        if setup.backward(step):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=setup.autocast):
                loss = setup.loss(model, x, y)
            loss.backward()
            if setup.clip is not None:
                setup.clip(model)
            guard.record(loss=loss.item(), batch=(x, y))
        opt.step()
        if step % 10 == 0:
            model.eval()
            with torch.no_grad():
                setup.evaluate(model, x)
    guard.close()
    if want_profile:
        return guard.profile()
    return [(a.step, a.rule) for a in guard.alerts]


def measure(case: Callable[[bool, int], Setup], seeds: range) -> dict[str, Any]:
    """Caught / false alarms / latency of `case` over `seeds`."""
    refs = case(False, 0).references
    profiles = None
    if refs:  # clean reference runs on other seeds, built once
        profiles = [run(case, False, 1000 + k, want_profile=True) for k in range(refs)]
    hits = [run(case, True, s, profiles) for s in seeds]
    clean = [run(case, False, s, profiles) for s in seeds]
    onset = case(True, 0).onset
    lat = [h[0][0] - onset for h in hits if h]
    return {"caught": sum(bool(h) for h in hits), "rules": sorted({h[0][1] for h in hits if h}),
            "latency": max(lat) if lat else None, "false": sum(bool(c) for c in clean),
            "false_rules": sorted({r for c in clean for _, r in c}), "n": len(seeds)}


def main() -> None:
    logging.getLogger("labcoat.torch.guard").setLevel(logging.CRITICAL + 1)  # counted, not printed
    parser = bench.parser(__doc__)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--no-dist", action="store_true", help="skip the distributed ids")
    # --quick: one seed, pytorch-51800; the distributed ids are
    # traincheck_dist.py --quick's
    args = bench.shrink(parser.parse_args(), seeds=1, no_dist=True, only="pytorch-5")
    seeds = range(args.seeds)
    print(f"{'id':46} {'caught':>7} {'rule':36} {'latency':>8} {'false alarms':>13}")
    rows = []
    for name, case in CASES.items():
        if args.only not in name:
            continue
        m = measure(case, seeds)
        rows.append((name, m["caught"], m["false"]))
        _row(name, m["caught"], len(seeds), m["rules"], m["latency"], m["false"],
             m["false_rules"])
    if not (args.no_dist or args.only):
        import traincheck_dist  # beside this file (sys.path[0] when run as a script)

        for r in traincheck_dist.run(args.seeds):
            rows.append((r["id"], r["caught"], r["false_alarms"]))
            _row(r["id"], r["caught"], r["seeds"], r["rules"], r["latency"],
                 r["false_alarms"], r["clean_rules"])
    every = sum(c == len(seeds) for _, c, _ in rows)
    quiet = sum(f == 0 for _, _, f in rows)
    print(f"caught in every seed: {every}/{len(rows)} cases; no false alarm on the clean "
          f"twin in any seed: {quiet}/{len(rows)}")
    bench.save(args, {"seeds": args.seeds, "rows": rows})


def _row(name: str, caught: int, n: int, rules: list[str], latency: int | None, false: int,
         false_rules: list[str]) -> None:
    extra = f"  ({','.join(false_rules)})" if false else ""
    print(f"{name:46} {caught:>3}/{n:<3} {','.join(rules) or '-':36} "
          f"{(latency if latency is not None else '-')!s:>8} {false:>6}/{n}{extra}", flush=True)


if __name__ == "__main__":
    main()
