"""Labels that collapse to one class, judged against the classes the run has seen so far.

Rule (family ``labels``):

    data.label_collapse   error     every label of a batch is one class although the labels
                                    seen at the earlier check steps make that all but
                                    impossible (probability below COLLAPSE_P): labels
                                    overwritten (``fill_``, a broadcast), a loader that maps
                                    every item to one class, a wrong column read as labels

Integer labels of ``guard.record(batch=(inputs, labels))`` (or a dict's ``labels``) are
counted at check steps (``check_every``; the first step is one), negative ids (an
``ignore_index`` such as -100) left out. A batch whose n labels are all class c is judged
by the chance of that under the pooled shares so far, ``p_c ** n`` with ``p_c`` smoothed
(add-one, Laplace): a class never seen gets ``1 / (total + 2)``. One check step of history
is enough, so a collapse from step 2 is caught at the next check step; a collapse from the
very first batch has no history to differ from (a reference run would be needed). Classes
rare enough that a whole batch of them is plausible (a batch of 4 binary labels) are never
flagged: the probability bound sees to that.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Record

COLLAPSE_P = 1e-9  # a one-class batch this improbable under the labels seen so far collapsed
MIN_LABELS = 8  # fewer labels in a batch: not judged (nothing is improbable enough)


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
