"""Hugging Face ``Trainer`` callback: labcoat's run, guard and verified resume in one line.

    from labcoat.integrations.transformers import LabcoatCallback

    trainer = Trainer(model=model, args=args, train_dataset=train,
                      callbacks=[LabcoatCallback()])
    trainer.train()

That is the whole adoption, under ``labcoat run`` and ad hoc. The callback

- **records the run**: ``labcoat.init()`` when the Trainer is built (the
  runner's identity, params and seed in a trial; an ad-hoc run named after the
  script elsewhere, with ``args.seed`` and the main TrainingArguments as params);
- **follows the trial's seed**: in a trial, ``args.seed`` becomes the trial's
  seed and the global RNGs are seeded again with it, exactly as ``Trainer``
  seeds them in its ``__init__`` (``set_seed``, or ``enable_full_determinism``
  with ``args.full_determinism``), so data order and dropout follow the trial.
  A model built *before* the Trainer was initialized under whatever seed the
  script set: seed it with the trial's seed first (``transformers.set_seed(
  callback.run.seed)``), or pass ``model_init=`` so Trainer builds it after
  seeding with ``args.seed``;
- **journals every log** at ``state.global_step``: the journal holds exactly
  what ``state.log_history`` holds, point for point (its numeric entries);
- **guards** the Trainer's model and optimizer (``labcoat.torch.watch``): alerts
  are journaled; ``stop_on="critical"`` (or "error", "warning") ends training
  at the end of that step through ``control.should_training_stop``, and
  ``trainer.train()`` then raises `labcoat.torch.GuardStop`;
- **records per-item eval results** when given ``eval_items=f``, where
  ``f(EvalPrediction) -> (task, item_ids, scores)`` (or a list of such triples):
  each evaluation's results go to ``run.log_items`` at ``state.global_step``;
- **verifies checkpoints**: each checkpoint Trainer saves is sealed after
  ``on_save`` (every file fsynced and hashed, a manifest written last; see
  `labcoat.torch.seal_directory`); in a trial the checkpoints go to the trial's
  checkpoint directory (``args.output_dir`` is set to ``$LABCOAT_CHECKPOINT_DIR``,
  shared by the trial's attempts);
- **resumes** from the newest checkpoint that verifies: ``trainer.train()``
  defaults ``resume_from_checkpoint`` to it (``True`` means it too), after
  skipping and removing newer ones that a crash cut short or that changed since.
  An explicit path is used as given.

How it reaches the Trainer: a callback is only handed the arguments, state and
model, so when the Trainer's ``__init__`` calls ``on_init_end`` the callback
finds that Trainer on the call stack and wraps two of its attributes, on that
instance only: ``train`` (the resume default) and, with ``eval_items``,
``compute_metrics``. A callback added later (``trainer.add_callback``) misses
``on_init_end`` and refuses to train; pass it to ``Trainer(callbacks=[...])``.

Keep ``save_total_limit`` at 2 or more (or None): Trainer deletes older
checkpoints right after writing a new one, before it is sealed, so with 1 a
crash in between leaves nothing verified to resume from.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import EvalPrediction, enable_full_determinism, set_seed

from labcoat.errors import LabcoatError
from labcoat.integrations import _common
from labcoat.sdk import Run
from labcoat.torch import Guard, GuardStop

__all__ = ["LabcoatCallback"]

SOURCE = "transformers.Trainer"
CHECKPOINT = re.compile(r"checkpoint-(\d+)")  # Trainer's PREFIX_CHECKPOINT_DIR-<global_step>
# TrainingArguments recorded as an ad-hoc run's params
PARAMS = ("learning_rate", "weight_decay", "per_device_train_batch_size",
          "gradient_accumulation_steps", "max_steps", "num_train_epochs", "warmup_steps",
          "lr_scheduler_type", "optim", "max_grad_norm", "seed")

EvalItems = Callable[[EvalPrediction], Any]


class LabcoatCallback(TrainerCallback):
    """labcoat for a Hugging Face ``Trainer``; see the module doc.

    run: the labcoat run to record to (default: ``labcoat.init()`` when the Trainer is built).
    guard: True (the default checks), False, or a dict of ``labcoat.torch.watch`` options.
    stop_on: end training at the first alert of this severity or worse (None: never).
    eval_items: ``f(EvalPrediction) -> (task, item_ids, scores)`` or a list of such triples.
    resume: resume ``trainer.train()`` from the newest verified checkpoint in output_dir.
    """

    def __init__(self, run: Run | None = None, *, guard: bool | Mapping[str, Any] = True,
                 stop_on: str | None = None, eval_items: EvalItems | None = None,
                 resume: bool = True) -> None:
        if eval_items is not None and not callable(eval_items):
            raise LabcoatError("LabcoatCallback(eval_items=...) must be a function "
                               "EvalPrediction -> (task, item_ids, scores)")
        self.run = run
        self.guard: Guard | None = None
        self.resumed_from: Path | None = None  # the checkpoint trainer.train() resumed from
        self._guard_options = _common.guard_options(guard)
        self._stop = _common.StopWatch(_common.check_stop_on(stop_on))
        self._eval_items = eval_items
        self._resume = resume
        self._trainer: Trainer | None = None
        self._hooks: list[Any] = []
        self._metrics = _common.MetricLog()
        self._loss: torch.Tensor | None = None
        self._batch: dict[str, Any] | None = None

    # --- Trainer events ----------------------------------------------------------------------

    def on_init_end(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, **kwargs: Any) -> None:
        trainer = _calling_trainer(self)
        self.run = _common.trial_run(self.run, seed=args.seed,
                                     params={k: getattr(args, k) for k in PARAMS})
        self._follow_seed(args)
        directory = _common.runner_checkpoint_dir()
        if directory is not None and Path(args.output_dir).absolute() != directory.absolute():
            self.run.event(_common.OUTPUT_REDIRECTED, f"Trainer checkpoints go to the trial's "
                           f"checkpoint directory {directory} (output_dir was {args.output_dir})",
                           before=str(args.output_dir), after=str(directory))
            args.output_dir = str(directory)
        if args.save_total_limit == 1:
            self.run.event("integration.warning", "save_total_limit=1 leaves no verified "
                           "checkpoint to fall back on if a crash hits between a save and its "
                           "seal; use 2 or more", level="warning")
        self._attach(trainer)

    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, model: Any = None, optimizer: Any = None,
                       **kwargs: Any) -> None:
        if self._trainer is None or self.run is None:
            raise LabcoatError(
                "LabcoatCallback was added after the Trainer was built (trainer.add_callback), "
                "so it cannot follow the trial's seed or resume; pass it to "
                "Trainer(callbacks=[LabcoatCallback()]) instead")
        if self._guard_options is not None and optimizer is not None:
            options = dict(self._guard_options)
            if _shifts_labels_itself(model):
                options.setdefault("labels_shifted", False)  # the loss shifts labels == inputs
            inner = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper
            self.guard, self._hooks = _common.start_guard(model, inner, self.run, options,
                                                          state.global_step)
            self._hooks.append(model.register_forward_hook(self._capture, with_kwargs=True))

    def on_step_end(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, **kwargs: Any) -> None:
        guard = self.guard
        if guard is None:
            return
        if self._loss is not None or self._batch is not None:
            guard.record(loss=self._loss, batch=self._batch)
            self._loss = self._batch = None
        if self._stop.stop_on is not None and self._stop.check(guard, self.run) is not None:
            control.should_training_stop = True

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.run is not None and args.should_log:
            self._metrics.log(self.run, state.global_step, logs or {})

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        if args.should_save and self.run is not None:
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            _common.seal(self.run, path, state.global_step, SOURCE)

    def on_train_end(self, args: TrainingArguments, state: TrainerState,
                     control: TrainerControl, **kwargs: Any) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        if self.guard is not None:
            self.guard.close()
        if self._stop.alert is not None:
            raise GuardStop(self._stop.alert)

    # --- helpers -------------------------------------------------------------------------------

    def resume_checkpoint(self, output_dir: str | Path) -> Path | None:
        """The newest verified checkpoint in `output_dir` (None: none), journaling the choice
        and removing newer unverified ones; what ``trainer.train()`` resumes from."""
        directory = Path(output_dir)
        found = _common.find_resume(directory, CHECKPOINT)
        if self.run is not None:
            _common.journal_resume(self.run, found, directory, SOURCE)
        return found.path

    def _follow_seed(self, args: TrainingArguments) -> None:
        seed = self.run.seed if self.run is not None else None
        if seed is None or seed == args.seed:
            return
        self.run.event(_common.SEED_FOLLOWED, f"args.seed={args.seed} replaced by the trial's "
                       f"seed {seed}; the global RNGs are seeded again with it",
                       before=args.seed, after=seed)
        args.seed = seed
        # what Trainer.__init__ did with the old seed, again with the trial's
        enable_full_determinism(seed) if args.full_determinism else set_seed(seed)

    def _attach(self, trainer: Trainer) -> None:
        """Wrap this Trainer's train (resume default) and compute_metrics (eval items)."""
        self._trainer = trainer
        train = trainer.train

        @functools.wraps(train)
        def train_with_resume(resume_from_checkpoint: Any = None, *args: Any,
                              **kwargs: Any) -> Any:
            if self._resume and resume_from_checkpoint in (None, True):
                found = self.resume_checkpoint(trainer.args.output_dir)
                if found is None and resume_from_checkpoint is True:
                    raise LabcoatError(f"trainer.train(resume_from_checkpoint=True): no verified "
                                       f"checkpoint in {trainer.args.output_dir}")
                resume_from_checkpoint = str(found) if found is not None else None
            self.resumed_from = (Path(resume_from_checkpoint)
                                 if isinstance(resume_from_checkpoint, str) else None)
            return train(resume_from_checkpoint, *args, **kwargs)

        trainer.train = train_with_resume  # type: ignore[method-assign]
        if self._eval_items is not None:
            trainer.compute_metrics = self._with_items(trainer, trainer.compute_metrics)

    def _with_items(self, trainer: Trainer,
                    compute_metrics: Callable[[EvalPrediction], dict[str, float]] | None,
                    ) -> Callable[[EvalPrediction], dict[str, float]]:
        fn = self._eval_items
        where = f"eval_items={getattr(fn, '__qualname__', fn)!r}"

        def compute_metrics_and_items(prediction: EvalPrediction) -> dict[str, float]:
            assert fn is not None and self.run is not None
            _common.log_items(self.run, trainer.state.global_step, fn(prediction), where)
            return compute_metrics(prediction) if compute_metrics is not None else {}

        return compute_metrics_and_items

    def _capture(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                 output: Any) -> None:
        """Keep the last training forward's batch and loss for guard.record (references only)."""
        if module.training and torch.is_grad_enabled():
            self._batch = kwargs if "input_ids" in kwargs else None
            loss = getattr(output, "loss", None)
            self._loss = loss.detach() if isinstance(loss, torch.Tensor) else None


def _calling_trainer(callback: LabcoatCallback) -> Trainer:
    """The Trainer whose __init__ is calling `callback.on_init_end` (found on the stack)."""
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer) and callback in getattr(
                getattr(candidate, "callback_handler", None), "callbacks", ()):
            return candidate
        frame = frame.f_back
    raise LabcoatError("LabcoatCallback.on_init_end was not called by a Trainer being built; "
                       "pass the callback to Trainer(callbacks=[LabcoatCallback()])")


def _shifts_labels_itself(model: Any) -> bool:
    """Hugging Face causal LM heads take labels == input_ids and shift inside the loss."""
    name = type(model).__name__
    return name.endswith(("ForCausalLM", "LMHeadModel"))
