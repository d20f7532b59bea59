"""Bootstrap of a scaling fit: resample points (or whole runs), refit every replicate at once.

Resampling is the case (pairs) bootstrap: a replicate is a multinomial count per
point, which becomes the weight of that point's Huber term, so all replicates
are one batched L-BFGS problem (`_lbfgs.minimize_batch`) warm-started at the
full-data estimate. Besiroglu et al. 2024 bootstrap the Chinchilla fit the same
way (4,000 replicates, each warm-started) and find intervals far wider than
Hoffmann et al.'s. With `groups` (e.g. the run each checkpoint came from), whole
groups are resampled together: checkpoints of one run are not independent
points, and resampling them one by one gives intervals that are too narrow.

Prediction intervals add residual noise to each replicate's prediction: a log
residual of the full fit drawn with replacement and inflated by sqrt(n / (n - p))
for the p fitted parameters (the residual bootstrap for prediction, Davison &
Hinkley 1997, ch. 6), so a new point is expected to scatter around the curve as
the fitted points did.
"""

from __future__ import annotations

import numpy as np

from labcoat.scaling._forms import Form, huber_objective
from labcoat.scaling._lbfgs import BatchResult, minimize_batch
from labcoat.stats import Interval


def resample_weights(n: int, reps: int, rng: np.random.Generator,
                     groups: np.ndarray | None = None) -> np.ndarray:
    """(reps, n) resampling counts: each replicate draws n points (or all groups) with
    replacement. groups: (n,) integer labels 0..G-1; a group's points share its count."""
    if groups is None:
        return rng.multinomial(n, np.full(n, 1.0 / n), size=reps).astype(float)
    n_groups = int(groups.max()) + 1
    counts = rng.multinomial(n_groups, np.full(n_groups, 1.0 / n_groups), size=reps)
    return counts[:, groups].astype(float)


def refit(form: Form, log_n: np.ndarray, log_d: np.ndarray | None, log_loss: np.ndarray,
          theta: np.ndarray, weights: np.ndarray, delta: float) -> BatchResult:
    """Refit every replicate from the estimate `theta` (P,): weights (R, n) -> x (R, P)."""
    def fun(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return huber_objective(x, log_n, log_d, log_loss, weights[rows], delta)

    start = np.tile(np.asarray(theta, dtype=float), (weights.shape[0], 1))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return minimize_batch(fun, start, max_iter=1000)


def residual_noise(residuals: np.ndarray, n_params: int, reps: int,
                   rng: np.random.Generator) -> np.ndarray:
    """(reps,) log-space noise: residuals resampled with replacement, times sqrt(n / (n - p))."""
    n = residuals.size
    inflate = np.sqrt(n / (n - n_params)) if n > n_params else 1.0
    return rng.choice(residuals, size=reps, replace=True) * inflate


def percentile_interval(samples: np.ndarray, point: float, ci: float, n: int) -> Interval:
    """Percentile interval of the finite bootstrap samples (R,), around the full-data `point`."""
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return Interval(point=float(point), low=float("nan"), high=float("nan"), n=n, ci=ci)
    low, high = np.quantile(finite, [(1 - ci) / 2, (1 + ci) / 2])
    se = float(finite.std(ddof=1)) if finite.size > 1 else float("nan")
    return Interval(point=float(point), low=float(low), high=float(high), se=se, n=n, ci=ci)
