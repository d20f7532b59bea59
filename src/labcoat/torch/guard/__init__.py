"""The silent-error guard: hooks on a training loop that name a silent bug within a step or a few.

    guard = watch(model, optimizer, run=run, stop_on="critical")
    ...                                   # the loop, unchanged
    guard.record(loss=loss.item(), batch=(inputs, labels))   # optional, each step
    guard.close()

`_guard` wires the hooks and schedules the checks; each `_checks_*` module
holds one family of rules (its docstring names the bug class, the cost and
the known false-alarm shapes); `_invariants` learns ranges from clean
reference runs; `_context` is the per-step state the checks share.
"""

from labcoat.torch.guard._alerts import Alert, GuardError, GuardStop
from labcoat.torch.guard._guard import Guard, guard_rule_table, guard_rules, watch
from labcoat.torch.guard._guard_config import GuardConfig
from labcoat.torch.guard._invariants import read_reference_file, write_reference_file
from labcoat.torch.guard._measure import item_hashes

__all__ = [
    "Alert",
    "Guard",
    "GuardConfig",
    "GuardError",
    "GuardStop",
    "guard_rule_table",
    "guard_rules",
    "item_hashes",
    "read_reference_file",
    "watch",
    "write_reference_file",
]
