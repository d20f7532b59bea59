"""The error a checkpoint save or restore raises."""

from __future__ import annotations

from labcoat.errors import LabcoatError


class CheckpointError(LabcoatError):
    """A checkpoint could not be saved or restored.

    The message names the checkpoint (or directory) and what to do; the
    underlying error, if any (e.g. ``OSError: No space left on device``), is
    chained as ``__cause__``.
    """
