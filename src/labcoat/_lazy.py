"""Package attributes that load on first use (PEP 562), so a command that needs a
little of a package (`labcoat status`) does not import what another needs (scipy)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, where: dict[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """where: {submodule: names}; a submodule is relative to `package` (``_status``) or
    absolute (``labcoat.analysis``, for names a package re-exports from a lower one).
    Returns the package's __getattr__, __dir__ and __all__."""
    module_of = {name: module for module, names in where.items() for name in names}
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = module_of[name]
        if not module.startswith("labcoat."):
            module = f"{package}.{module}"
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(module_of)

    return __getattr__, __dir__, sorted(module_of)
