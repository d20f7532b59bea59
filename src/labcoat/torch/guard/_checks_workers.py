"""DataLoader workers: worker processes whose random generators start in the same state.

Rules (family ``data``):

    data.worker_rng   error  two worker processes of a watched DataLoader start (after
                             ``worker_init_fn``) with the same state of one global random
                             generator (torch, NumPy's legacy ``np.random`` or Python's
                             ``random``): every worker draws the same random numbers, so
                             random augmentation (crops, flips, noise, masking) is identical
                             across workers and the data is less varied than believed. The
                             causes: a ``worker_init_fn`` that seeds every worker with one
                             constant (``np.random.seed(0)``, ``torch.manual_seed(seed)``),
                             NumPy state forked from the parent (PyTorch < 1.9, or a loader
                             that starts its own processes), a seed taken from a constant
                             config value

Why not from the batches: identical augmentation across workers leaves their
batches different (each worker transforms other items), so no batch invariant
sees it (``data.repeated_batch`` sees only the degenerate case of a dataset whose
items are pure random draws, where workers, or epochs, repeat each other's
batches, once two equal batches fall on hashed steps). The
generators themselves show it directly and exactly: a correct loader seeds each
worker differently (PyTorch's default ``base_seed + worker_id``, or a
``worker_init_fn`` using ``torch.initial_seed()`` / ``get_worker_info().seed``).

How: ``watch(..., loaders=[train_loader])`` wraps each loader's
``worker_init_fn`` (before its workers start: give the loader to ``watch``
before iterating it). After the user's function, each worker writes one 64-bit
fingerprint per generator into a small shared-memory array; the main process
reads it at check steps and at ``guard.close()`` (a few integers, no transfer).
Loaders with fewer than two workers are not judged. Not covered: a ``numpy.random.Generator`` or
``torch.Generator`` object held by the dataset and copied into every worker
(its state is not global); workers a loader starts outside PyTorch's worker loop.
"""

from __future__ import annotations

import random
import sys
import zlib
from typing import Any

import torch

from labcoat.torch.guard._alerts import GuardError, Rule
from labcoat.torch.guard._context import Check, Context, Step

GENERATORS = ("torch", "numpy", "random")  # one fingerprint slot per worker and generator


class _Fingerprint:
    """A ``worker_init_fn``: the user's, then the worker's generator fingerprints into `slots`.

    slots: shared int64 array (num_workers * len(GENERATORS)); 0 = not written yet.
    Picklable (a top-level class), for loaders that spawn their workers.
    """

    def __init__(self, user: Any, slots: Any) -> None:
        self.user = user
        self.slots = slots

    def __call__(self, worker_id: int) -> None:
        if self.user is not None:
            self.user(worker_id)
        states = [bytes(torch.random.get_rng_state().numpy()), None,
                  repr(random.getstate()).encode()]
        numpy = sys.modules.get("numpy")
        if numpy is not None:  # a dataset that never imported NumPy draws nothing from it
            states[1] = numpy.random.get_state()[1].tobytes()
        base = worker_id * len(GENERATORS)
        for g, state in enumerate(states):
            if state is not None:  # crc32 and adler32: stable across processes (hash() is not)
                self.slots[base + g] = (zlib.crc32(state) << 32 | zlib.adler32(state)) or 1


class WorkerRng(Check):
    """Generator fingerprints of the watched loaders' workers, read at check steps."""

    family = "data"
    rules = {
        "data.worker_rng": Rule("error", "two DataLoader workers start with the same torch, "
                                         "NumPy or `random` state (a `worker_init_fn` seeding "
                                         "all alike, NumPy state forked): random augmentation "
                                         "identical across workers; needs `watch(..., "
                                         "loaders=[loader])` before the loader is iterated"),
    }
    periodic = frozenset({"on_pre_step"})

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.watched: list[tuple[int, Any, Any, Any]] = []  # (index, loader, slots, user fn)
        if not self.active():
            return
        for i, loader in enumerate(ctx.config.loaders):
            workers = getattr(loader, "num_workers", None)
            if not isinstance(workers, int) or not hasattr(loader, "worker_init_fn"):
                raise GuardError(f"loaders[{i}] is a {type(loader).__name__}, not a "
                                 "torch.utils.data.DataLoader")
            if workers < 2:
                continue
            mp = loader.multiprocessing_context or torch.multiprocessing
            if isinstance(mp, str):
                mp = torch.multiprocessing.get_context(mp)
            slots = mp.Array("q", workers * len(GENERATORS), lock=False)
            user = loader.worker_init_fn
            loader.worker_init_fn = _Fingerprint(user, slots)
            self.watched.append((i, loader, slots, user))
        self.done: set[int] = set()  # loaders already alerted on

    def active(self) -> bool:
        return bool(self.ctx.config.loaders) and super().active()

    def on_pre_step(self, step: Step) -> None:
        if not step.check:
            return
        for i, loader, slots, _ in self.watched:
            if i not in self.done:
                self._judge(step.number, i, loader, list(slots))

    def _judge(self, number: int, i: int, loader: Any, values: list[int]) -> None:
        count = len(GENERATORS)
        for g, name in enumerate(GENERATORS):
            seen: dict[int, int] = {}
            for worker in range(len(values) // count):
                value = values[worker * count + g]
                if not value:
                    continue  # not started yet, or the generator is not in use
                if value in seen:
                    self.done.add(i)
                    first = seen[value]
                    self.ctx.alert(
                        "data.worker_rng", "error",
                        f"workers {first} and {worker} of loaders[{i}] "
                        f"({loader.num_workers} workers) start with the same {name} random "
                        "state: their random augmentation is identical; seed each worker "
                        "differently in worker_init_fn (from torch.initial_seed() or "
                        "torch.utils.data.get_worker_info().seed, not a constant)",
                        step=number, evidence={"loader": i, "generator": name,
                                               "workers": [first, worker],
                                               "num_workers": loader.num_workers},
                        subject=str(i))
                    return
                seen[value] = worker

    def close(self) -> None:
        for i, loader, slots, _ in self.watched:  # workers that started after the last check
            if i not in self.done:
                self._judge(self.ctx.completed, i, loader, list(slots))
        for _, loader, _, user in self.watched:  # give the loader back its own function
            if isinstance(loader.worker_init_fn, _Fingerprint):
                loader.worker_init_fn = user
        self.watched = []
