"""PyTorch integration: verified, asynchronous checkpoints with exact resume.

    from labcoat.torch import Checkpointer
    ckpt = Checkpointer(run=run)
    ckpt.track(model=model, optimizer=opt, data_rng=rng, state=progress)
    start = ckpt.restore()
    ...
    if ckpt.should_save(step):
        ckpt.save(step)
    ckpt.close()

The silent-error guard watches a training loop with hooks and names the bug
(frozen layer, missing zero_grad, dropout on in eval, labels not shifted,
NaN, replicas drifting, ...) within a step or a few:

    from labcoat.torch import watch
    guard = watch(model, optimizer, run=run, stop_on="critical")
    ...                                   # the loop, unchanged
    guard.record(loss=loss.item(), batch=(inputs, labels))   # optional, each step
    guard.close()
    guard.alerts                          # [Alert(step, rule, severity, message, evidence)]

Replay (hindsight logging, `labcoat replay`): under ``LABCOAT_REPLAY`` the same
Checkpointer restores the segment's checkpoint, attaches probes to the tracked
modules and optimizers, never saves, and ends the process after the segment
(`ReplayFinished`); ``Checkpointer(replay_budget=0.07)`` records for it. User
probes receive a `ProbeContext`.

Phase timing (where each step's time went, per rank; docs/phases.md):

    from labcoat.torch import time_phases
    timer = time_phases(model, optimizer, run=run)
    for batch in timer.loader(batches): ...   # data, forward, backward, optimizer, comm
    timer.close()

Three features, three packages that never import each other: `labcoat.torch.guard`,
`labcoat.torch.checkpoint` (replay included) and `labcoat.torch.phases`.

Importing this package imports torch; ``import labcoat`` never does.
"""

from labcoat.torch.checkpoint import (
    CheckpointConfig,
    Checkpointer,
    CheckpointError,
    Policy,
    ProbeContext,
    ReplayFinished,
    file_manifest,
    load_checkpoint,
    seal_directory,
    seal_file,
    verify_directory,
    verify_file,
    young_daly_interval,
)
from labcoat.torch.guard import (
    Alert,
    Guard,
    GuardConfig,
    GuardError,
    GuardStop,
    guard_rules,
    item_hashes,
    read_reference_file,
    watch,
    write_reference_file,
)
from labcoat.torch.phases import PhaseError, PhaseTimer, ProfileOnSlow, time_phases

__all__ = [
    "Alert",
    "CheckpointConfig",
    "CheckpointError",
    "Checkpointer",
    "Guard",
    "GuardConfig",
    "GuardError",
    "GuardStop",
    "Policy",
    "PhaseError",
    "PhaseTimer",
    "ProbeContext",
    "ProfileOnSlow",
    "ReplayFinished",
    "guard_rules",
    "file_manifest",
    "item_hashes",
    "load_checkpoint",
    "read_reference_file",
    "seal_directory",
    "seal_file",
    "time_phases",
    "verify_directory",
    "verify_file",
    "watch",
    "write_reference_file",
    "young_daly_interval",
]
