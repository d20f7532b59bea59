"""How a workload plugs into `labcoat inside`: a small protocol, found by module.

A store trial records its command (``python -m labcoat.workloads.tinylm --lr ...``) and
its params. `labcoat inside` imports the package that command runs and reads its
``INSIDE`` attribute, an object with the methods below (tinylm's is
`labcoat.workloads.tinylm.INSIDE`); ``workload="pkg.module:NAME"`` names one directly.
The weights come from the trial's newest verified checkpoint (the model's state_dict
tracked as ``model``, as `labcoat.torch.Checkpointer` saves it).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from labcoat.errors import LabcoatError


@runtime_checkable
class Workload(Protocol):
    """What labcoat needs of a workload to look inside its models.

    configure(params, command): the workload's own config for a trial (its recorded
        params and command), passed back to the methods below.
    build_model(config): the model, initialized (the checkpoint's weights are loaded
        into it).
    eval_items(config, batch_size): (item ids, batches): the eval items in batches
        that `metric` takes, in id order.
    metric(model, batch): (B,) one differentiable number per item (tinylm: the log
        probability of the answer).
    positions(batch): (B,) the sequence position that stands for each item (probes).
    item_labels(config): {name: per-item labels} a probe can be asked for (may be {}).
    item_types(config): per-item "word types" for the probes' control task.
    """

    def configure(self, params: Mapping[str, Any], command: Sequence[str] | None = None
                  ) -> Any: ...

    def build_model(self, config: Any) -> nn.Module: ...

    def eval_items(self, config: Any, batch_size: int = 256) -> tuple[list[str], list[Any]]: ...

    def metric(self, model: nn.Module, batch: Any) -> torch.Tensor: ...

    def positions(self, batch: Any) -> torch.Tensor: ...

    def item_labels(self, config: Any) -> dict[str, list[str]]: ...

    def item_types(self, config: Any) -> list[str]: ...


def workload_for(command: Sequence[str] | None, named: str | None = None, *,
                 trial: str = "the trial") -> Workload:
    """The workload `named` (``pkg.module:NAME``), else ``INSIDE`` of the package the
    command runs with ``python -m``."""
    if named:
        module_name, _, attr = named.partition(":")
        where = f"workload {named!r}"
        found = _attribute(module_name, attr or "INSIDE", where)
    else:
        argv = list(command or [])
        if "-m" not in argv or argv.index("-m") + 1 >= len(argv):
            raise LabcoatError(f"{trial}'s command {' '.join(argv) or '(none)'!r} runs no "
                               "module with python -m, so labcoat cannot find its model; "
                               "pass --workload MODULE:NAME (an object following "
                               "labcoat.inside.Workload)")
        module_name = argv[argv.index("-m") + 1]
        found = _attribute(module_name, "INSIDE", f"{trial}'s module {module_name!r}")
    if not isinstance(found, Workload):
        missing = [m for m in ("configure", "build_model", "eval_items", "metric",
                               "positions", "item_labels", "item_types")
                   if not callable(getattr(found, m, None))]
        raise LabcoatError(f"{named or module_name}: its INSIDE object lacks "
                           f"{', '.join(missing)} (see labcoat.inside.Workload)")
    return found


def _attribute(module_name: str, attr: str, where: str) -> Any:
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise LabcoatError(f"{where}: cannot import {module_name!r} ({err}); install it or "
                           "pass --workload MODULE:NAME") from None
    if not hasattr(module, attr):
        raise LabcoatError(f"{where} does not expose {attr} for labcoat inside (an object "
                           "following labcoat.inside.Workload, e.g. "
                           "labcoat.workloads.tinylm.INSIDE); pass --workload MODULE:NAME")
    return getattr(module, attr)


def load_weights(model: nn.Module, state: Mapping[str, Any], *, trial: str, path: str) -> None:
    """Load a checkpoint's model state; the error says how model and checkpoint differ."""
    if not isinstance(state, Mapping):
        raise LabcoatError(f"{trial}: the checkpoint at {path} tracks no model state_dict "
                           "under 'model'")
    try:
        model.load_state_dict(dict(state))
    except RuntimeError as err:
        first = str(err).splitlines()[1:2] or [str(err)]
        raise LabcoatError(f"{trial}: the checkpoint at {path} does not fit the model its "
                           f"settings build ({first[0].strip()}); were the trial's params "
                           "changed after it ran?") from None
