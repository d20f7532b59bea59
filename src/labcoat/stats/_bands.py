"""Where a new run's curve should lie, given reference runs: a prediction band per step.

A running trial is one more draw from the process that produced its reference
runs (other seeds of the same arm, or of an earlier experiment). At a matched
step, if the K reference values are normal with unknown mean and spread, a new
run's value y satisfies (y - mean) / (sd * sqrt(1 + 1/K)) ~ Student t with K - 1
degrees of freedom (the classical prediction interval; e.g. Hahn & Meeker,
"Statistical Intervals", 1991, ch. 4). Two things follow:

- early in training the seeds spread widely, so the band is wide and a trial
  that lags the reference mean early is usually *inside* it ("expected early
  underperformance"), not an alarm;
- watching a curve means looking many times. Each look is a chance of a false
  alarm, so the looks are planned in advance (`looks`) and each gets alpha/looks
  (Bonferroni): the chance that a clean run ever leaves the band stays at most
  alpha, whatever the correlation between looks (conservative when they are
  strongly correlated, as neighbouring steps are).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from labcoat.stats._checks import check_ci


@dataclass(frozen=True)
class Band:
    """Per-step prediction band for one new run.

    mean, low, high, sd: (steps,); n_runs: reference runs behind it; level: the
    two-sided coverage of each step's interval (after the split over looks).
    """

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    sd: np.ndarray
    n_runs: int
    level: float
    looks: int


def prediction_band(curves: ArrayLike, *, ci: float = 0.95, looks: int = 1) -> Band:
    """The band a new run's value should lie in at each step, all looks together at `ci`.

    curves: (runs, steps) reference values at matched steps, one row per run (>= 2 runs).
    looks: how many times the new run will be compared (each look uses
    (1 - ci) / looks, Bonferroni), so the family of looks keeps a false-alarm rate
    of at most 1 - ci for a run from the same process.
    """
    check_ci(ci)
    x = np.asarray(curves, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"curves must be a (runs, steps) array; got shape {x.shape}")
    if x.shape[0] < 2:
        raise ValueError(f"a prediction band needs at least 2 reference runs; got {x.shape[0]}")
    if not np.all(np.isfinite(x)):
        raise ValueError("curves contain NaN or inf; drop failed reference runs first")
    if looks < 1:
        raise ValueError(f"looks must be at least 1; got {looks}")
    k = x.shape[0]
    alpha = (1 - ci) / looks
    mean = x.mean(axis=0)
    sd = x.std(axis=0, ddof=1)
    half = float(sps.t.ppf(1 - alpha / 2, df=k - 1)) * sd * np.sqrt(1 + 1 / k)
    return Band(mean, mean - half, mean + half, sd, k, 1 - alpha, looks)
