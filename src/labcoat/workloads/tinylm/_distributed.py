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
import gc
import os
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from labcoat.errors import LabcoatError


@dataclass(frozen=True)
class Group:
    """This process's place in the data-parallel group (rank 0 of 1 when not distributed)."""

    rank: int = 0
    world: int = 1
    # The DDP wrapper, held here only: see `unwrap` for why it must be freed first.
    _wrapped: list[torch.nn.Module] = field(default_factory=list, repr=False, compare=False)

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def shard(self, inputs: torch.Tensor, labels: torch.Tensor,
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's rows of the global batch: (B, T) -> (B / world, T)."""
        if not self.distributed:
            return inputs, labels
        return inputs[self.rank::self.world], labels[self.rank::self.world]

    def wrap(self, model: torch.nn.Module) -> None:
        """Train `model` through DDP (gradients averaged over ranks) when distributed."""
        if self.distributed:
            # DDP's constructor broadcasts rank 0's parameters, which every rank already
            # holds (same init seed, or the same checkpoint). TinyLM has no buffers to sync.
            self._wrapped.append(DistributedDataParallel(model))

    def net(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module to call for a training step: `model`'s DDP wrapper, or `model`."""
        return self._wrapped[0] if self._wrapped else model

    def unwrap(self) -> bool:
        """Free the DDP wrapper while the process group is still registered.

        Its Reducer holds a reference to the gloo process group. Freed after
        `destroy_process_group`, the Reducer drops the group's last reference while
        holding the GIL, and the group's destructor joins gloo's worker threads, one
        of which may be freeing a finished collective's tensors and need the GIL: a
        deadlock (seen as a rank hanging after its last step under load). Returns
        whether it is gone.
        """
        if not self._wrapped:
            return True
        alive = weakref.ref(self._wrapped.pop())
        gc.collect()  # DDP sits in reference cycles (its hooks)
        return alive() is None

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
    group = Group(rank=dist.get_rank(), world=dist.get_world_size())
    try:
        yield group
        if not group.unwrap():  # (with an exception in flight, its traceback may hold it)
            raise RuntimeError("tinylm's DDP wrapper outlived training (a reference kept "
                               "somewhere); freed after the process group, it may deadlock")
    finally:
        group.unwrap()
        if joined:
            dist.destroy_process_group()
