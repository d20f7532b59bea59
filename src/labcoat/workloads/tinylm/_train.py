"""Configuration, training loop and exact-match evaluation of tinylm.

Evaluation runs through `labcoat.evals`: an `EvalEngine` scores the eval set
(batched, length-bucketed, teacher-forced exact match) and `InTrainingEval`
evaluates a fixed stratified subset every `eval_every` steps, sized to fit
`eval_budget` of the training time, and the full set at the last step.

Three independent RNG streams, each derived from ``seed`` unless given:
- init: a dedicated ``torch.Generator`` draws the initial weights;
- data: a ``random.Random`` orders the training examples (see ``_tasks``);
- dropout: torch's global RNG, seeded right before the first step, inside
  ``torch.random.fork_rng`` so the caller's RNG state is left untouched.
Changing one seed changes only its stream. With deterministic algorithms on
and a fixed thread count, a run is bit-for-bit reproducible on CPU.

Resuming (``train(..., checkpointer=...)``) keeps that promise across a
kill: checkpoints hold the weights, AdamW's moments, the data RNG, the
dropout RNG and the results so far. The init generator is not saved: it is
used up before the first step, and the weights it drew are in the checkpoint.

The silent-error guard (``train(..., guard=True)``, see `labcoat.torch.watch`)
watches the loop with tinylm's facts declared (`guard_options`): the lr
schedule, a causal model, next-token-shifted labels, the padding id, the eval
items and the loss for recomputation. It never changes what is computed: a
guarded run is bit-identical to an unguarded one. ``fault=`` switches on a
silent bug at a chosen step (see `_faults`).

Started by torchrun with N ranks (WORLD_SIZE > 1), ``train`` trains
data-parallel: DistributedDataParallel over gloo, each rank on its shard of
the same global batch, rank 0 saving checkpoints that every rank restores
(see `_distributed`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from labcoat.errors import LabcoatError
from labcoat.evals import EvalEngine, EvalResult, InTrainingEval, load_subset_file
from labcoat.sdk import Run
from labcoat.torch import Alert, Checkpointer, Guard, GuardConfig, time_phases, watch
from labcoat.workloads.tinylm._distributed import Group, data_parallel
from labcoat.workloads.tinylm._faults import Fault, Injector, check_dropout
from labcoat.workloads.tinylm._model import TinyLM
from labcoat.workloads.tinylm._mup import apply_mup_init, mup_model_options, mup_param_groups
from labcoat.workloads.tinylm._suite import TOKENIZER, eval_suite
from labcoat.workloads.tinylm._tasks import (
    EOS_ID,
    IGNORE,
    MAX_LEN,
    PAD_ID,
    TASKS,
    VOCAB,
    EvalSet,
    Example,
    TrainStream,
    derive_seed,
    encode,
    make_eval_set,
)

Stream = Literal["init", "data", "dropout"]


@dataclass(kw_only=True)
class Config:
    """Every setting of a tinylm run; the defaults are the labcoat demo's settings.

    The defaults make one run take about 45 s on one CPU thread (two runs side
    by side on two cores), and use a learning rate high enough (2e-2 with
    AdamW) that training without warmup is clearly hurt: over seeds 0-5,
    warmup 0 reached macro exact match 0.33-0.36 and warmup 500 reached
    0.56-0.59. Shorter warmup is not enough: 100 steps helped no seed of
    three, 200 one of three, 300 five of six.
    """

    # model
    width: int = 64  # residual stream width C
    depth: int = 2  # number of transformer blocks
    heads: int = 4  # attention heads; must divide width
    dropout: float = 0.0  # on embeddings, attention weights and residual branches
    tie_embeddings: bool = True  # the output head shares the token embedding matrix
    parametrization: Literal["standard", "mup"] = "standard"  # "mup": see _mup (TP5, Table 8)
    mup_base_width: int = 64  # muP: the width at which it equals the standard parametrization
    # optimization
    steps: int = 3000  # optimizer steps
    batch_size: int = 64  # examples per step
    # micro-batches per step: the batch is split in this many parts, each backward adds its
    # share of the loss (1: one forward and backward per step, as before)
    accumulation: int = 1
    seq_len: int = MAX_LEN  # training rows are cut to this many tokens (evaluation is not)
    lr: float = 2e-2  # peak learning rate (AdamW)
    warmup: int = 0  # linear warmup steps from 0 to lr
    schedule: Literal["constant", "cosine"] = "cosine"  # after warmup: hold lr, or cosine decay
    min_lr_ratio: float = 0.1  # the cosine floor, as a fraction of lr
    weight_decay: float = 0.1  # AdamW decoupled decay, on matrices only
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW (PyTorch defaults)
    grad_clip: float = 0.0  # max global gradient norm; 0 disables clipping
    # evaluation
    eval_every: int = 300  # evaluate every k steps and always at the last; 0: last only
    eval_items: int = 100  # held-out items per task
    # In-training evals score a fixed stratified subset sized to take at most this fraction of
    # training time (measured in the run); 0: the whole eval set every time. The last step
    # always scores the whole set. A budget makes the subset size depend on measured speed:
    # use 0 when two runs' in-training curves must be bit-identical.
    eval_budget: float = 0.05
    # A `labcoat evals subset --out` file: in-training evals score exactly these items (chosen to
    # keep the full set's ranking) instead of a budget-sized subset. None: the budget decides.
    eval_subset: str | None = None
    tasks: tuple[str, ...] = tuple(TASKS)  # the task mixture (uniform) and eval tasks
    # execution and randomness
    threads: int | None = None  # torch.set_num_threads; None keeps torch's (OMP_NUM_THREADS)
    seed: int = 0  # master seed; each stream below derives from it unless set
    init_seed: int | None = None  # weight initialization
    data_seed: int | None = None  # order and content of training examples
    dropout_seed: int | None = None  # dropout masks

    def __post_init__(self) -> None:
        self.tasks = tuple(self.tasks)
        self.betas = (float(self.betas[0]), float(self.betas[1]))
        problems = list(self._problems())
        if problems:
            raise LabcoatError("invalid tinylm config: " + "; ".join(problems))

    def _problems(self) -> Iterator[str]:
        for name in ("width", "depth", "heads", "steps", "batch_size", "eval_items"):
            if getattr(self, name) < 1:
                yield f"{name}={getattr(self, name)} must be >= 1"
        if self.accumulation < 1 or self.batch_size % max(self.accumulation, 1):
            yield (f"accumulation={self.accumulation} must be >= 1 and divide "
                   f"batch_size={self.batch_size}")
        if not 2 <= self.seq_len <= MAX_LEN:
            yield f"seq_len={self.seq_len} must be between 2 and {MAX_LEN}"
        if self.width % max(self.heads, 1):
            yield f"width={self.width} must be divisible by heads={self.heads}"
        if not 0 <= self.warmup <= self.steps:
            yield f"warmup={self.warmup} must be between 0 and steps={self.steps}"
        if not 0 <= self.eval_budget < 1:
            yield (f"eval_budget={self.eval_budget} must be a fraction of training time in "
                   "[0, 1), e.g. 0.05 (0: the whole eval set at every evaluation)")
        if self.eval_every < 0:
            yield f"eval_every={self.eval_every} must be >= 0 (0: evaluate at the last step only)"
        if not self.lr > 0:
            yield f"lr={self.lr} must be > 0"
        if not 0 <= self.dropout < 1:
            yield f"dropout={self.dropout} must be in [0, 1)"
        if self.weight_decay < 0 or self.grad_clip < 0:
            yield "weight_decay and grad_clip must be >= 0"
        if not 0 <= self.min_lr_ratio <= 1:
            yield f"min_lr_ratio={self.min_lr_ratio} must be in [0, 1]"
        if self.parametrization not in ("standard", "mup"):
            yield (f"parametrization={self.parametrization!r}; choose between 'standard' and "
                   "'mup'")
        if self.mup_base_width < 1 or self.mup_base_width % max(self.heads, 1):
            yield (f"mup_base_width={self.mup_base_width} must be >= 1 and divisible by "
                   f"heads={self.heads}")
        if self.schedule not in ("constant", "cosine"):
            yield f"schedule={self.schedule!r}; choose between 'constant' and 'cosine'"
        if self.threads is not None and self.threads < 1:
            yield f"threads={self.threads} must be >= 1"
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown or not self.tasks:
            yield f"unknown tasks {unknown or list(self.tasks)}; choose from {', '.join(TASKS)}"

    def seed_for(self, stream: Stream) -> int:
        """The seed of one RNG stream: the explicit one if set, else derived from `seed`."""
        explicit = {"init": self.init_seed, "data": self.data_seed,
                    "dropout": self.dropout_seed}[stream]
        return derive_seed("tinylm", self.seed, stream) if explicit is None else explicit

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings, with the resolved stream seeds (for the journal's params)."""
        out = dataclasses.asdict(self)
        out["tasks"] = list(self.tasks)
        out["betas"] = list(self.betas)
        out.update({f"{s}_seed": self.seed_for(s) for s in ("init", "data", "dropout")})
        return out


@dataclass
class TrainResult:
    """What `train` returns.

    accuracy: final exact match per task, in [0, 1].
    exact_match: macro mean of `accuracy` over tasks.
    scores: final per-item 0/1 scores, ``scores[task]`` aligned with ``item_ids[task]``.
    losses: (steps,) training loss at every step.
    history: step -> macro exact match, at every evaluation (before the last step on the
        fixed eval subset; see `Config.eval_budget`).
    alerts: what the guard reported (empty without a guard).
    profile: the guard's learned profile of this run (None without a guard).
    phases: (step, {phase: seconds}) of the last steps (`labcoat.torch.time_phases`).
    """

    config: Config
    model: TinyLM
    accuracy: dict[str, float]
    exact_match: float
    scores: dict[str, list[float]]
    item_ids: dict[str, list[str]]
    losses: list[float]
    history: dict[int, float]
    seconds: float
    alerts: list[Alert] = field(default_factory=list)
    profile: dict[str, Any] | None = None
    phases: list[tuple[int, dict[str, float]]] = field(default_factory=list)


def learning_rate(step: int, cfg: Config) -> float:
    """LR for optimizer step `step` (1-based).

    Linear warmup reaches `lr` at step `warmup` (the first step already moves,
    at lr/warmup); then `constant` holds it and `cosine` decays it to
    ``min_lr_ratio * lr`` at the last step (Loshchilov & Hutter 2017).
    """
    if step <= cfg.warmup:
        return cfg.lr * step / cfg.warmup
    if cfg.schedule == "constant":
        return cfg.lr
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    floor = cfg.min_lr_ratio * cfg.lr
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def build_model(cfg: Config) -> TinyLM:
    """The initialized model; draws only from the init stream."""
    mup = cfg.parametrization == "mup"
    options = mup_model_options(cfg.width, cfg.heads, cfg.mup_base_width) if mup else {}
    with torch.random.fork_rng(devices=[]):  # module constructors draw from the global RNG
        model = TinyLM(vocab_size=len(VOCAB), max_len=MAX_LEN, width=cfg.width, depth=cfg.depth,
                       heads=cfg.heads, dropout=cfg.dropout, tie_embeddings=cfg.tie_embeddings,
                       **options)
    model.init_weights(torch.Generator().manual_seed(cfg.seed_for("init")))
    if mup:
        apply_mup_init(model, cfg.mup_base_width)
    return model


def build_optimizer(model: TinyLM, cfg: Config) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (incl. embeddings) only, as in nanoGPT.

    Under muP, hidden matrices get lr / width_mult (see `_mup.mup_param_groups`);
    each group's ``lr_scale`` is applied to the scheduled lr at every step.
    """
    if cfg.parametrization == "mup":
        return torch.optim.AdamW(mup_param_groups(model, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                                  base_width=cfg.mup_base_width),
                                 lr=cfg.lr, betas=cfg.betas)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


def masked_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over target positions only.

    logits: (B, T, V); labels: (B, T) with IGNORE at prompt and padding positions.
    """
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)


def guard_options(cfg: Config) -> dict[str, Any]:
    """What tinylm declares to the guard: its lr schedule, causality, label shift, padding."""
    return {
        "lr_schedule": functools.partial(learning_rate, cfg=cfg),
        "causal": True,
        "labels_shifted": True,
        "pad_id": PAD_ID,
        "ignore_index": IGNORE,
        "loss_fn": _batch_loss,
    }


def _batch_loss(model: TinyLM, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    inputs, labels = batch
    return masked_loss(model(inputs), labels)


def eval_rows(eval_set: EvalSet) -> list[list[int]]:
    """Every eval item as the model input row it would be in training (``tokens[:-1]``)."""
    return [encode(ex.tokens)[:-1] for xs in eval_set.items.values() for ex in xs]


@torch.no_grad()
def greedy_decode(model: TinyLM, prompts: list[list[int]], new_tokens: int) -> torch.Tensor:
    """Greedily continue every prompt by `new_tokens` tokens, all prompts at once.

    Prompts are right-padded into one (N, L) buffer and each row writes its
    next token at its own length, so padding never precedes a real token and
    causal attention never looks at it. The full forward is recomputed per
    generated token, which is cheap at this size and needs no KV cache.
    prompts: N lists of token ids. Returns (N, new_tokens) generated ids.
    """
    n = len(prompts)
    lengths = torch.tensor([len(p) for p in prompts])
    longest = int(lengths.max())
    buf = torch.tensor([p + [PAD_ID] * (longest + new_tokens - len(p)) for p in prompts])
    rows = torch.arange(n)
    for step in range(new_tokens):
        logits = model(buf[:, : longest + step])  # (N, longest + step, V)
        buf[rows, lengths + step] = logits[rows, lengths + step - 1].argmax(-1)
    return buf.gather(1, lengths[:, None] + torch.arange(new_tokens))


def exact_match(generated: torch.Tensor, answers: list[list[int]]) -> torch.Tensor:
    """1.0 where the generation starts with the whole answer (its EOS included), else 0.0.

    generated: (N, K) token ids; answers: N lists of at most K ids.
    Tokens after an answer's end are not judged. Returns (N,) float.
    """
    expected = torch.tensor([a + [PAD_ID] * (generated.shape[1] - len(a)) for a in answers])
    judged = torch.tensor([[True] * len(a) + [False] * (generated.shape[1] - len(a))
                           for a in answers])
    return ((generated == expected) | ~judged).all(dim=1).float()


def score_examples(model: TinyLM, examples: list[Example]) -> torch.Tensor:
    """Exact match of the greedy answer to ``target + EOS`` for each example: (N,) of 0/1."""
    answers = [encode(ex.target) + [EOS_ID] for ex in examples]
    generated = greedy_decode(model, [encode(ex.prompt) for ex in examples],
                              max(map(len, answers)))
    return exact_match(generated, answers)


def evaluate(model: TinyLM, eval_set: EvalSet, *, modes: str = "normal"
             ) -> dict[str, torch.Tensor]:
    """Per-task exact-match scores: task -> (items,) of 0.0/1.0, in eval_set order.

    modes: "normal" (eval mode, then the previous mode back); the faults
    "no_eval" (model.eval() forgotten) and "stuck" (left in eval mode).
    """
    engine = EvalEngine(model, TOKENIZER, eval_suite(eval_set))
    return _scores_by_task(engine.score(eval_mode=_eval_mode(model, modes)))


def _eval_mode(model: TinyLM, modes: str) -> bool:
    """Whether the engine switches to eval mode and back; a fault may break either half."""
    if modes == "stuck":
        model.eval()  # and nothing puts it back in training mode
    return modes == "normal"


def _scores_by_task(result: EvalResult) -> dict[str, torch.Tensor]:
    return {task: torch.as_tensor(s, dtype=torch.float32)
            for task, s in result.per_task().items()}


@contextlib.contextmanager
def _torch_settings(cfg: Config) -> Iterator[None]:
    """Deterministic kernels, the requested thread count and flushed denormals, then restored.

    Flushing matters: runs hurt by the high learning rate produce denormal
    floats, which x86 CPUs process many times slower; without flushing the
    no-warmup arm of the demo took 66-89 s per run instead of about 40 s.
    """
    deterministic = torch.are_deterministic_algorithms_enabled()
    threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)  # torch's default; torch offers no getter to restore from
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)


def train(cfg: Config, run: Run | None = None, *,
          echo: Callable[[str], None] | None = None,
          checkpointer: Checkpointer | None = None,
          guard: bool | Mapping[str, Any] | GuardConfig = False,
          fault: Fault | None = None,
          phases: bool = True) -> TrainResult:
    """Train a TinyLM on the task mixture and evaluate it on the fixed held-out set.

    run: where to report (None: no logging). Logged per step: ``loss``,
        ``lr``; at step 1 also ``params`` (the parameter count); at every eval
        (each `eval_every` steps on the fixed eval subset, and the last step on
        every item): ``exact_match`` (macro mean),
        ``exact_match/<task>``, ``eval/items`` and per-item scores via
        ``run.log_items``; the ``eval.subset`` and ``eval.budget`` events (see
        `labcoat.evals.InTrainingEval`). Steps count optimizer updates, 1..steps.
    echo: called with a short progress line about every 10% of training.
    checkpointer: if given (unused, not yet restored), training resumes from
        its newest verified checkpoint and saves when it says so. It tracks
        the model, the optimizer, the data stream's RNG and position, the
        dropout RNG (torch's global one) and the losses and evals so far, so a
        run killed at any moment and resumed ends bit-identical to an
        uninterrupted one and logs the same values at every step (on CPU).
        The caller closes it (it waits for the last background write).
    guard: watch the run with `labcoat.torch.watch` (alerts to `run`): True for
        tinylm's declared facts (`guard_options`), a mapping of guard options to
        add or override, or a complete GuardConfig. The guard is closed at the
        end (its profile logged); with ``stop_on`` it may raise GuardStop.
    fault: a silent bug to switch on (see `_faults`), for testing the guard.
    phases: time every step by phase (`labcoat.torch.time_phases`: data, forward,
        backward, optimizer, comm, eval, checkpoint), one ``phases`` record per step
        in `run`'s journal and in the result's ``phases``.
    """
    started = time.perf_counter()
    check_dropout(fault, cfg.dropout)
    eval_set = make_eval_set(cfg.eval_items, cfg.tasks)
    stream = TrainStream(cfg.seed_for("data"), eval_set.held_out(), cfg.tasks)
    with (_torch_settings(cfg), torch.random.fork_rng(devices=[]), _global_rngs_kept(),
          data_parallel(cfg.batch_size) as dp):
        model = build_model(cfg)
        optimizer = build_optimizer(model, cfg)
        n_params = sum(p.numel() for p in model.parameters())
        torch.manual_seed(cfg.seed_for("dropout"))  # dropout is the only global-RNG consumer
        # Everything train() returns besides the model, so a resumed run returns it whole.
        progress: dict[str, Any] = {"losses": [], "history": {}}
        first = 1
        if checkpointer is not None:
            checkpointer.track(model=model, optimizer=optimizer, data_rng=stream._rng,
                               data_position=_StreamPosition(stream), progress=progress)
            first = checkpointer.restore() + 1  # also restores the dropout RNG
        dp.same_step(first - 1)
        dp.wrap(model)  # DDP when torchrun started several ranks
        losses: list[float] = progress["losses"]
        history: dict[int, float] = progress["history"]
        scores: dict[str, torch.Tensor] = {}
        report_every = max(1, cfg.steps // 10)
        model.train()
        faults = Injector(fault, model, optimizer, eval_set, stream, len(VOCAB),
                          accumulation=cfg.accumulation)
        watcher = _watch(guard, cfg, model, optimizer, run, eval_set, start_step=first - 1)
        timer = (time_phases(dp.net(model), optimizer, run=run, start_step=first - 1)
                 if phases else None)
        phase = timer.phase if timer is not None else _no_phase
        batches = _batches(stream, cfg, faults, dp, first)
        batches = timer.loader(batches) if timer is not None else batches
        evaluator = InTrainingEval(
            EvalEngine(model, TOKENIZER, eval_suite(eval_set)), run, every=cfg.eval_every,
            total_steps=cfg.steps, budget=cfg.eval_budget, start_step=first - 1,
            subset_size=progress.get("eval_subset"),  # a resumed run keeps its subset
            subset_items=load_subset_file(cfg.eval_subset) if cfg.eval_subset else None)
        try:
            for step in range(first, cfg.steps + 1):
                lr = learning_rate(step, cfg)
                loss, work = _train_step(model, optimizer, batches, cfg, lr, step, faults,
                                          watcher, dp=dp, phase=phase)
                losses.append(loss)
                if run is not None:
                    # the parameter count once, at step 1 (shrink's cost ratio reads it)
                    size = {"params": float(n_params)} if step == 1 else {}
                    run.log(step, loss=loss, lr=lr, **size)
                    run.log_work(step, work)
                if evaluator.due(step):
                    with phase("eval"):
                        result = evaluator.after_step(
                            step, eval_mode=_eval_mode(model, faults.evaluation_mode(step)))
                    progress["eval_subset"] = evaluator.subset_size
                    history[step] = result.macro
                    scores = _scores_by_task(result) if step == cfg.steps else scores
                if echo is not None and (step % report_every == 0 or step == cfg.steps):
                    em = f" exact_match {history[step]:.3f}" if step in history else ""
                    echo(f"step {step}/{cfg.steps} loss {loss:.4f} lr {lr:.2e}{em} "
                         f"({time.perf_counter() - started:.1f}s)")
                if (checkpointer is not None and checkpointer.should_save(step)
                        and dp.rank == 0):  # rank 0 saves, every rank restores
                    with phase("checkpoint"):
                        checkpointer.save(step)
            if not scores:  # resumed from a checkpoint of the last step: evaluate it again
                result = evaluator.after_step(cfg.steps)
                scores = _scores_by_task(result)
                history[cfg.steps] = result.macro
        finally:
            if timer is not None:
                timer.close()
            if watcher is not None:
                watcher.close()
    accuracy = {task: s.sum().item() / len(s) for task, s in scores.items()}
    return TrainResult(
        config=cfg, model=model, accuracy=accuracy, exact_match=history[cfg.steps],
        scores={task: s.tolist() for task, s in scores.items()}, item_ids=eval_set.ids,
        losses=losses, history=history, seconds=time.perf_counter() - started,
        alerts=list(watcher.alerts) if watcher else [],
        profile=watcher.profile() if watcher and watcher.learns and watcher.steps_seen else None,
        phases=list(timer.records) if timer is not None else [],
    )


def _watch(guard: bool | Mapping[str, Any] | GuardConfig, cfg: Config, model: TinyLM,
           optimizer: torch.optim.Optimizer, run: Run | None, eval_set: EvalSet, *,
           start_step: int) -> Guard | None:
    """The guard for this run (None if off), with the eval items registered."""
    if guard is False or guard is None:
        return None
    if isinstance(guard, GuardConfig):
        watcher = watch(model, optimizer, run=run, config=guard)
    else:
        options = guard_options(cfg) | {"start_step": start_step}
        options.update(guard if isinstance(guard, Mapping) else {})
        watcher = watch(model, optimizer, run=run, **options)
    if watcher.enabled("data.eval_leak"):
        watcher.register_eval_items(eval_rows(eval_set))
    return watcher


class _StreamPosition:
    """A TrainStream's position, for the Checkpointer.

    The stream is a function of its RNG alone, so the RNG's state (tracked as
    ``data_rng``) is the position; the count of skipped eval items rides along.
    """

    def __init__(self, stream: TrainStream) -> None:
        self.stream = stream

    def state_dict(self) -> dict[str, int]:
        return {"skipped": self.stream.skipped}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.stream.skipped = int(state["skipped"])


@contextlib.contextmanager
def _global_rngs_kept() -> Iterator[None]:
    """Leave Python's and NumPy's global RNGs as they were (restoring a checkpoint sets them)."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def _batches(stream: TrainStream, cfg: Config, faults: Injector, dp: Group,
             first: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """This rank's batch of each step from `first` on (the phase timer times its next())."""
    for step in itertools.count(first):
        yield dp.shard(*faults.batch(step, *stream.batch(cfg.batch_size)))


@contextlib.contextmanager
def _no_phase(name: str) -> Iterator[None]:
    yield


def _train_step(model: TinyLM, optimizer: torch.optim.Optimizer,
                batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
                cfg: Config, lr: float, step: int, faults: Injector,
                guard: Guard | None, *, dp: Group,
                phase: Callable[[str], contextlib.AbstractContextManager[None]] = _no_phase,
                ) -> tuple[float, float]:
    """One optimizer update at learning rate `lr`; returns the batch loss (the mean over
    ranks) and this rank's own work time (data and forward, before any gradient sync).

    `faults` hooks in at fixed points (they do nothing without a fault); the
    guard gets the batch after the forward (before the update, so it can
    recompute the step) and the loss after the update. Under DDP the forward goes
    through the group's wrapper (never held in a local: see `Group.unwrap`) on this
    rank's shard of the batch.
    """
    started = time.perf_counter()
    inputs, labels = next(batches)
    if inputs.shape[1] > cfg.seq_len:
        inputs, labels = inputs[:, :cfg.seq_len], labels[:, :cfg.seq_len]
    if faults.sets_lr(step):
        for g, group in enumerate(optimizer.param_groups):  # muP: per-group multipliers
            group["lr"] = lr * group.get("lr_scale", 1.0) * faults.lr_factor(step, g)
    faults.before_forward(step)
    if cfg.accumulation > 1:
        loss, work = _accumulate(model, optimizer, inputs, labels, cfg.accumulation, step,
                                 faults, guard, dp=dp)
        work = time.perf_counter() - started - work
    else:
        loss = masked_loss(dp.net(model)(inputs), labels)
        work = time.perf_counter() - started
        if guard is not None:
            guard.record(batch=(inputs, labels))
        if faults.zeroes_grad(step):
            optimizer.zero_grad(set_to_none=True)
        scale = faults.loss_scale(step)
        (loss * scale if scale != 1 else loss).backward()
    if cfg.grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    faults.after_backward(step)
    if faults.steps_optimizer(step):
        optimizer.step()
        faults.after_step(step)
    with phase("comm") if dp.distributed else contextlib.nullcontext():  # ranks wait here
        value = dp.mean(loss.item())
    if guard is not None:
        guard.record(loss=value)
    return value, work


def _accumulate(model: TinyLM, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
                labels: torch.Tensor, parts: int, step: int, faults: Injector,
                guard: Guard | None, *, dp: Group) -> tuple[torch.Tensor, float]:
    """Forward and backward over `parts` micro-batches, each adding loss/parts to the
    gradients; returns the summed loss and the seconds spent in backward (not work).

    The loss is the mean of the micro-batches' masked means (equal to the batch's masked
    mean only when every micro-batch has as many target tokens).
    """
    if faults.zeroes_grad(step):
        optimizer.zero_grad(set_to_none=True)
    scale = faults.loss_scale(step)
    total = torch.zeros(())
    backward = 0.0
    for x, y in zip(inputs.chunk(parts), labels.chunk(parts), strict=True):
        loss = masked_loss(dp.net(model)(x), y) / parts
        if guard is not None:
            guard.record(batch=(x, y))
        started = time.perf_counter()
        (loss * scale if scale != 1 else loss).backward()
        backward += time.perf_counter() - started
        total = total + loss.detach()
    return total, backward
