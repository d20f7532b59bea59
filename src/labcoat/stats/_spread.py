"""How much a score depends on something applied to every item alike (a prompt template):
the spread of the condition means, paired over items.

Every item is scored under every condition, so item difficulty is shared and
cancels (Miller 2024's pairing argument, applied to k conditions at once). The
spread is max - min of the k condition means. Two numbers answer "does the
condition matter?":

- a confidence interval for the spread: percentile bootstrap over items (whole
  rows resampled, so the pairing is kept). The sample range is biased upward
  when the true means are close (the largest of k noisy means is too large), so
  its interval rarely reaches 0 even when the conditions do not matter;
- hence a p-value for "the conditions do not matter": a permutation test that
  shuffles the condition labels within each item (exact under that null: the k
  scores of an item are then exchangeable), with the range as statistic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from labcoat.stats._checks import check_ci


@dataclass(frozen=True)
class Spread:
    """max - min of the condition means.

    means: (k,) condition means; best, worst: their indices; low, high: bootstrap
    interval; p_value: permutation test of "no condition effect"; n: items.
    """

    estimate: float
    low: float
    high: float
    p_value: float
    means: np.ndarray
    best: int
    worst: int
    n: int
    ci: float = 0.95


def spread_of_means(scores: ArrayLike, *, ci: float = 0.95, reps: int = 2000,
                    seed: int | np.random.Generator = 0) -> Spread:
    """Range of the column means of scores (items, conditions), paired over items.

    reps: bootstrap and permutation replicates; seed: the only randomness used.
    """
    check_ci(ci)
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"scores must be (items, conditions) with 2 or more conditions; "
                         f"got shape {x.shape}")
    n, k = x.shape
    if n < 2:
        raise ValueError(f"spread_of_means needs at least 2 items; got {n}")
    if not np.all(np.isfinite(x)):
        raise ValueError("scores contain NaN or inf; every item needs a score per condition")
    rng = np.random.default_rng(seed)
    means = x.mean(axis=0)
    estimate = float(means.max() - means.min())
    boot, exceed = [], 0
    for size in _chunks(reps, max(1, 2_000_000 // (n * k))):  # bounded memory
        m = x[rng.integers(0, n, (size, n))].mean(axis=1)  # (size, k)
        boot.append(m.max(axis=1) - m.min(axis=1))
        # Permutation: shuffle each item's k scores (argsort of uniforms is a random
        # permutation per row), then the range of the condition means.
        order = np.argsort(rng.random((size, n, k)), axis=2)
        m = np.take_along_axis(np.broadcast_to(x, (size, n, k)), order, axis=2).mean(axis=1)
        exceed += int(np.sum(m.max(axis=1) - m.min(axis=1) >= estimate - 1e-12))
    low, high = np.quantile(np.concatenate(boot), [(1 - ci) / 2, (1 + ci) / 2])
    p_value = (exceed + 1) / (reps + 1)
    return Spread(estimate, float(low), float(high), float(p_value), means,
                  int(means.argmax()), int(means.argmin()), n, ci)


def _chunks(total: int, size: int) -> list[int]:
    return [min(size, total - start) for start in range(0, total, size)]
