"""tinylm's training examples by index, for `labcoat inside`'s training-data attribution.

Example i is the i-th example the training stream produced (step k used examples
(k-1) * batch_size .. k * batch_size - 1): the stream is a function of the data seed,
the tasks and the held-out eval set alone (see `_tasks.TrainStream`), so replaying it
gives every example back without storing any. This holds for a single-rank run
without a data fault (a fault that rewrites batches changes what was trained on).

It follows `labcoat.inside.TrainingData` by shape, so tinylm does not import
`labcoat.inside`; the config is the one ``INSIDE.configure`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from labcoat.errors import LabcoatError
from labcoat.workloads.tinylm._tasks import (
    IGNORE,
    Example,
    TrainStream,
    collate,
    make_eval_set,
)
from labcoat.workloads.tinylm._train import Config, learning_rate

Batch = tuple[torch.Tensor, torch.Tensor]


class TrainingData:
    """tinylm's side of training-data attribution (see the module doc)."""

    def training_size(self, config: Config) -> int:
        return config.steps * config.batch_size

    def examples(self, config: Config, indices: Sequence[int]) -> list[Example]:
        """The stream's examples at these positions, in the order given."""
        if not indices:
            return []
        size = self.training_size(config)
        bad = [i for i in indices if not 0 <= i < size]
        if bad:
            raise LabcoatError(f"tinylm training example index {bad[0]} is outside 0.."
                               f"{size - 1} (steps x batch size)")
        stream = TrainStream(config.seed_for("data"),
                             make_eval_set(config.eval_items, config.tasks).held_out(),
                             config.tasks)
        wanted = set(indices)
        found: dict[int, Example] = {}
        for i in range(max(indices) + 1):
            example = stream.example()
            if i in wanted:
                found[i] = example
        return [found[i] for i in indices]

    def training_examples(self, config: Config, indices: Sequence[int]) -> Batch:
        """(inputs, labels) of these examples, padded together (see `collate`)."""
        return collate(self.examples(config, indices))

    def describe(self, config: Config, indices: Sequence[int]) -> list[str]:
        """``task: input -> target`` per example."""
        return [f"{ex.task}: {' '.join(ex.input)} -> {' '.join(ex.target)}"
                for ex in self.examples(config, indices)]

    def loss(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        """(B,) each example's mean cross-entropy over its answer tokens (training's loss,
        `masked_loss`, is the same tokens' mean over the whole batch)."""
        inputs, labels = batch
        logits = model(inputs)
        per_token = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE,
                                    reduction="none").view(labels.shape)
        mask = (labels != IGNORE).to(per_token.dtype)
        return (per_token * mask).sum(1) / mask.sum(1).clamp(min=1)

    def learning_rate(self, config: Config, step: int) -> float:
        return learning_rate(step, config)


TRAINING_DATA = TrainingData()
