"""Result types shared by the statistics functions."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval."""

    point: float
    low: float
    high: float
    se: float = float("nan")
    n: int = 0
    ci: float = 0.95


@dataclass(frozen=True)
class Difference:
    """An estimated difference (b - a) with its interval and two-sided p-value."""

    estimate: float
    low: float
    high: float
    se: float
    p_value: float
    method: str
    n: int = 0
    df: float = float("inf")
    correlation: float = float("nan")  # paired comparisons: corr(a, b)
    ci: float = 0.95
    aliases: tuple[str, ...] = ()  # effects this estimate is confounded with (fractions)
    # Paired 0/1 items ("paired-mcnemar"): (n01, n10, n), the discordant counts (b right
    # where a missed, a right where b missed) and the items, so an adjusted interval can be
    # recomputed with the same method (`stats.adjust`).
    counts: tuple[int, ...] = ()

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0
