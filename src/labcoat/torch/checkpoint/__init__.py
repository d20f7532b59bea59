"""Verified, asynchronous checkpoints with exact resume, and replay from them.

    ckpt = Checkpointer(run=run)
    ckpt.track(model=model, optimizer=opt, data_rng=rng, state=progress)
    start = ckpt.restore()

`_checkpoint` is the Checkpointer (snapshot on the training thread, write and
verify in the background); `_snapshot`, `_files` and `_layout` hold the
on-disk format; `_rng` captures every random state; `_interval` chooses when
to save (Young/Daly). Replay (`labcoat replay`) runs through the same
Checkpointer: `_replay` restores a segment and ends the process after it,
`_probes` are what it records. `_sealed` seals checkpoints other libraries write
(Hugging Face Trainer, Lightning) with the same hashes, for `labcoat.integrations`.
"""

from labcoat.torch.checkpoint._checkpoint import CheckpointConfig, Checkpointer, load_checkpoint
from labcoat.torch.checkpoint._errors import CheckpointError
from labcoat.torch.checkpoint._interval import Policy, young_daly_interval
from labcoat.torch.checkpoint._probes import ProbeContext
from labcoat.torch.checkpoint._replay import ReplayFinished
from labcoat.torch.checkpoint._sealed import (
    file_manifest,
    seal_directory,
    seal_file,
    verify_directory,
    verify_file,
)

__all__ = [
    "CheckpointConfig",
    "CheckpointError",
    "Checkpointer",
    "Policy",
    "ProbeContext",
    "ReplayFinished",
    "file_manifest",
    "load_checkpoint",
    "seal_directory",
    "seal_file",
    "verify_directory",
    "verify_file",
    "young_daly_interval",
]
