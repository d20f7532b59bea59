"""What `labcoat inside` needs of tinylm: its model from a trial's settings, its eval items
in batches, and a per-item metric that patching can move by small amounts.

`labcoat.inside` finds this object as ``INSIDE`` in the package a trial's command runs
(``python -m labcoat.workloads.tinylm``); it follows the `labcoat.inside.Workload`
protocol by shape, so tinylm does not import `labcoat.inside`.

The metric is the log probability of the item's whole answer (its target tokens and
EOS), teacher-forced. Exact match, the arms' verdict metric, is a step function of the
same logits: patching one head rarely flips it, while the answer's log probability
moves with every change, and it is differentiable, which attribution patching needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

import torch
import torch.nn.functional as F

from labcoat.errors import LabcoatError
from labcoat.workloads.tinylm._model import TinyLM
from labcoat.workloads.tinylm._tasks import IGNORE, collate, make_eval_set
from labcoat.workloads.tinylm._train import Config, build_model

MODULE = "labcoat.workloads.tinylm"
Batch = tuple[torch.Tensor, torch.Tensor]


class Inside:
    """tinylm's side of `labcoat.inside` (see the module doc)."""

    name = "tinylm"

    def configure(self, params: Mapping[str, Any], command: Sequence[str] | None = None
                  ) -> Config:
        """The run's `Config`: parsed from its command's flags when it ran tinylm's CLI,
        else from its params (an ad-hoc ``labcoat.init(params=cfg.to_dict())``)."""
        command = list(command or [])
        if MODULE in command:
            from labcoat.workloads.tinylm.__main__ import build_parser, config_from_args

            argv = command[command.index(MODULE) + 1:]
            try:
                args, _ = build_parser().parse_known_args(argv)
            except SystemExit:
                raise LabcoatError(f"tinylm: cannot read the trial's command flags "
                                   f"{' '.join(argv)!r}") from None
            return config_from_args(args)
        known = {f.name for f in fields(Config)}
        settings = {k: (tuple(v) if isinstance(v, list) else v)
                    for k, v in params.items() if k in known}
        return Config(**settings)

    def build_model(self, config: Config) -> TinyLM:
        return build_model(config)

    def eval_items(self, config: Config, batch_size: int = 256
                   ) -> tuple[list[str], list[Batch]]:
        """Every eval item's id (``copy/0017``) and the items as (inputs, labels) batches."""
        eval_set = make_eval_set(config.eval_items, config.tasks)
        ids = [i for task in eval_set.items for i in eval_set.ids[task]]
        examples = [ex for xs in eval_set.items.values() for ex in xs]
        batches = [collate(examples[i:i + batch_size])
                   for i in range(0, len(examples), batch_size)]
        return ids, batches

    def metric(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        """(B,) log probability of each item's answer (target tokens and EOS)."""
        inputs, labels = batch
        logp = F.log_softmax(model(inputs).float(), dim=-1)
        mask = labels != IGNORE
        picked = logp.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
        return (picked * mask).sum(dim=1)

    def positions(self, batch: Batch) -> torch.Tensor:
        """(B,) the position that predicts each item's first answer token (its <sep>)."""
        return (batch[1] != IGNORE).int().argmax(dim=1)

    def item_labels(self, config: Config) -> dict[str, list[str]]:
        """Labels a probe can be asked to read: the item's task, its answer's first token."""
        eval_set = make_eval_set(config.eval_items, config.tasks)
        examples = [ex for xs in eval_set.items.values() for ex in xs]
        return {"task": [ex.task for ex in examples],
                "answer": [ex.target[0] for ex in examples]}

    def item_types(self, config: Config) -> list[str]:
        """Each item's "word type" for a probe's control task (Hewitt & Liang 2019): its
        first input token."""
        eval_set = make_eval_set(config.eval_items, config.tasks)
        return [ex.input[0] for xs in eval_set.items.values() for ex in xs]


INSIDE = Inside()
