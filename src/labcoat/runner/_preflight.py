"""Checks before a run starts anything: a trial that cannot import what it needs would
fail every attempt of every trial, so the run says it once, before it starts."""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec

from labcoat.spec import TrialSpec

# labcoat's own trial programs, and the optional package (and extra) each needs
NEEDS = {"labcoat.workloads": ("torch", "torch"), "labcoat.torch": ("torch", "torch")}


def missing_extra(trials: list[TrialSpec]) -> str | None:
    """Why the trials cannot run here: they run a labcoat module with this interpreter
    (`{python} -m labcoat.workloads.tinylm`) whose optional dependency is not installed.
    None if nothing is known to be missing (a user's own script is not inspected)."""
    for command in {tuple(t.command[:3]) for t in trials}:
        module = _labcoat_module(list(command))
        if module is None:
            continue
        for prefix, (package, extra) in NEEDS.items():
            if (module == prefix or module.startswith(prefix + ".")) and find_spec(
                    package) is None:
                return (f"the design's command runs {module}, which needs {package}, and "
                        f"{package} is not installed for {sys.executable}: pip install "
                        f"'labcoat[{extra}]' (or the CPU wheel: pip install torch==2.13.0), "
                        "then run again")
    return None


def _labcoat_module(command: list[str]) -> str | None:
    """The module of `THIS_PYTHON -m labcoat.X ...`, else None."""
    if len(command) < 3 or command[1] != "-m" or not command[2].startswith("labcoat."):
        return None
    if not _same_file(command[0], sys.executable):
        return None  # another interpreter: its packages are not ours to look up
    return command[2]


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
