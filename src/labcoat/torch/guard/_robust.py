"""Robust statistics over a rolling window: median and MAD, no fixed thresholds.

A value is judged by its robust z-score against the run's own recent
history, ``z = (x - median) / scale``. The scale is the larger of
``1.4826 * MAD`` (a consistent estimate of the standard deviation under
normality; Rousseeuw & Croux 1993) and the spread of the tail on the side
being judged, ``(q95 - median) / 1.645`` above or ``(median - q05) / 1.645``
below. Training signals are skewed and heavy-tailed (gradient norms of a
healthy run jump 3-6x now and then, the loss of a hard batch sits far above
the median), so the tail term keeps those from counting as spikes, while a
real explosion lands tens of scales away. Median and quantiles ignore the
outliers they are meant to find, so a spike does not hide itself by
inflating the scale, as it would a mean and standard deviation. The
baseline is recomputed every few values (it moves slowly), in plain Python:
this runs inside training steps, where a first NumPy call costs tens of
microseconds of cold caches while sorting a hundred floats costs a few.
"""

from __future__ import annotations

import collections
import math

MAD_TO_SIGMA = 1.4826
TAIL_Z = 1.645  # standard normal 95% quantile: (q95 - median) / 1.645 estimates sigma


class RobustWindow:
    """The last `size` finite values, with a cached baseline (median, scale below, scale above).

    Scales are floored at `rel_floor` * |median| and at `abs_floor`, so a nearly
    constant series does not turn rounding into alerts.
    """

    def __init__(self, size: int, *, refresh: int = 8, rel_floor: float = 1e-3,
                 abs_floor: float = 1e-30) -> None:
        self._values: collections.deque[float] = collections.deque(maxlen=size)
        self._refresh = refresh
        self._rel_floor = rel_floor
        self._abs_floor = abs_floor
        self._cached: tuple[float, float, float] | None = None
        self._age = 0

    def __len__(self) -> int:
        return len(self._values)

    def push(self, x: float) -> None:
        if math.isfinite(x):  # plain Python: this runs every step, NumPy only at refresh
            self._values.append(x)
            self._age += 1

    def values(self) -> list[float]:
        return list(self._values)

    def baseline(self) -> tuple[float, float, float]:
        """(median, scale below, scale above) of the window; recomputed every `refresh` pushes."""
        if self._cached is None or self._age >= self._refresh:
            values = sorted(self._values)
            low, median, high = (_sorted_quantile(values, q) for q in (0.05, 0.5, 0.95))
            mad = MAD_TO_SIGMA * _sorted_quantile(sorted(abs(v - median) for v in values), 0.5)
            floor = max(mad, self._rel_floor * abs(median), self._abs_floor)
            self._cached = (float(median), max(floor, (median - low) / TAIL_Z),
                            max(floor, (high - median) / TAIL_Z))
            self._age = 0
        return self._cached

    @property
    def median(self) -> float:
        return self.baseline()[0]

    def z(self, x: float) -> float:
        """Robust z of `x`: against the lower tail's scale below the median, the upper's above."""
        median, below, above = self.baseline()
        return (x - median) / (above if x >= median else below)

    def quantile(self, q: float) -> float:
        return _sorted_quantile(sorted(self._values), q)


def _sorted_quantile(values: list[float], q: float) -> float:
    """np.quantile's default (linear) on already sorted values, without its overhead."""
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return float(values[lo] + (values[hi] - values[lo]) * (pos - lo))
