"""labcoat: trustworthy, fast machine-learning experiments.

Importing labcoat is light (no torch, no database): a training process only
pays for the journal writer. ``labcoat.stats`` and the other packages load
when first used.
"""

from __future__ import annotations

import importlib
from typing import Any

from labcoat.errors import LabcoatError
from labcoat.sdk import Run, init

__all__ = ["LabcoatError", "Run", "init", "stats"]
__version__ = "0.1.0"

# Every package, e.g. `labcoat.scaling` after a bare `import labcoat`.
_LAZY = {"diagnose", "evals", "inside", "monitor", "report", "reproduce", "review", "runner",
         "scaling", "spec", "stats", "store", "torch", "web", "workloads"}


def __getattr__(name: str) -> Any:
    # `labcoat.stats` works after a bare `import labcoat`, without loading
    # scipy for trials that never use it.
    if name in _LAZY:
        return importlib.import_module(f"labcoat.{name}")
    raise AttributeError(f"module 'labcoat' has no attribute {name!r}")
