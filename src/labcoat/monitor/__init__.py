"""Live monitoring of running experiments, plugged into the runner's `Monitor` interface:
early warning against reference trials, scaling-law extrapolation, sequential runs
that add seeds until the verdict is decisive, and the slow-step alarm (which phase of which
rank got slower). Here, not in the runner, because these
need the statistics and the scaling laws."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.monitor._early_warning import EarlyWarning
    from labcoat.monitor._extrapolation import Extrapolation
    from labcoat.monitor._sequential import SequentialOutcome, run_until_decisive
    from labcoat.monitor._slow_steps import (
        SlowSteps,
        find_slow_steps,
        parse_point_name,
        phase_arrays,
        phase_times,
    )
    from labcoat.monitor._standard import standard_monitors

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_early_warning": ("EarlyWarning",),
    "_extrapolation": ("Extrapolation",),
    "_sequential": ("SequentialOutcome", "run_until_decisive"),
    "_slow_steps": ("SlowSteps", "find_slow_steps", "parse_point_name", "phase_arrays",
                    "phase_times"),
    "_standard": ("standard_monitors",),
})
