"""The silent-error guard: hooks on a training loop that name a silent bug within a step or a few.

    guard = watch(model, optimizer, run=run, stop_on="critical")
    ...                                   # the loop, unchanged
    guard.record(loss=loss.item(), batch=(inputs, labels))   # optional, each step
    guard.close()

`_guard` wires the hooks and schedules the checks; each `_checks_<family>` module
holds every rule named ``<family>.*`` (``grad.not_reset`` is in `_checks_grad`; its
docstring names the bug class, the cost and the known false-alarm shapes);
`_checks_invariant` learns ranges from clean reference runs; `_context` is the
per-step state the checks share, `_step_history` what the update rules share.
"""

from labcoat.torch.guard._alerts import Alert, GuardError, GuardStop
from labcoat.torch.guard._checks_invariant import read_reference_file, write_reference_file
from labcoat.torch.guard._guard import Guard, guard_rule_table, guard_rules, watch
from labcoat.torch.guard._guard_config import GuardConfig
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
