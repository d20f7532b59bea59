"""Argument checks shared by the statistics functions (invalid input raises, never guesses)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from labcoat.stats._types import Interval


def check_ci(ci: float) -> None:
    if not 0 < ci < 1:
        raise ValueError(f"ci={ci!r} must be a probability in (0, 1), e.g. 0.95")


def check_bounds(bounds: tuple[float, float]) -> tuple[float, float]:
    """(lo, hi) as floats with lo < hi; raises ValueError otherwise."""
    try:
        lo, hi = (float(v) for v in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"bounds={bounds!r} must be a pair (lo, hi) of numbers") from None
    if not lo < hi:  # also rejects NaN
        raise ValueError(f"bounds={bounds!r} must satisfy lo < hi, e.g. (0.0, 1.0)")
    return lo, hi


def check_within(values: np.ndarray, bounds: tuple[float, float] | None, name: str) -> None:
    """Raise ValueError when a value lies outside bounds (lo, hi); no-op for bounds=None."""
    if bounds is None:
        return
    lo, hi = check_bounds(bounds)
    outside = (values < lo) | (values > hi)
    if np.any(outside):
        bad = values[outside]
        raise ValueError(
            f"{name} has {bad.size} value(s) outside bounds=({lo:g}, {hi:g}), e.g. "
            f"{bad.flat[0]:g}; fix the values or the bounds"
        )


def clip_to_bounds(interval: Interval, bounds: tuple[float, float] | None) -> Interval:
    """The interval cut to bounds (lo, hi). The estimand (a mean of values inside the
    bounds) lies inside too, so cutting never loses coverage; point and se are kept."""
    if bounds is None:
        return interval
    lo, hi = check_bounds(bounds)
    return replace(interval, low=min(max(interval.low, lo), hi),
                   high=max(min(interval.high, hi), lo))


class StatsWarning(UserWarning):
    """An analysis that may mislead: too few runs for its interval, a Bernoulli
    formula on non-binary scores, different item sets compared, steps of one run
    treated as independent samples, a run far from the others, few clusters.
    Emitted with `warnings.warn`; reports collect and show them next to the
    numbers they qualify.

    kind: a stable tag so a report can merge repeats of one problem into one line:
    "few-runs", "outlier-seed" (one run far from the others, `_seeds.py`),
    "few-clusters" (cluster-robust SE from under 20 clusters, `_items.py`),
    "no-trimming" (a trimmed interval of so few runs that it trims none),
    "no-spread" (every run of each arm equal: zero-width interval),
    "general"; `n_runs` carries the count of runs for "few-runs" and "outlier-seed".
    """

    def __init__(self, message: str, kind: str = "general", n_runs: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.n_runs = n_runs
