"""PyTorch integration: verified, asynchronous checkpoints with exact resume.

    from labcoat.torch import Checkpointer
    ckpt = Checkpointer(run=run)
    ckpt.track(model=model, optimizer=opt, data_rng=rng, state=progress)
    start = ckpt.restore()
    ...
    if ckpt.should_save(step):
        ckpt.save(step)
    ckpt.close()

Importing this package imports torch; ``import labcoat`` never does.
"""

from labcoat.torch._checkpoint import CheckpointConfig, Checkpointer, load_checkpoint
from labcoat.torch._errors import CheckpointError
from labcoat.torch._interval import Policy, young_daly_interval

__all__ = [
    "CheckpointConfig",
    "CheckpointError",
    "Checkpointer",
    "Policy",
    "load_checkpoint",
    "young_daly_interval",
]
