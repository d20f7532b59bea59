"""Comparing two runs' metrics bit for bit, step by step: where do they first differ?"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

from labcoat.sdk import read_journal

Metrics = dict[str, dict[int, float]]  # metric -> step -> value


@dataclass(frozen=True)
class Divergence:
    """The first (step, metric) where two runs differ; a value is None where it is missing."""

    step: int
    metric: str
    recorded: float | None
    new: float | None

    def describe(self, new_name: str = "rerun") -> str:
        if self.new is None:
            return (f"step {self.step}, metric {self.metric!r}: recorded {self.recorded!r}, "
                    f"the {new_name} never logged it")
        if self.recorded is None:
            return (f"step {self.step}, metric {self.metric!r}: the {new_name} logged "
                    f"{self.new!r}, the original run did not log it")
        gap = abs(self.new - self.recorded)
        scale = max(abs(self.recorded), 1e-300)
        return (f"step {self.step}, metric {self.metric!r}: recorded {self.recorded!r}, "
                f"{new_name} {self.new!r} (differs by {gap:.3g}, relative {gap / scale:.3g})")


def same_bits(a: float, b: float) -> bool:
    """Bit-identical as IEEE doubles (any NaN equals any NaN: the store keeps no payload)."""
    if math.isnan(a) and math.isnan(b):
        return True
    return struct.pack("<d", a) == struct.pack("<d", b)


def first_divergence(recorded: Metrics, new: Metrics, *, steps: range | None = None,
                     names: set[str] | None = None) -> Divergence | None:
    """The earliest step (then metric name, alphabetically) where `new` differs from
    `recorded`, or None if every point is bit-identical. `steps` and `names` restrict the
    comparison (a replay covers only some steps and verifies only the loss)."""
    metrics = sorted(set(recorded) | set(new))
    if names is not None:
        metrics = [m for m in metrics if m in names]
    points = sorted({(step, m) for m in metrics for source in (recorded, new)
                     for step in source.get(m, {}) if steps is None or step in steps})
    for step, metric in points:
        a = recorded.get(metric, {}).get(step)
        b = new.get(metric, {}).get(step)
        if a is None or b is None or not same_bits(a, b):
            return Divergence(step, metric, a, b)
    return None


def count_points(metrics: Metrics) -> int:
    return sum(len(values) for values in metrics.values())


class JournalMetrics:
    """The metrics of a growing journal, read incrementally (last value per step wins,
    as in the store)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.metrics: Metrics = {}
        self.events: list[dict] = []
        self.last_step: int | None = None
        self._offset = 0
        self._line = 0

    def read(self) -> None:
        chunk = read_journal(self.path, self._offset, self._line)
        self._offset, self._line = chunk.offset, chunk.line
        for _, record in chunk.records:
            if record.get("kind") == "log":
                step = int(record["step"])
                self.last_step = step if self.last_step is None else max(self.last_step, step)
                for name, value in record["metrics"].items():
                    self.metrics.setdefault(name, {})[step] = float(value)
            elif record.get("kind") == "event":
                self.events.append(record)
