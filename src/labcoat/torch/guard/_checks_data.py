"""Data bugs: repeated or shrinking batches, bad token ids, wrong labels, eval leakage, workers.

Rules (family ``data``; ``data.label_collapse`` in family ``labels``):

    data.token_range     critical  a token id < 0 or >= an nn.Embedding's size (the tokenizer
                                   does not match the model); checked before the lookup at
                                   training check steps (the first step is one, and a mismatched
                                   tokenizer is there from the first batch), so the alert
                                   explains the crash that follows
    data.token_shift     warning   the input token distribution jumped away from its slow
                                   running average (a different tokenizer or vocabulary, the
                                   wrong data file): robust z > spike_z, or > spike_z/2 at 3
                                   checks running
    data.repeated_batch  error     a batch made of the rows of one recent hashed batch (the
                                   previous step's, or one of the last 8 hashed): a stuck or
                                   duplicating loader, or one looping over a few batches (an
                                   unshuffled loop over fewer batches than that on purpose:
                                   disable the rule)
    data.batch_size      warning   examples per step collapsed below half their median for 2
                                   steps running (a sharding or drop_last bug)
    data.label_leak      error     labels equal the inputs at the same or an earlier position:
                                   the model can read the answer (the next-token shift is
                                   missing, or reversed)
    data.label_offset    error     labels aligned differently than declared or than at the run's
                                   start (shifted twice: predicting two tokens ahead), or at no
                                   offset at all any more (rows paired with other rows' labels)
    data.label_mask      error     the share of label positions that count in the loss, or of
                                   rows with none, jumped from its history (robust z > spike_z,
                                   or > spike_z/2 at 3 checks running): part of the batch masked
                                   out, answers truncated away, or padding/prompts trained on
    data.eval_leak       error     a training row equal to a registered eval item
    data.worker_rng      error     two worker processes of a watched DataLoader start (after
                                   ``worker_init_fn``) with the same state of one global random
                                   generator (torch, NumPy's legacy ``np.random`` or Python's
                                   ``random``): every worker draws the same random numbers, so
                                   random augmentation (crops, flips, noise, masking) is
                                   identical across workers and the data is less varied than
                                   believed. The causes: a ``worker_init_fn`` that seeds every
                                   worker with one constant (``np.random.seed(0)``,
                                   ``torch.manual_seed(seed)``), NumPy state forked from the
                                   parent (PyTorch < 1.9, or a loader that starts its own
                                   processes), a seed taken from a constant config value
    data.label_collapse  error     every label of a batch is one class although the labels seen
                                   at the earlier check steps make that all but impossible
                                   (probability below COLLAPSE_P): labels overwritten
                                   (``fill_``, a broadcast), a loader that maps every item to
                                   one class, a wrong column read as labels

The batch is the watched model's input (first tensor argument, or
``input_ids=``) at each training forward. Its rows are hashed
(`_measure.row_hashes`, padding ignored when ``pad_id`` is set) at check
steps and the step before each (``check_every``): batch size compares those
two steps, repeats the last 8 hashed batches; label, token and eval checks
run at check steps.
Label checks need ``guard.record(batch=(inputs, labels))``.

``data.worker_rng``, DataLoader workers whose random generators start in the same
state. Why not from the batches: identical augmentation across workers leaves their
batches different (each worker transforms other items), so no batch invariant sees it
(``data.repeated_batch`` sees only the degenerate case of a dataset whose items are
pure random draws, where workers, or epochs, repeat each other's batches, once two
equal batches fall on hashed steps). The generators themselves show it directly and
exactly: a correct loader seeds each worker differently (PyTorch's default
``base_seed + worker_id``, or a ``worker_init_fn`` using ``torch.initial_seed()`` /
``get_worker_info().seed``).

How: ``watch(..., loaders=[train_loader])`` wraps each loader's
``worker_init_fn`` (before its workers start: give the loader to ``watch``
before iterating it). After the user's function, each worker writes one 64-bit
fingerprint per generator into a small shared-memory array; the main process
reads it at check steps and at ``guard.close()`` (a few integers, no transfer).
Loaders with fewer than two workers are not judged. Not covered: a ``numpy.random.Generator`` or
``torch.Generator`` object held by the dataset and copied into every worker
(its state is not global); workers a loader starts outside PyTorch's worker loop.

``data.label_collapse``, labels that collapse to one class, judged against the classes
the run has seen so far. Integer labels of ``guard.record(batch=(inputs, labels))``
(or a dict's ``labels``) are counted at check steps (``check_every``; the first step
is one), negative ids (an ``ignore_index`` such as -100) left out. A batch whose n
labels are all class c is judged by the chance of that under the pooled shares so far,
``p_c ** n`` with ``p_c`` smoothed (add-one, Laplace): a class never seen gets
``1 / (total + 2)``. One check step of history is enough, so a collapse from step 2 is
caught at the next check step; a collapse from the very first batch has no history to
differ from (a reference run would be needed). Classes rare enough that a whole batch
of them is plausible (a batch of 4 binary labels) are never flagged: the probability
bound sees to that.
"""

from __future__ import annotations

import collections
import functools
import math
import random
import statistics
import sys
import zlib
from collections import Counter
from typing import Any

import numpy as np
import torch
from torch import nn

from labcoat.torch.guard._alerts import GuardError, Rule
from labcoat.torch.guard._context import Check, Context, Forward, Record, Step
from labcoat.torch.guard._measure import _position_weights, item_hashes, row_hashes
from labcoat.torch.guard._robust import RobustWindow

REPEAT_SHARE = 0.9  # a batch with this share of the rows of one recent batch is a repeat
REPEAT_BATCHES = 8  # hashed batches kept (check steps and the steps before: ~4 intervals)
HIST_DECAY = 0.95  # the reference token histogram forgets this much per check step (slowly:
# after a real shift the distance stays high for several checks instead of fading in one)
PERSIST = 3  # checks running above spike_z / 2 also make a token shift
ALIGNED = 0.5  # labels "aligned" at an offset when surely (Wilson, z=3) half equal that input
UNALIGNED = 0.2  # ... and no longer aligned when surely fewer than this share do
LABEL_FLOOR = 0.02  # the labelled share's scale is at least 2% of its median (packed data:
# every position labelled, no spread at all)
LABEL_CHECKS = 5  # check steps of history before the label shares are judged (~100 steps)
EMPTY_FLOOR = 0.02  # ... and the share of rows without labels at least 2% of the rows
LABEL_ROWS = 16  # rows of a batch the label checks look at (each has many positions)
COLLAPSE_P = 1e-9  # a one-class batch this improbable under the labels seen so far collapsed
MIN_LABELS = 8  # fewer labels in a batch: not judged (nothing is improbable enough)
GENERATORS = ("torch", "numpy", "random")  # one fingerprint slot per worker and generator


class Data(Check):
    """Batches as the model sees them, token ids at every embedding, labels, eval items."""

    family = "data"
    rules = {
        "data.token_range": Rule("critical", "token ids outside an embedding: tokenizer and "
                                             "model do not match"),
        "data.token_shift": Rule("warning", "an abrupt change in the token distribution: "
                                            "another tokenizer, the wrong data file"),
        "data.repeated_batch": Rule("error", "a batch made of one recent batch's rows (the "
                                             "previous step's, or any of the last 8 hashed): a "
                                             "stuck or duplicating loader, or one looping over "
                                             "a few batches"),
        "data.batch_size": Rule("warning", "a collapsing batch size: a sharding or collate bug"),
        "data.label_leak": Rule("error", "labels visible in the inputs: the next-token shift "
                                         "missing"),
        "data.label_offset": Rule("error", "labels shifted twice or realigned mid-run"),
        "data.label_mask": Rule("error", "the share of label positions that count in the loss "
                                         "jumped from its history: part of the batch masked "
                                         "out, or padding/prompts trained on"),
        "data.eval_leak": Rule("error", "registered eval items in the training data"),
    }

    periodic = frozenset({"on_forward", "on_pre_step", "on_record", "on_post_step"})

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg = ctx.config
        self.embeddings = [(name, m) for name, m in ctx.model.named_modules()
                           if isinstance(m, nn.Embedding | nn.EmbeddingBag)]
        self.vocab = max((m.num_embeddings for _, m in self.embeddings), default=0)
        # the token-id hooks are attached only for check steps (the first step is one): a
        # hook on a module costs every call of it, evaluation and generation included
        self.handles: list[Any] = []
        self.token_range = bool(self.embeddings) and ctx.enabled("data.token_range")
        self._attach(True)
        self.hist: torch.Tensor | None = None  # running token shares, at check steps
        self.host: dict[int, tuple[Any, Any, Any]] = {}  # forward index -> CPU batch values
        self.tv = RobustWindow(cfg.window, abs_floor=1e-3)
        self.label_shares = RobustWindow(cfg.window, rel_floor=LABEL_FLOOR)
        self.label_empty = RobustWindow(cfg.window, abs_floor=EMPTY_FLOOR)  # rows: no label
        self.label_high = 0  # label-mask checks running above spike_z / 2
        self.sizes: collections.deque[int] = collections.deque(maxlen=cfg.window)
        self.small = 0
        self.high = 0  # token-shift checks running above spike_z / 2
        self.size_step = -1
        # measured at check steps only: judge after fewer samples than a per-step window
        self.min_samples = max(5, cfg.min_history // 2)
        # the rows of the last REPEAT_BATCHES hashed batches: (step, row hashes), and each
        # row's latest step among them
        self.recent: collections.deque[tuple[int, list[int]]] = collections.deque(
            maxlen=REPEAT_BATCHES)
        self.last_seen: dict[int, int] = {}
        self.eval_hashes: torch.Tensor | None = None  # on the model's device
        self.eval_set: set[int] = set()  # the same hashes, for CPU inputs
        self.size_median = 0.0
        self.alignment: str | None = {True: "next", False: "same", None: None}[cfg.labels_shifted]
        self.declared = cfg.labels_shifted is not None

    def close(self) -> None:
        self._attach(False)

    def _attach(self, on: bool) -> None:
        """Attach (or remove) the forward pre-hooks on the embeddings."""
        if on and not self.handles and self.token_range:
            self.handles = [m.register_forward_pre_hook(functools.partial(self._embedding, name))
                            for name, m in self.embeddings]
        elif not on and self.handles:
            for handle in self.handles:
                handle.remove()
            self.handles = []

    def on_post_step(self, step: Step) -> None:
        """Near check steps: keep the embedding hooks on only while the next step is one."""
        self._attach(self.ctx.is_check_step(step.number + 1))

    def register_eval_items(self, items: Any, hashes: Any) -> int:
        if (items is None) == (hashes is None):
            raise GuardError("register_eval_items takes items or hashes=, exactly one")
        values = item_hashes(items, self.ctx.config.pad_id) if items is not None else [
            int(h) for h in hashes]
        device = self.ctx.params.tensors[0].device
        new = torch.tensor(values, dtype=torch.int64, device=device)
        self.eval_hashes = new if self.eval_hashes is None else torch.cat([self.eval_hashes, new])
        self.eval_set.update(values)
        return len(values)

    # --- token ids at every embedding ------------------------------------------------------------

    def _embedding(self, name: str, module: nn.Module, args: tuple[Any, ...]) -> None:
        if self.ctx.internal or not args or not isinstance(args[0], torch.Tensor):
            return
        ids = args[0]
        if ids.is_floating_point() or ids.numel() == 0:
            return
        training = self.ctx.training_now()
        step = self.ctx.step_now(training)
        if not (training and self.ctx.is_check_step(step)):
            return  # check steps only: a host sync on accelerators, ~10% of the guard on CPU
        if ids.device.type == "cpu":
            host = ids.detach().numpy()
            low, high = int(host.min()), int(host.max())
        else:
            low, high = torch.stack(torch.aminmax(ids)).tolist()
        size = module.num_embeddings  # type: ignore[union-attr]
        if low < 0 or high >= size:
            self.ctx.alert(
                "data.token_range", "critical",
                f"{name} ({size} rows) got token ids from {low} to {high} at "
                f"{'training step' if training else 'an evaluation after step'} {step}: the "
                "tokenizer does not match the model's vocabulary (wrong tokenizer, added "
                "special tokens without resizing the embeddings, an id shift)",
                step=step, evidence={"module": name, "num_embeddings": size, "min_id": low,
                                     "max_id": high}, subject=name)

    # --- the batch of each training forward -----------------------------------------------------

    def on_forward(self, fwd: Forward) -> None:
        x = fwd.inputs
        if not fwd.training or x is None or x.dim() == 0 or x.shape[0] == 0:
            return
        check = self.ctx.is_check_step(fwd.step)
        if not (check or self.ctx.is_check_step(fwd.step + 1)):
            return  # rows are hashed at check steps and the step before (for repeats)
        with torch.no_grad():
            self._batch(fwd, x.detach(), check)

    def _batch(self, fwd: Forward, x: torch.Tensor, check: bool) -> None:
        """Row hashes (and at check steps eval hits and token drift) of one training batch.

        On the CPU see `_batch_host`; on accelerators torch ops, queued for the step's
        single transfer.
        """
        if x.device.type == "cpu":
            self._batch_host(fwd, x, check)
            return
        rows = row_hashes(x, self.ctx.config.pad_id)
        tv = None
        if check and self.vocab and not x.is_floating_point():
            tv = self._token_shares(x)
        key = fwd.index
        pending = self.ctx.pending
        pending.add(f"data.rows.{key}", rows)
        if check and self.eval_hashes is not None:
            pending.add(f"data.leak.{key}", torch.isin(rows, self.eval_hashes))
        if tv is not None:
            pending.add("data.tv", tv)

    def _batch_host(self, fwd: Forward, x: torch.Tensor, check: bool) -> None:
        """`_batch` for a CPU batch: the same values with the cheaper library per part, as
        measured right after a tinylm step (cold caches): NumPy's ``where`` and one matmul
        for the row hashes (~15% under torch's seven ops), torch's ``bincount`` for the
        token shares (~35% under NumPy's ``clip`` and ``bincount``)."""
        if x.is_floating_point() or x.dtype == torch.bool or x.dim() < 2:
            listed = row_hashes(x, self.ctx.config.pad_id).tolist()
        else:
            listed = _row_hashes_matmul(x.numpy().reshape(x.shape[0], -1),
                                        self.ctx.config.pad_id).tolist()
        tv = None
        if check and self.vocab and not x.is_floating_point():
            tv = self._token_shares(x)
            tv = None if tv is None else float(tv)
        leak = [h in self.eval_set for h in listed] if check and self.eval_set else None
        self.host[fwd.index] = (listed, leak, tv)

    def _token_shares(self, x: torch.Tensor) -> torch.Tensor | None:
        """Fold this batch's token shares into the running ones; their total variation
        distance from the running shares (None at the first check)."""
        counts = torch.bincount(x.reshape(-1).clamp(0, self.vocab - 1), minlength=self.vocab)
        share = counts.to(torch.float32) / x.numel()
        if self.hist is None:
            self.hist = share
            return None
        tv = 0.5 * (share - self.hist).abs().sum()
        self.hist.mul_(HIST_DECAY).add_(share, alpha=1 - HIST_DECAY)
        return tv

    def _batch_values(self, step: Step, index: int) -> tuple[list[int] | None,
                                                             list[bool] | None, float | None]:
        if index in self.host:
            return self.host.pop(index)
        rows = step.values.get(f"data.rows.{index}")
        leak = step.values.get(f"data.leak.{index}")
        tv = step.values.get("data.tv") if index == 0 else None
        return (None if rows is None else rows.tolist(),
                None if leak is None else leak.astype(bool).tolist(),
                None if tv is None else float(tv[0]))

    def on_pre_step(self, step: Step) -> None:
        number = step.number
        total = 0
        drift = None
        for fwd in step.forwards:
            rows, leak, tv = self._batch_values(step, fwd.index)
            drift = tv if tv is not None else drift
            if rows is None:
                continue
            total += len(rows)
            self._repeats(number, rows)
            if leak is not None and any(leak):
                where = [i for i, hit in enumerate(leak) if hit]
                self.ctx.alert(
                    "data.eval_leak", "error",
                    f"{len(where)} of {len(rows)} training rows at step {number} are registered "
                    "eval items: the evaluation is contaminated",
                    step=number, evidence={"rows": where[:20], "count": len(where),
                                           "batch": len(rows)})
        self.host.clear()
        if total:
            self._batch_size(number, total)
        if drift is not None:
            self._token_shift(number, drift)

    def _repeats(self, number: int, listed: list[int]) -> None:
        """A batch made of the rows of one recently hashed batch (REPEAT_BATCHES kept)."""
        last = self.last_seen
        earlier = collections.Counter(last[r] for r in listed if r in last)
        if len(listed) >= 2 and earlier:
            before, count = earlier.most_common(1)[0]
            share = count / len(listed)
            if share >= REPEAT_SHARE:
                where = {number: f"another batch of step {number}",
                         number - 1: f"step {before}'s batch"}.get(
                    before, f"step {before}'s batch ({number - before} steps earlier)")
                self.ctx.alert(
                    "data.repeated_batch", "error",
                    f"the batch at step {number} repeats {share:.0%} of the rows of {where}: "
                    "the data loader is stuck, duplicating or looping over a few batches",
                    step=number, evidence={"share": share, "rows": len(listed),
                                           "earlier_step": before})
        if len(self.recent) == self.recent.maxlen:  # forget the oldest batch's rows
            old_step, old_rows = self.recent[0]
            for r in old_rows:
                if last.get(r) == old_step:
                    del last[r]
        self.recent.append((number, listed))
        last.update(dict.fromkeys(listed, number))

    def _batch_size(self, number: int, total: int) -> None:
        if len(self.sizes) >= self.min_samples:
            if len(self.sizes) % 8 == 0 or not self.size_median:  # the median moves slowly
                self.size_median = statistics.median(self.sizes)
            median = self.size_median
            self.small = self.small + 1 if total < median / 2 and self.size_step == number - 1 \
                else int(total < median / 2)
            self.size_step = number
            if self.small >= 2:
                self.ctx.alert(
                    "data.batch_size", "warning",
                    f"steps {number - 1} and {number} trained on {total} examples, under half "
                    f"the median {median:g} of the last {len(self.sizes)} steps measured: the "
                    "batch size collapsed (sharding, drop_last or collate bug)",
                    step=number, evidence={"examples": total, "median": median})
                return  # do not let the collapsed sizes become the new normal
        self.sizes.append(total)

    def _token_shift(self, number: int, tv: float) -> None:
        cfg = self.ctx.config
        if len(self.tv) >= self.min_samples:
            median = self.tv.median
            z = self.tv.z(tv)
            self.high = self.high + 1 if z > cfg.spike_z / 2 else 0
            if z > cfg.spike_z or self.high >= PERSIST:
                self.ctx.alert(
                    "data.token_shift", "warning",
                    f"the token distribution of step {number}'s batch is {tv:.2f} away (total "
                    f"variation) from the recent average, against a median {median:.2f} (robust "
                    f"z {z:.0f}): a different tokenizer or vocabulary, or the wrong data",
                    step=number, evidence={"total_variation": tv, "median": median,
                                           "robust_z": round(z, 1)})
        self.tv.push(tv)

    # --- labels ----------------------------------------------------------------------------------

    def on_record(self, rec: Record) -> None:
        if rec.batch is None or not self.ctx.is_check_step(rec.step):
            return
        pair = _inputs_and_labels(rec.batch)
        if pair is None:
            return
        self._label_share(rec.step, pair[1])
        inputs, labels = pair[0][:LABEL_ROWS], pair[1][:LABEL_ROWS]
        if inputs.device.type == "cpu":  # NumPy: a dozen tiny ops, ~20% under torch's
            counts = _label_counts_host(inputs.numpy(), labels.numpy(),
                                        self.ctx.config.ignore_index)
        else:
            counts = self._label_counts(inputs, labels)
        self._judge_labels(rec, counts)

    def _label_share(self, number: int, labels: torch.Tensor) -> None:
        """data.label_mask: the share of labelled positions, and of rows with none, each
        against its own history."""
        ignore = self.ctx.config.ignore_index
        if labels.device.type == "cpu":  # count_nonzero: C fast paths (mean() is Python)
            rows = np.count_nonzero(labels.numpy() != ignore, axis=1)
            n = max(len(rows), 1)
            share = int(rows.sum()) / max(labels.numel(), 1)
            empty = (n - np.count_nonzero(rows)) / n
        else:
            mask = labels != ignore
            share, empty = torch.stack([mask.float().mean(),
                                        1.0 - mask.any(dim=1).float().mean()]).tolist()
        judged = [(name, value, window.z(value)) for name, value, window in (
            ("share", float(share), self.label_shares), ("empty", float(empty), self.label_empty))
            if len(window) >= LABEL_CHECKS]
        worst = max(judged, key=lambda j: abs(j[2]), default=None)
        if worst is not None:
            name, value, z = worst
            self.label_high = self.label_high + 1 if abs(z) > self.ctx.config.spike_z / 2 else 0
            if abs(z) > self.ctx.config.spike_z or self.label_high >= PERSIST:
                self._label_alert(number, name, value, z)
        self.label_shares.push(float(share))
        self.label_empty.push(float(empty))

    def _label_alert(self, number: int, name: str, value: float, z: float) -> None:
        window = self.label_shares if name == "share" else self.label_empty
        median = window.median
        what = ("of the label positions count in the loss" if name == "share" else
                "of the rows have no label position at all")
        fewer = (value < median) == (name == "share")
        self.ctx.alert(
            "data.label_mask", "error",
            f"{value:.0%} {what} in step {number}'s batch, against a median {median:.0%} "
            f"(robust z {z:.0f}): the loss mask broke (" + (
                "part of the batch masked out, or answers truncated away" if fewer else
                "padding or prompts now trained on") + ")",
            step=number, evidence={name: value, "median": median, "robust_z": round(z, 1)})

    def _label_counts(self, inputs: torch.Tensor, labels: torch.Tensor) -> list[int]:
        with torch.no_grad():
            mask = labels != self.ctx.config.ignore_index
            return torch.stack([
                mask.sum(), ((labels == inputs) & mask).sum(),
                mask[:, 1:].sum(), ((labels[:, 1:] == inputs[:, :-1]) & mask[:, 1:]).sum(),
                mask[:, :-1].sum(), ((labels[:, :-1] == inputs[:, 1:]) & mask[:, :-1]).sum(),
            ]).tolist()

    def _judge_labels(self, rec: Record, counts: list[int]) -> None:
        rates, bounds = {}, {}
        for off, n, hit in zip(("same", "prev", "next"), counts[::2], counts[1::2], strict=True):
            if n:
                rates[off], bounds[off] = hit / n, _wilson(hit, n)
        if not rates:
            return
        best = max(rates, key=rates.__getitem__)
        found = best if bounds[best][0] >= ALIGNED else "none"
        self.ctx.label_alignment = found
        if found == "none":
            if self.alignment in bounds and bounds[self.alignment][1] < UNALIGNED:
                self._unaligned(rec.step, rates)  # surely unrelated to these inputs now
            return  # else not conclusive (few labels)
        if self.alignment is None:
            self.alignment = found  # learned from the first conclusive batch
            return
        if found == self.alignment:
            return
        evidence = {"found": found, "expected": self.alignment,
                    "rates": {k: round(v, 3) for k, v in rates.items()}}
        source = "declared (labels_shifted)" if self.declared else "seen at the run's start"
        if found in ("same", "prev") and self.alignment != "same":
            where = "the same position" if found == "same" else "the previous position"
            self.ctx.alert(
                "data.label_leak", "error",
                f"at step {rec.step}, {rates[found]:.0%} of the labels equal the input at "
                f"{where}: the model can read the answer (next-token shift missing or reversed;"
                f" expected alignment '{self.alignment}', {source})",
                step=rec.step, evidence=evidence)
        else:
            self.ctx.alert(
                "data.label_offset", "error",
                f"at step {rec.step} the labels align with the inputs as '{found}' "
                f"({rates[found]:.0%}), not as '{self.alignment}' ({source}): labels shifted "
                "twice (training to predict two tokens ahead) or misaligned",
                step=rec.step, evidence=evidence)

    def _unaligned(self, number: int, rates: dict[str, float]) -> None:
        source = "declared (labels_shifted)" if self.declared else "seen at the run's start"
        self.ctx.alert(
            "data.label_offset", "error",
            f"at step {number} only {rates[self.alignment]:.0%} of the labels equal the input "
            f"at the expected offset '{self.alignment}' ({source}), and no other offset fits: "
            "the labels no longer belong to these inputs (rows paired with other rows' labels, "
            "a shuffled or misjoined dataset)",
            step=number, evidence={"expected": self.alignment,
                                   "rates": {k: round(v, 3) for k, v in rates.items()}})

    def profile(self) -> dict[str, Any]:
        return {"alignment": self.alignment}


def _row_hashes_matmul(rows: np.ndarray, pad_id: int | None) -> np.ndarray:
    """`_measure.row_hashes` of (B, T) integer rows as one NumPy matmul (int64 wraps alike)."""
    values = rows.astype(np.int64) + 1  # +1: token 0 must count
    if pad_id is not None:
        values = np.where(rows != pad_id, values, 0)
    return values @ _position_weights(torch.device("cpu"), rows.shape[1]).numpy()


def _label_counts_host(inputs: np.ndarray, labels: np.ndarray, ignore: int) -> list[int]:
    """`Data._label_counts` on host arrays: (labelled, equal) at offsets same, prev, next."""
    mask = labels != ignore
    return [int(np.count_nonzero(mask)), int(np.count_nonzero((labels == inputs) & mask)),
            int(np.count_nonzero(mask[:, 1:])),
            int(np.count_nonzero((labels[:, 1:] == inputs[:, :-1]) & mask[:, 1:])),
            int(np.count_nonzero(mask[:, :-1])),
            int(np.count_nonzero((labels[:, :-1] == inputs[:, 1:]) & mask[:, :-1]))]


def _wilson(hits: float, n: float, z: float = 3.0) -> tuple[float, float]:
    """The Wilson score interval for a rate (z=3: wrong about 1 in 700 batches)."""
    p = hits / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - margin) / (1 + z * z / n), (centre + margin) / (1 + z * z / n)


def _inputs_and_labels(batch: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(inputs, labels) as (B, T) integer tensors of one shape, or None."""
    if isinstance(batch, dict):
        pair = (batch.get("input_ids"), batch.get("labels"))
    elif isinstance(batch, list | tuple) and len(batch) >= 2:
        pair = (batch[0], batch[1])
    else:
        return None
    inputs, labels = pair
    if not (isinstance(inputs, torch.Tensor) and isinstance(labels, torch.Tensor)):
        return None
    if (inputs.shape != labels.shape or inputs.dim() < 2 or inputs.is_floating_point()
            or labels.is_floating_point()):
        return None
    return inputs.detach().reshape(inputs.shape[0], -1), labels.detach().reshape(
        labels.shape[0], -1)


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


class Labels(Check):
    """Counts of integer labels at check steps; a one-class batch against those counts."""

    family = "labels"
    rules = {
        "data.label_collapse": Rule("error", "a batch whose labels are all one class, "
                                             "improbable (< 1e-9) under the labels seen at "
                                             "earlier check steps: labels overwritten, the "
                                             "wrong column"),
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.counts: Counter[int] = Counter()
        self.total = 0

    def on_record(self, rec: Record) -> None:
        if rec.batch is None or not self.ctx.is_check_step(rec.step):
            return
        labels = _labels(rec.batch)
        if labels is None:
            return
        labels = labels[labels >= 0]
        n = labels.numel()
        if not n:
            return
        values, counts = torch.unique(labels, return_counts=True)
        if len(values) == 1 and n >= MIN_LABELS and self.total:
            self._judge(rec.step, int(values[0]), n)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True):
            self.counts[v] += c
        self.total += n

    def _judge(self, number: int, label: int, n: int) -> None:
        share = (self.counts[label] + 1) / (self.total + 2)
        log_p = n * math.log(share)
        if log_p < math.log(COLLAPSE_P):
            self.ctx.alert(
                "data.label_collapse", "error",
                f"all {n} labels at step {number} are class {label}, which was "
                f"{self.counts[label] / self.total:.1%} of the {self.total} labels seen at "
                f"earlier check steps (chance of such a batch ~1e{log_p / math.log(10):.0f}): "
                "labels overwritten, a loader mapping every item to one class, or the wrong "
                "column read as labels",
                step=number, evidence={"label": label, "labels": n,
                                       "share_before": self.counts[label] / self.total,
                                       "seen": self.total},
                subject=None)


def _labels(batch: Any) -> torch.Tensor | None:
    """The integer labels of a recorded batch: ``(inputs, labels, ...)`` or ``{"labels": ...}``."""
    if isinstance(batch, dict):
        value = batch.get("labels")
    elif isinstance(batch, tuple | list) and len(batch) >= 2:
        value = batch[1]
    else:
        return None
    if not isinstance(value, torch.Tensor) or value.is_floating_point() or value.is_complex():
        return None
    if value.dtype == torch.bool:
        value = value.long()
    return value.detach().reshape(-1)
