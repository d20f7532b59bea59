"""Data-parallel tinylm: DistributedDataParallel over gloo when torchrun starts N ranks.

Under ``torchrun --nproc-per-node N`` (or ``labcoat run`` with ``ranks: N``)
every rank builds the same model from the same init seed and draws the same
global batch of ``batch_size`` examples from the same data stream, then trains
on its own shard of it, rows ``rank::N``. So the data position is one RNG state
shared by all ranks: the checkpoints rank 0 saves hold every rank's position,
and all ranks restore from them; a run killed and resumed logs the same losses
as before the kill, bit for bit (gloo sums two ranks' gradients in a fixed
order). The global batch, and so the hyperparameters, are the single-process
run's. The logged loss is the mean of the ranks' shard losses.

Known limit: the dropout RNG (torch's global one) is checkpointed from rank 0,
so with ``dropout > 0`` the ranks r > 0 do not resume their own dropout masks
exactly.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from labcoat.errors import LabcoatError


@dataclass(frozen=True)
class Group:
    """This process's place in the data-parallel group (rank 0 of 1 when not distributed)."""

    rank: int = 0
    world: int = 1

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def shard(self, inputs: torch.Tensor, labels: torch.Tensor,
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's rows of the global batch: (B, T) -> (B / world, T)."""
        if not self.distributed:
            return inputs, labels
        return inputs[self.rank::self.world], labels[self.rank::self.world]

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module to train through: DDP (gradients averaged over ranks), or `model`."""
        if not self.distributed:
            return model
        # DDP's constructor broadcasts rank 0's parameters, which every rank already holds
        # (same init seed, or the same checkpoint). TinyLM has no buffers to keep in sync.
        return DistributedDataParallel(model)

    def mean(self, value: float) -> float:
        """The mean of `value` over ranks (the logged loss: every rank's shard counts)."""
        if not self.distributed:
            return value
        tensor = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(tensor)
        return float(tensor.item()) / self.world

    def same_step(self, step: int) -> None:
        """Every rank restored the same checkpoint step, or stop with a message."""
        if not self.distributed:
            return
        steps = [torch.zeros(1, dtype=torch.int64) for _ in range(self.world)]
        dist.all_gather(steps, torch.tensor([step], dtype=torch.int64))
        found = [int(s.item()) for s in steps]
        if len(set(found)) > 1:
            raise LabcoatError(
                f"ranks restored different checkpoint steps {found}; the checkpoint "
                "directory changed while they started: restart the trial")


@contextlib.contextmanager
def data_parallel(batch_size: int) -> Iterator[Group]:
    """Join the torchrun-started gloo group if WORLD_SIZE > 1 (left again at the end)."""
    world = int(os.environ.get("WORLD_SIZE") or 1)
    if world <= 1:
        yield Group()
        return
    if batch_size % world:
        raise LabcoatError(f"batch_size={batch_size} must be divisible by the {world} ranks "
                           "(each rank trains on an equal shard of the batch)")
    joined = not dist.is_initialized()
    if joined:
        dist.init_process_group("gloo")
    try:
        yield Group(rank=dist.get_rank(), world=dist.get_world_size())
    finally:
        if joined:
            dist.destroy_process_group()
