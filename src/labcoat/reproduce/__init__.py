"""Reproducing a recorded trial: `rerun` (recreate it from its provenance and compare bit
for bit) and `replay` (hindsight logging: re-execute a segment with probes attached)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.reproduce._replay import ReplayMismatch, ReplayResult, replay_trial
    from labcoat.reproduce._rerun import RerunResult, rerun_trial
    from labcoat.reproduce._trial_ref import find_trial, trial_provenance

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_replay": ("ReplayMismatch", "ReplayResult", "replay_trial"),
    "_rerun": ("RerunResult", "rerun_trial"),
    "_trial_ref": ("find_trial", "trial_provenance"),
})
