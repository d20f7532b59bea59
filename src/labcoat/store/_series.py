"""One metric's whole series as three columns, and their bytes in the `metric_series` table.

Imports of runs another tracker recorded write a million points at once: as one row per
point that costs seconds in the B-tree alone, as one row per (trial, metric) with the
columns as little-endian arrays it costs milliseconds. Points a trial logs while it runs
stay rows of `metric_point` (they arrive a few at a time and may be rewritten).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

STEP, FLOAT = np.dtype("<i8"), np.dtype("<f8")


@dataclass(frozen=True, eq=False)
class SeriesColumns(Mapping[int, tuple[float, float | None]]):
    """step -> (value, unix time or None), held as numpy columns.

    steps: int64, strictly increasing. values: float64, NaN kept. times: float64 unix
    seconds with NaN where unknown, or None when no point has a time. A Mapping, so code
    written for a {step: (value, time)} dict reads it alike.
    """

    steps: np.ndarray
    values: np.ndarray
    times: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.steps)
        if len(self.values) != n or (self.times is not None and len(self.times) != n):
            raise ValueError("steps, values and times must have one entry per point")
        if n > 1 and not bool(np.all(self.steps[1:] > self.steps[:-1])):
            raise ValueError("steps must be strictly increasing")

    @classmethod
    def of(cls, series: Mapping[int, tuple[float, float | None]]) -> SeriesColumns:
        """The columns of a {step: (value, time)} mapping, sorted by step."""
        if isinstance(series, SeriesColumns):
            return series
        steps = np.fromiter(series.keys(), dtype=STEP, count=len(series))
        values = np.fromiter((v for v, _ in series.values()), dtype=FLOAT, count=len(series))
        times = np.fromiter((np.nan if t is None else t for _, t in series.values()),
                            dtype=FLOAT, count=len(series))
        order = np.argsort(steps, kind="stable")
        if not np.all(order[1:] > order[:-1]):
            steps, values, times = steps[order], values[order], times[order]
        return cls(steps, values, None if np.isnan(times).all() else times)

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[int]:
        return iter(self.steps.tolist())

    def __getitem__(self, step: int) -> tuple[float, float | None]:
        i = int(np.searchsorted(self.steps, step))
        if i == len(self.steps) or self.steps[i] != step:
            raise KeyError(step)
        return float(self.values[i]), self._time(i)

    def items(self) -> Iterator[tuple[int, tuple[float, float | None]]]:  # type: ignore[override]
        times = [None] * len(self) if self.times is None else \
            [None if t != t else t for t in self.times.tolist()]
        return zip(self.steps.tolist(), zip(self.values.tolist(), times, strict=True), strict=True)

    def _time(self, i: int) -> float | None:
        if self.times is None or np.isnan(self.times[i]):
            return None
        return float(self.times[i])

    def to_bytes(self) -> tuple[bytes, bytes, bytes | None]:
        """(steps, values, times) as little-endian int64/float64 bytes."""
        times = None if self.times is None else self.times.astype(FLOAT, copy=False).tobytes()
        return (self.steps.astype(STEP, copy=False).tobytes(),
                self.values.astype(FLOAT, copy=False).tobytes(), times)

    @classmethod
    def from_bytes(cls, steps: bytes, values: bytes, times: bytes | None) -> SeriesColumns:
        return cls(np.frombuffer(steps, dtype=STEP), np.frombuffer(values, dtype=FLOAT),
                   None if times is None else np.frombuffer(times, dtype=FLOAT))
