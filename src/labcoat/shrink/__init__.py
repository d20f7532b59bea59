"""Shrinking a failed trial to its smallest reproduction (`labcoat shrink EXP/TRIAL`).

    from labcoat import shrink
    result = shrink.shrink_trial("exp/arm-s0")
    result.minimal, result.time_to_failure.ratio, result.minimality()

The design's `shrink:` block names the params that may halve (each with a floor) and the
features delta debugging may switch off; every candidate is a real trial of the
experiment ``EXP-shrink`` in the same store (see docs/shrink.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.shrink._search import Exhausted, Search
    from labcoat.shrink._shrink import Cost, ShrinkError, ShrinkResult, shrink_trial
    from labcoat.shrink._signature import Failure, Signature, failure_of
    from labcoat.shrink._trials import Candidate

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_search": ("Exhausted", "Search"),
    "_shrink": ("Cost", "ShrinkError", "ShrinkResult", "shrink_trial"),
    "_signature": ("Failure", "Signature", "failure_of"),
    "_trials": ("Candidate",),
})
