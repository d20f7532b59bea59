"""Lightning callback: labcoat's run, guard and verified resume in one line.

    from labcoat.integrations.lightning import LabcoatCallback

    trainer = lightning.Trainer(max_steps=100, callbacks=[LabcoatCallback()])
    trainer.fit(module, train_loader, val_loader)

That is the whole adoption, under ``labcoat run`` and ad hoc. The callback

- **records the run**: ``labcoat.init()`` at ``setup`` (the runner's identity,
  params and seed in a trial; an ad-hoc run named after the script elsewhere).
  In a trial, seed with the trial's seed before building the module
  (``lightning.seed_everything(callback.run.seed)`` or the ``{seed}`` the design
  passes to the script);
- **journals every logged metric** through `LabcoatLogger`, a Lightning
  ``Logger`` it adds to ``trainer.loggers``: what ``self.log(...)`` sends to the
  loggers is journaled at the step Lightning gives them;
- **guards** the module and its optimizer (``labcoat.torch.watch``), with each
  training batch and loss given to ``guard.record``; alerts are journaled;
  ``stop_on="critical"`` (or "error", "warning") sets ``trainer.should_stop`` at
  the end of that batch, and ``trainer.fit`` then raises `labcoat.torch.GuardStop`.
  Lightning runs forward and backward *inside* ``optimizer.step(closure)``,
  after the optimizer's step pre-hooks (where the guard reads the gradients);
  the callback has the precision plugin run the closure first, then call
  ``optimizer.step`` with a closure returning its result: the same computation
  in the order the guard needs (not for LBFGS, which calls its closure several
  times: the guard is then off, with a warning event);
- **records per-item eval results** when given ``eval_items=f``, where
  ``f(outputs, batch) -> (task, item_ids, scores)`` is called on each
  validation batch (``outputs``: what ``validation_step`` returned); each
  validation's items go to ``run.log_items`` at ``trainer.global_step``
  (the sanity check's are not recorded);
- **verifies checkpoints**: every checkpoint ``trainer.save_checkpoint`` writes
  (``ModelCheckpoint`` included) is sealed beside it (``<file>.labcoat-manifest.json``:
  fsynced, SHA-256, written last; `labcoat.torch.seal_file`) once the batch that
  wrote it is fully recorded (at the next batch's start, or the end of training); in
  a trial the
  ``ModelCheckpoint`` callbacks write to the trial's checkpoint directory
  (``$LABCOAT_CHECKPOINT_DIR``, shared by its attempts);
- **resumes** ``trainer.fit(...)`` without ``ckpt_path`` from the newest
  checkpoint there that verifies, after skipping and removing newer ones a crash
  cut short or that changed since. It also saves the global RNG states (Python,
  NumPy, torch) in each checkpoint and restores them, which Lightning does not, so
  dropout and shuffling continue as they would have.

How it reaches Lightning: at ``setup`` it wraps, on this trainer only,
``trainer.save_checkpoint`` (to seal what it wrote, at the start of the next
batch: see `on_train_batch_start`), the checkpoint connector's
``resume_start`` (the ``ckpt_path`` default; Lightning 2.x's
``trainer._checkpoint_connector``) and the precision plugin's
``optimizer_step`` (the order above).
"""

from __future__ import annotations

import functools
import json
import os
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.loggers import Logger
from lightning.pytorch.plugins.precision import Precision
from lightning.pytorch.utilities import rank_zero_only

from labcoat.errors import LabcoatError
from labcoat.integrations import _common
from labcoat.sdk import Run
from labcoat.torch import Guard, GuardStop, file_manifest, seal_file, verify_file

__all__ = ["LabcoatCallback", "LabcoatLogger"]

SOURCE = "lightning.Trainer"
RNG_KEY = "labcoat_rng"  # where the callback keeps the global RNG states in a checkpoint

EvalItems = Callable[[Any, Any], Any]


class LabcoatLogger(Logger):
    """A Lightning ``Logger`` that journals every metric at the step Lightning gives it."""

    def __init__(self, run: Run) -> None:
        super().__init__()
        self.run = run
        self._metrics = _common.MetricLog()

    @property
    def name(self) -> str:
        return "labcoat"

    @property
    def version(self) -> str:
        return self.run.trial

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self._metrics.log(self.run, int(step or 0), metrics)

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass  # a trial's params are the design's (the runner's); an ad-hoc run's, init's


class LabcoatCallback(Callback):
    """labcoat for a Lightning ``Trainer``; see the module doc.

    run: the labcoat run to record to (default: ``labcoat.init()`` at setup).
    guard: True (the default checks), False, or a dict of ``labcoat.torch.watch`` options.
    stop_on: end training at the first alert of this severity or worse (None: never).
    eval_items: ``f(outputs, batch) -> (task, item_ids, scores)`` per validation batch.
    resume: ``trainer.fit`` without ckpt_path resumes from the newest verified checkpoint.
    """

    def __init__(self, run: Run | None = None, *, guard: bool | Mapping[str, Any] = True,
                 stop_on: str | None = None, eval_items: EvalItems | None = None,
                 resume: bool = True) -> None:
        if eval_items is not None and not callable(eval_items):
            raise LabcoatError("LabcoatCallback(eval_items=...) must be a function "
                               "(outputs, batch) -> (task, item_ids, scores)")
        self.run = run
        self.guard: Guard | None = None
        self.resumed_from: Path | None = None
        self._guard_options = _common.guard_options(guard)
        self._stop = _common.StopWatch(_common.check_stop_on(stop_on))
        self._eval_items = eval_items
        self._resume = resume
        self._hooks: list[Any] = []
        self._items: dict[str, tuple[list[Any], list[Any]]] = {}
        self._unsealed: list[tuple[Path, int]] = []  # written, sealed at the next batch
        self._trainer: pl.Trainer | None = None

    # --- Lightning hooks -----------------------------------------------------------------------

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit" or self._trainer is trainer:
            return
        self._trainer = trainer
        seed = os.environ.get("PL_GLOBAL_SEED")  # set by lightning.seed_everything
        self.run = _common.trial_run(self.run, seed=int(seed) if seed else None, params={})
        if seed and self.run.seed is not None and int(seed) != self.run.seed:
            self.run.event("integration.warning", f"lightning.seed_everything({seed}) but the "
                           f"trial's seed is {self.run.seed}: seed with the trial's seed (the "
                           "design's {seed}) so seeds differ between trials", level="warning")
        directory = _common.runner_checkpoint_dir()
        for callback in trainer.checkpoint_callbacks:
            if not isinstance(callback, ModelCheckpoint):
                continue
            if directory is not None:
                self.run.event(_common.OUTPUT_REDIRECTED, f"Lightning checkpoints go to the "
                               f"trial's checkpoint directory {directory}",
                               before=str(callback.dirpath), after=str(directory))
                callback.dirpath = str(directory)
            elif callback.dirpath is None and not trainer.loggers:
                # where Lightning puts them without a logger; LabcoatLogger (added below, and
                # first when alone) must not move them, or an ad-hoc rerun would not find them
                callback.dirpath = os.path.join(trainer.default_root_dir, "checkpoints")
        if not any(isinstance(lg, LabcoatLogger) for lg in trainer.loggers):
            trainer.loggers = [*trainer.loggers, LabcoatLogger(self.run)]
        self._wrap_save(trainer)
        if self._resume:
            self._wrap_resume(trainer)
        if self._guard_options is not None:
            self._wrap_optimizer_step(trainer)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._guard_options is None or self.run is None:
            return
        if len(trainer.optimizers) != 1 or isinstance(trainer.optimizers[0], torch.optim.LBFGS):
            self.run.event("integration.warning", "guard off: it watches one optimizer "
                           "stepped once per batch (found "
                           f"{[type(o).__name__ for o in trainer.optimizers]})", level="warning")
            return
        self.guard, self._hooks = _common.start_guard(
            pl_module, trainer.optimizers[0], self.run, dict(self._guard_options),
            trainer.global_step)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                             batch: Any, batch_idx: int) -> None:
        """Seal the checkpoints the previous batch wrote, now that its metrics are logged and
        its validation (if one was due at that step) is recorded: Lightning writes them in
        ``on_train_batch_end``, before both, and a resumed run starts after that batch, so
        a checkpoint sealed at once could let a kill lose that batch's metrics and that
        step's validation for good. Unsealed, the restart resumes from the checkpoint
        before and recomputes them."""
        if self._unsealed:
            self._seal_pending()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        guard = self.guard
        if guard is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        guard.record(loss=loss.detach() if isinstance(loss, torch.Tensor) else None,
                     batch=batch if isinstance(batch, Mapping | tuple | list | torch.Tensor)
                     else None)
        if self._stop.stop_on is not None and self._stop.check(guard, self.run) is not None:
            trainer.should_stop = True

    def on_validation_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                                outputs: Any, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        if self._eval_items is None or trainer.sanity_checking:
            return
        where = f"eval_items={getattr(self._eval_items, '__qualname__', self._eval_items)!r}"
        result = self._eval_items(outputs, batch)
        triples = [result] if isinstance(result, tuple) and len(result) == 3 else result
        for triple in triples:
            if not (isinstance(triple, tuple | list) and len(triple) == 3):
                raise LabcoatError(f"{where} returned {triple!r}; return (task, item_ids, "
                                   "scores) or a list of such triples")
            task, ids, scores = triple
            kept = self._items.setdefault(task, ([], []))
            kept[0].extend(_as_list(ids))
            kept[1].extend(_as_list(scores))

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        items, self._items = self._items, {}
        if items and self.run is not None and trainer.is_global_zero:
            where = f"eval_items={getattr(self._eval_items, '__qualname__', self._eval_items)!r}"
            _common.log_items(self.run, trainer.global_step,
                              [(task, ids, scores) for task, (ids, scores) in items.items()],
                              where)

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        # plain data and tensors only: Lightning loads checkpoints with weights_only=True
        checkpoint[RNG_KEY] = {"python": random.getstate(), "torch": torch.get_rng_state(),
                               "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos,
                                         has_gauss, gauss]}

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        self._rng = checkpoint.get(RNG_KEY)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._unsealed:
            self._seal_pending()
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        if self.guard is not None:
            self.guard.close()
        if self._stop.alert is not None:
            raise GuardStop(self._stop.alert)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        rng, self._rng = getattr(self, "_rng", None), None
        if rng is not None:  # restored here: after Lightning's own setup drew from the RNGs
            random.setstate(_python_state(rng["python"]))
            kind, keys, pos, has_gauss, gauss = rng["numpy"]
            np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
            torch.set_rng_state(rng["torch"])

    # --- helpers -------------------------------------------------------------------------------

    def resume_checkpoint(self, directory: str | Path) -> Path | None:
        """The newest verified checkpoint file in `directory` (None: none), journaling the
        choice and removing newer unverified ones; what ``trainer.fit`` resumes from."""
        found = _newest_verified(Path(directory))
        if self.run is not None:
            _common.journal_resume(self.run, found, Path(directory), SOURCE)
        return found.path

    def _wrap_save(self, trainer: pl.Trainer) -> None:
        save = trainer.save_checkpoint

        @functools.wraps(save)
        def save_and_seal(filepath: Any, *args: Any, **kwargs: Any) -> None:
            save(filepath, *args, **kwargs)
            if trainer.is_global_zero and self.run is not None:
                self._unsealed.append((Path(filepath), trainer.global_step))
                if not trainer.training:  # a save outside the training loop: nothing follows
                    self._seal_pending()

        trainer.save_checkpoint = save_and_seal  # type: ignore[method-assign]

    def _seal_pending(self) -> None:
        """Seal the checkpoints written since the last call (see `on_train_batch_start`)."""
        pending, self._unsealed = self._unsealed, []
        for path, step in pending:
            seal_file(path, step=step, extra={"source": SOURCE})
            self.run.event("checkpoint.saved", f"{SOURCE} checkpoint of step {step} sealed "
                           "and verified", step=step, path=str(path),
                           bytes=path.stat().st_size, verified=True, source=SOURCE)
            _drop_orphan_seals(path.parent)

    def _wrap_resume(self, trainer: pl.Trainer) -> None:
        connector = getattr(trainer, "_checkpoint_connector", None)
        start = getattr(connector, "resume_start", None)
        if start is None:
            raise LabcoatError("this Lightning version has no trainer._checkpoint_connector."
                               "resume_start; pass LabcoatCallback(resume=False) and resume "
                               "with trainer.fit(..., ckpt_path=callback.resume_checkpoint(DIR))")

        @functools.wraps(start)
        def resume_start(checkpoint_path: Any = None, *args: Any, **kwargs: Any) -> None:
            if checkpoint_path is None and trainer.state.fn == "fit":
                directories = {cb.dirpath for cb in trainer.checkpoint_callbacks
                               if isinstance(cb, ModelCheckpoint) and cb.dirpath}
                for directory in sorted(directories):
                    found = self.resume_checkpoint(directory)
                    if found is not None:
                        checkpoint_path = str(found)
                        self.resumed_from = found
                        break
            start(checkpoint_path, *args, **kwargs)

        connector.resume_start = resume_start

    def _wrap_optimizer_step(self, trainer: pl.Trainer) -> None:
        """Have the precision plugin run forward and backward before ``optimizer.step``."""
        plugin = trainer.strategy.precision_plugin
        if type(plugin).optimizer_step is not Precision.optimizer_step:
            return  # plugins that override it (AMP's) already run the closure first

        def optimizer_step(optimizer: Any, model: Any, closure: Callable[[], Any],
                           **kwargs: Any) -> Any:
            if isinstance(optimizer, torch.optim.LBFGS):
                return Precision.optimizer_step(plugin, optimizer, model, closure, **kwargs)
            result = plugin._wrap_closure(model, optimizer, closure)  # hooks, clipping included
            return optimizer.step(closure=lambda: result, **kwargs)

        plugin.optimizer_step = optimizer_step  # type: ignore[method-assign]


def _newest_verified(directory: Path) -> _common.Resume:
    """Like `_common.find_resume` for checkpoint files: newest step (from each seal) first;
    unsealed ``.ckpt`` files newer than every sealed one are listed as skipped."""
    sealed: list[tuple[int, Path]] = []
    unsealed: list[tuple[float, Path]] = []
    for file in directory.glob("*.ckpt") if directory.is_dir() else ():
        step = _seal_step(file)
        if step is None:
            unsealed.append((file.stat().st_mtime, file))
        else:
            sealed.append((step, file))
    skipped: list[dict[str, Any]] = []
    for step, file in sorted(sealed, key=lambda s: (s[0], s[1].stat().st_mtime), reverse=True):
        reason = verify_file(file)
        if reason is None:
            newest = file.stat().st_mtime
            skipped += [{"step": None, "path": str(f), "reason": "no labcoat manifest: the "
                         "save did not complete (a crash mid-save)"}
                        for mtime, f in unsealed if mtime > newest]
            return _common.Resume(file, step, skipped)
        skipped.append({"step": step, "path": str(file), "reason": reason})
    skipped += [{"step": None, "path": str(f), "reason": "no labcoat manifest"}
                for _, f in unsealed]
    return _common.Resume(None, 0, skipped)


def _seal_step(file: Path) -> int | None:
    try:
        return int(json.loads(file_manifest(file).read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _drop_orphan_seals(directory: Path) -> None:
    """Remove the seals of checkpoints ModelCheckpoint deleted (retention)."""
    suffix = file_manifest(Path("x")).name[1:]  # ".labcoat-manifest.json"
    for seal in directory.glob(f"*.ckpt{suffix}"):
        if not seal.with_name(seal.name.removesuffix(suffix)).exists():
            seal.unlink(missing_ok=True)


def _python_state(state: Any) -> tuple[Any, ...]:
    """random.setstate wants tuples; a checkpoint round trip may give lists."""
    version, internal, gauss = state
    return (version, tuple(internal), gauss)


def _as_list(values: Any) -> list[Any]:
    return values.tolist() if hasattr(values, "tolist") else list(values)

