"""Argument checks shared by the statistics functions (invalid input raises, never guesses)."""

from __future__ import annotations


def check_ci(ci: float) -> None:
    if not 0 < ci < 1:
        raise ValueError(f"ci={ci!r} must be a probability in (0, 1), e.g. 0.95")
