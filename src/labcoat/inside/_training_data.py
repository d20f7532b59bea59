"""How a workload hands out its training examples by index, for training-data attribution.

A trial's training examples are rarely stored: tinylm draws them from a seeded stream.
What attribution needs is a way to get example i back: the i-th example training
consumed (step k of batch size B used positions (k-1)B .. kB-1). A workload offers it
with a ``TRAINING_DATA`` object beside its ``INSIDE`` one (`labcoat.inside.Workload`),
in the package its command runs; tinylm's is `labcoat.workloads.tinylm.TRAINING_DATA`.
The ``config`` every method takes is what ``INSIDE.configure`` returned for the trial.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from labcoat.errors import LabcoatError

_METHODS = ("training_size", "training_examples", "describe", "loss", "learning_rate")


@runtime_checkable
class TrainingData(Protocol):
    """A workload's training examples by index, and the loss training minimized.

    training_size(config): how many examples training consumed (steps x batch size).
    training_examples(config, indices): those examples as one batch ``loss`` takes,
        in the order given (tinylm: replays the data stream from its seed).
    describe(config, indices): one short readable line per example, for the report.
    loss(model, batch): (B,) each example's own training loss (not a batch mean).
    learning_rate(config, step): the learning rate at that optimizer step (TracIn
        weighs each checkpoint by it).
    """

    def training_size(self, config: Any) -> int: ...

    def training_examples(self, config: Any, indices: Sequence[int]) -> Any: ...

    def describe(self, config: Any, indices: Sequence[int]) -> list[str]: ...

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor: ...

    def learning_rate(self, config: Any, step: int) -> float: ...


def training_data_for(command: Sequence[str] | None, named: str | None = None, *,
                      trial: str = "the trial") -> TrainingData:
    """``TRAINING_DATA`` of the package the trial's command runs with ``python -m``, or the
    object `named` (``pkg.module:NAME``)."""
    if named:
        module_name, _, attr = named.partition(":")
        attr = attr or "TRAINING_DATA"
    else:
        argv = list(command or [])
        if "-m" not in argv or argv.index("-m") + 1 >= len(argv):
            raise LabcoatError(f"{trial}'s command {' '.join(argv) or '(none)'!r} runs no "
                               "module with python -m, so labcoat cannot find its training "
                               "examples; pass --training-data MODULE:NAME (an object "
                               "following labcoat.inside.TrainingData)")
        module_name, attr = argv[argv.index("-m") + 1], "TRAINING_DATA"
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise LabcoatError(f"{trial}: cannot import {module_name!r} ({err}); install it or "
                           "pass --training-data MODULE:NAME") from None
    found = getattr(module, attr, None)
    if found is None:
        raise LabcoatError(f"{module_name} exposes no {attr} for training-data attribution "
                           "(an object following labcoat.inside.TrainingData, e.g. "
                           "labcoat.workloads.tinylm.TRAINING_DATA); pass --training-data "
                           "MODULE:NAME")
    missing = [m for m in _METHODS if not callable(getattr(found, m, None))]
    if missing:
        raise LabcoatError(f"{module_name}.{attr} lacks {', '.join(missing)} (see "
                           "labcoat.inside.TrainingData)")
    return found


def model_state(tracked: Mapping[str, Any], *, path: str) -> Mapping[str, Any]:
    """The model's state_dict in a checkpoint's tracked objects (tracked as ``model``)."""
    state = tracked.get("model")
    if not isinstance(state, Mapping):
        raise LabcoatError(f"the checkpoint at {path} tracks no model state_dict under "
                           "'model' (Checkpointer.track(model=...))")
    return state
