"""Data-parallel replicas: identical weights, synchronized gradients, same steps, no straggler.

Rules (family ``distributed``), active when ``torch.distributed`` is initialized
and the data-parallel group (``process_group``, default the world) has more
than one rank. Each is an invariant of every correct data-parallel loop
(DDP, hand-written all-reduce, Horovod-style), whatever the model:

    dist.param_drift     critical  replicas hold different weights before a step. Bug
                                   classes: a bad initial broadcast (weights that never
                                   landed, or arrived garbled, on a rank), a transfer that
                                   lost or corrupted a gradient or weight tensor on one rank
                                   (faulty peer-to-peer links return zeros or stale memory),
                                   a rank that skipped or repeated an update, rank-local
                                   optimizer state, nondeterminism, memory corruption
    dist.grad_unsynced   error     replicas are about to apply different gradients. Bug
                                   classes: the all-reduce is missing or bypassed (a forward
                                   through the bare module instead of the DDP wrapper,
                                   ``no_sync()`` left on, parameters replaced after wrapping
                                   so DDP's hooks sit on stale gradient accumulators: a
                                   device or dtype round trip), a rank that averaged over
                                   the wrong group, a reduction whose result a rank received
                                   damaged
    dist.step_mismatch   error     ranks at the same collective count different optimizer
                                   steps: resumed from different checkpoints, or a rank that
                                   stepped more or fewer times (its gathers pair with the
                                   others' at other steps)
    dist.batch_mismatch  error     ranks ran different numbers of backward passes since the
                                   last check: a rank skipped a step or a micro-batch
                                   (rank-dependent accumulation, a shard that ran out early)
    dist.straggler       warning   a rank's own work (data loading + forward, measured up to
                                   the end of its forward, before any gradient sync) takes
                                   ``straggler_ratio`` times the other ranks', and at least
                                   20 ms more, in the median of the last 5 checks (the first
                                   2 checks excluded; the floor keeps sub-millisecond timer
                                   and scheduler noise of fast steps from counting)

At the first step and every ``distributed_every`` steps each rank contributes,
in one ``all_gather`` from the optimizer's pre-step hook, the exact integer
checksum (`_measure.checksums`) of every gradient and every parameter, its
step number, its backward passes since the last check and its mean work time.
Checksums are bit-exact and independent of reduction order, so healthy
replicas agree exactly (all-reduce results are bit-identical on every rank).
The first-step check sees a bad initial broadcast, or gradients that were
never reduced, before the first update.

The gather runs asynchronously on a process group of its own (the same ranks,
created once per data-parallel group with local synchronization): it is judged
at the first later step that finds it complete, and waited for at the next
gather or at ``close()`` (at most CLOSE_WAIT_S). So a rank that is a step
behind the others (it skipped an optimizer step) neither pairs the guard's
collective with the loop's own all-reduces nor deadlocks against them: the
gather completes when the late rank reaches it, and the counts show the skip.
All ranks must watch with the same ``distributed_every`` and ``start_step``.
Not covered: ranks that legitimately run different numbers of steps (``Join``
for uneven inputs), local-SGD style training whose replicas differ between
averaging steps by design (disable ``dist.param_drift``).
"""

from __future__ import annotations

import collections
import datetime
import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Step
from labcoat.torch.guard._measure import Transfer, checksums

STRAGGLER_CHECKS = 5  # work times kept per rank; a straggler is slow in the median of them
WARMUP_CHECKS = 2  # checks not used for stragglers
EXTRA = 3  # gathered after the checksums: step number, backward passes, work time (us)
CLOSE_WAIT_S = 30.0  # close() waits this long for the last gather (the other ranks' steps)
STRAGGLER_FLOOR_S = 0.02  # ... and a straggler is this many seconds slower per step (the
# runner's floor for rank stragglers, runner/_ranks.py: timer and load noise)

class Distributed(Check):
    """Replica agreement and stragglers, checked with one all_gather every N steps."""

    family = "distributed"
    rules = {
        "dist.param_drift": Rule("critical", "data-parallel replicas whose weights differ "
                                             "(exact checksums every `distributed_every` steps)"),
        "dist.grad_unsynced": Rule("error", "gradients not averaged across replicas: all-reduce "
                                            "missing, `no_sync()` left on"),
        "dist.step_mismatch": Rule("error", "ranks at different optimizer steps: resumed from "
                                            "different checkpoints, a rank that stepped more or "
                                            "fewer times"),
        "dist.batch_mismatch": Rule("error", "ranks ran different numbers of backward passes: a "
                                             "skipped step or micro-batch on one rank"),
        "dist.straggler": Rule("warning", "a rank much slower than the others "
                                          "(`straggler_ratio` times and at least 20 ms more per "
                                          "step)"),
    }
    every_step = True  # work times are per step, and every rank must reach each gather

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.group = ctx.config.process_group
        self.world = 0
        if dist.is_available() and dist.is_initialized():
            self.world = dist.get_world_size(self.group)
            self.rank = dist.get_rank(self.group)
        self.handle = None
        self.comm: Any = None  # the guard's own process group (same ranks as self.group)
        self.pending: tuple[Any, list[torch.Tensor], int, np.ndarray, np.ndarray] | None = None
        self.last_forward_end: float | None = None
        self.mark = time.perf_counter()
        self.work = 0.0
        self.work_steps = 0
        self.backwards = 0  # backward passes since the last gather
        self.history: collections.deque[np.ndarray] = collections.deque(maxlen=STRAGGLER_CHECKS)
        self.checks = 0
        if self.world > 1 and super().active():
            self.comm = _comm_group(self.group)
            self.handle = ctx.model.register_forward_hook(self._forward_end)

    def active(self) -> bool:
        return self.world > 1 and super().active()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.remove()
        if self.pending is not None:
            try:
                self.pending[0].wait(timeout=datetime.timedelta(seconds=CLOSE_WAIT_S))
            except RuntimeError:  # the other ranks never reached the last gather
                self.pending = None
                return
            self._judge()

    def _forward_end(self, module: Any, args: Any, output: Any) -> None:
        if not self.ctx.internal and self.ctx.training_now():
            self.last_forward_end = time.perf_counter()

    def _due(self, number: int) -> bool:
        return number % self.ctx.config.distributed_every == 0 or number == self.ctx.first_step

    def queue_pre(self, step: Step, xfer: Transfer) -> None:
        end = self.last_forward_end
        if end is not None and end > self.mark:
            self.work += end - self.mark
            self.work_steps += 1
        self.backwards += step.backwards
        due = self._due(step.number)
        if self.pending is not None and (due or self.pending[0].is_completed()):
            self.pending[0].wait()  # at a gather: keep the guard's collectives in order
            self._judge()
        if due:
            with torch.no_grad():
                self._gather(step)

    def _gather(self, step: Step) -> None:
        """Start the all_gather of this rank's checksums, counts and work time."""
        params = self.ctx.params
        device = params.tensors[0].device
        if dist.get_backend(self.group) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        grads = [g if g is not None else torch.zeros(0, device=device) for g in step.grads]
        mean_us = int(1e6 * self.work / max(self.work_steps, 1))
        local = torch.cat([checksums(grads).to(device), checksums(params.tensors).to(device),
                           torch.tensor([step.number, self.backwards, mean_us], dtype=torch.int64,
                                        device=device)])
        gathered = [torch.empty_like(local) for _ in range(self.world)]
        work = dist.all_gather(gathered, local, group=self.comm, async_op=True)
        present = np.fromiter((g is not None for g in step.grads), bool, len(step.grads))
        self.pending = (work, gathered, step.number, params.judged.copy(), present)
        self.work, self.work_steps, self.backwards = 0.0, 0, 0

    def _judge(self) -> None:
        """Compare the ranks' rows of the completed gather (step `number`'s)."""
        assert self.pending is not None
        _, gathered, number, judged, present = self.pending
        self.pending = None
        n = len(judged)
        table = torch.stack(gathered).cpu().numpy().reshape(self.world, 2 * n + EXTRA)
        grads, params, work = table[:, :n], table[:, n:2 * n], table[:, -1] / 1e6
        self._counts(number, table[:, 2 * n], table[:, 2 * n + 1])
        self._compare(number, params, judged, "dist.param_drift", "critical",
                      "weights differ across data-parallel replicas before step {n}: {who} "
                      "drifted in {names} (a skipped or repeated update, a bad broadcast, "
                      "a transfer that lost or damaged data, nondeterminism or memory "
                      "corruption)")
        self._compare(number, grads, judged & present, "dist.grad_unsynced", "error",
                      "replicas are about to apply different gradients at step {n}: {who} "
                      "differ in {names} (all-reduce missing or bypassed, no_sync() left on, "
                      "DDP's hooks lost when the parameters were replaced)")
        self._stragglers(number, work)

    def _counts(self, number: int, steps: np.ndarray, backwards: np.ndarray) -> None:
        """Same optimizer step and same backward passes since the last check on every rank."""
        for rule, values, what in (("dist.step_mismatch", steps, "optimizer step numbers"),
                                   ("dist.batch_mismatch", backwards,
                                    "backward passes since the last check")):
            if (values == values[0]).all():
                continue
            odd = _odd_ranks(values[:, None])
            listed = ", ".join(f"rank {r}: {int(v)}" for r, v in enumerate(values))
            cause = ("resumed from different checkpoints, or a rank stepped more or fewer "
                     "times" if rule == "dist.step_mismatch" else
                     "a rank skipped a step or a micro-batch")
            self.ctx.alert(rule, "error",
                           f"data-parallel ranks disagree on their {what} at step {number} "
                           f"({listed}): {cause}",
                           step=number, evidence={"values": values.tolist(), "odd_ranks": odd,
                                                  "rank": self.rank, "world": self.world})

    def _compare(self, number: int, table: np.ndarray, judged: np.ndarray, rule: str,
                 severity: str, template: str) -> None:
        differs = (table != table[0]).any(axis=0) & judged
        if not differs.any():
            return
        odd = _odd_ranks(table[:, differs])
        who = (f"rank(s) {', '.join(map(str, odd))} of {self.world}" if odd
               else f"ranks {', '.join(map(str, range(self.world)))}")
        names = self.ctx.params.describe(differs)
        self.ctx.alert(rule, severity, template.format(n=number, who=who, names=names),
                       step=number, evidence={"params": self.ctx.params.listed(differs),
                                              "odd_ranks": odd, "rank": self.rank,
                                              "world": self.world})

    def _stragglers(self, number: int, work: np.ndarray) -> None:
        """A rank whose median work time over the last checks is `straggler_ratio` times the
        other ranks' (medians: one slow step from the OS scheduler is not a straggler)."""
        self.checks += 1
        if self.checks <= WARMUP_CHECKS:
            return  # first steps: allocations and first calls make any rank look slow
        self.history.append(work)
        if len(self.history) < STRAGGLER_CHECKS:
            return
        medians = np.median(np.stack(list(self.history)), axis=0)
        ratio = self.ctx.config.straggler_ratio
        for r in range(self.world):
            others = float(np.median(np.delete(medians, r)))
            if (others > 0 and medians[r] > ratio * others
                    and medians[r] - others > STRAGGLER_FLOOR_S):
                self.ctx.alert(
                    "dist.straggler", "warning",
                    f"rank {r} spends {medians[r] * 1e3:.1f} ms per step on its own work (data + "
                    f"forward) against {others * 1e3:.1f} ms on the other ranks "
                    f"({medians[r] / others:.1f}x, medians of the last {len(self.history)} "
                    f"checks up to step {number}): every rank waits for it",
                    step=number, evidence={"rank": r,
                                           "work_ms": [round(w * 1e3, 2) for w in medians],
                                           "ratio": round(float(medians[r] / others), 2)},
                    subject=str(r))

    def on_post_step(self, step: Step) -> None:
        self.mark = time.perf_counter()


def _odd_ranks(table: np.ndarray) -> list[int]:
    """Ranks whose row differs from the majority row; [] when there is no strict majority."""
    rows = [tuple(r) for r in table.tolist()]
    counts: dict[tuple[int, ...], int] = {}
    for r in rows:
        counts[r] = counts.get(r, 0) + 1
    common, votes = max(counts.items(), key=lambda kv: kv[1])
    if votes * 2 <= len(rows):
        return []
    return [i for i, r in enumerate(rows) if r != common]


_COMM: dict[int, tuple[Any, Any]] = {}  # id(data-parallel group) -> (that group, guard's group)


def _comm_group(group: Any) -> Any:
    """The guard's process group over the ranks of `group` (None: the world), made once.

    Its own group keeps the guard's asynchronous gathers out of the sequence of the loop's
    collectives; local synchronization lets a data-parallel subgroup create it alone.
    """
    base = dist.group.WORLD if group is None else group
    cached = _COMM.get(id(base))
    if cached is not None and cached[0] is base:  # the same live group (ids can be reused)
        return cached[1]
    comm = dist.new_group(ranks=dist.get_process_group_ranks(base),
                          backend=dist.get_backend(base), use_local_synchronization=True)
    _COMM[id(base)] = (base, comm)
    return comm
