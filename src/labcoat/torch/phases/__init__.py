"""Always-on phase timing: each training step's time in data, forward, backward, optimizer,
comm, eval, checkpoint and any ``run.phase`` name, per rank, from hooks (docs/phases.md).

    timer = time_phases(model, optimizer, run=run)
    for batch in timer.loader(batches):
        ...                               # the loop, unchanged
    timer.close()

A third torch feature beside the guard and the checkpointer: none of the three imports
another. The slow-step alarm that reads these times is `labcoat.monitor`'s; on a slowdown
the timer itself can capture a short torch.profiler window (`ProfileOnSlow`, off by default).
"""

from labcoat.torch.phases._clocks import DeviceClock
from labcoat.torch.phases._profile import ProfileOnSlow
from labcoat.torch.phases._timer import KEEP, PhaseError, PhaseTimer, time_phases

__all__ = ["KEEP", "DeviceClock", "PhaseError", "PhaseTimer", "ProfileOnSlow", "time_phases"]
