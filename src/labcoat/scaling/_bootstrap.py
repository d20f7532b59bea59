"""Bootstrap of a scaling fit: make replicate data sets, refit every replicate at once.

Two ways to make a replicate (`fit(interval_method=...)`); both refit all
replicates as one batched L-BFGS problem (`_lbfgs.minimize_batch`) warm-started
at the full-data estimate.

- "residual" (the default without groups): the design (N, D) stays fixed and
  the replicate's log losses are the fitted curve plus log residuals drawn
  with replacement from `noise_pool` (the model-based bootstrap, Davison &
  Hinkley 1997, §6.2.3 and §6.3 for nonlinear models). The percentile
  interval is then stretched about the estimate by t_{n-p} / z (`stretch`):
  the replicates see the noise scale as known, the data only estimate it.
- "pairs": the case bootstrap, a multinomial count per point that becomes the
  weight of its Huber term. Besiroglu et al. 2024 bootstrap the Chinchilla fit
  this way (4,000 replicates, each warm-started). With 40 points and 5
  parameters it is too wide for B and beta (benchmarks/scaling_coverage.py:
  98-100% coverage at nominal 95% in 5 of 6 noise x law cells, 1.10-1.33x the
  spread of the estimates over data sets). The cause is the resampling, not
  the Huber loss: in plain least squares it is 1.2-1.5x as wide as the
  linearized t interval (tests/scaling/test_coverage.py). A replicate keeps
  only ~63% of the distinct design points, and a fit's uncertainty grows faster
  than linearly as points go (E[(X*'X*)^-1] > (E[X*'X*])^-1, Jensen), so the
  replicates scatter more than refits on new data at the same design would.
  With `groups` (e.g. the run each checkpoint came from) whole groups are
  resampled together, which needs no model of how points in a run are
  correlated; this is why `groups=` uses "pairs".

Prediction intervals add log noise to each replicate's prediction, so a new
point is expected to scatter around the curve as the fitted points did:
"residual" draws it from the same pool, smoothed (`prediction_noise`); "pairs"
keeps its earlier rule (`residual_noise`), so it reproduces earlier results.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtri
from scipy.stats import t as student_t

from labcoat.scaling._forms import Form, huber_objective
from labcoat.scaling._lbfgs import BatchResult, minimize_batch
from labcoat.stats import Interval

INTERVAL_METHODS = ("residual", "pairs")


def resample_weights(n: int, reps: int, rng: np.random.Generator,
                     groups: np.ndarray | None = None) -> np.ndarray:
    """(reps, n) resampling counts: each replicate draws n points (or all groups) with
    replacement. groups: (n,) integer labels 0..G-1; a group's points share its count."""
    if groups is None:
        return rng.multinomial(n, np.full(n, 1.0 / n), size=reps).astype(float)
    n_groups = int(groups.max()) + 1
    counts = rng.multinomial(n_groups, np.full(n_groups, 1.0 / n_groups), size=reps)
    return counts[:, groups].astype(float)


def noise_pool(residuals: np.ndarray, n_params: int, delta: float) -> np.ndarray:
    """(~n - p,) log-space errors to resample: residual-bootstrap data, prediction noise.

    residuals: (n,) log(loss) - log(fit). The p residuals closest to zero are left
    out: a fit with p parameters passes (nearly) through p points, exactly so in
    the limit Huber with delta far below the noise reaches, least absolute
    deviations (Koenker 2005, §2.2: an L1 fit interpolates p points). Their
    near-zero residuals are not noise; resampled, they put an atom at zero that
    makes every replicate fit too well (kept in, on Hoffmann et al.'s law with 1%
    noise in benchmarks/scaling_coverage.py's design, 150 data sets: percentile
    intervals 0.88-0.94x as wide as the estimates' spread, covering 88-92%).
    The rest are centred at their Huber location
    c (sum psi_delta(e - c) = 0, Huber 1964: the median when delta is far below
    the noise, the mean when far above), so the fit's own criterion sees the pool
    centred on the curve, then scaled to mean square sum(residuals^2) / (n - p),
    the usual unbiased noise variance.
    """
    r = np.asarray(residuals, dtype=float)
    n = r.size
    dof = max(n - n_params, 1)
    target = math.sqrt(float(np.sum(r**2)) / dof)
    kept = r[np.argsort(np.abs(r), kind="stable")[n - dof:]]
    if target == 0.0:
        return np.zeros(kept.size)
    centred = kept - _huber_location(kept, delta)
    # In the L1 limit the location of an odd count is its median, which lands on 0: drop
    # it too (the signs stay balanced, and an atom at 0 is what the p were dropped for).
    centred = centred[np.abs(centred) > 1e-9 * np.abs(centred).max(initial=0.0)]
    if centred.size == 0:  # one residual left (n = p + 1): its size, both signs
        return np.array([-target, target])
    return centred * (target / float(np.sqrt(np.mean(centred**2))))


def _huber_location(x: np.ndarray, delta: float) -> float:
    """c with sum clip((x - c) / delta, -1, 1) = 0: the mean for large delta, the median
    for small (Huber 1964). The sum falls monotonically in c, so a bracketed root."""
    def score(c: float) -> float:
        return float(np.clip((x - c) / delta, -1.0, 1.0).sum())

    low, high = float(x.min()), float(x.max())
    median = float(np.median(x))
    if score(median) == 0.0 or score(low) <= 0.0 or score(high) >= 0.0:
        return median  # (with delta small the roots form an interval; take its middle)
    return float(brentq(score, low, high, xtol=1e-12 * max(1.0, abs(high - low))))


def residual_data(fitted: np.ndarray, pool: np.ndarray, reps: int,
                  rng: np.random.Generator) -> np.ndarray:
    """(reps, n) replicate log losses: fitted (n,) plus errors drawn from pool."""
    return fitted[None, :] + rng.choice(pool, size=(reps, fitted.size), replace=True)


def refit(form: Form, log_n: np.ndarray, log_d: np.ndarray | None, log_loss: np.ndarray,
          theta: np.ndarray, weights: np.ndarray | None, delta: float) -> BatchResult:
    """Refit every replicate from the estimate `theta` (P,) -> x (R, P).

    log_loss: (n,) shared by all replicates, or (R, n) one data set per replicate
    (residual bootstrap). weights: (R, n) counts per point (pairs bootstrap), or
    None for weight 1 everywhere. R comes from whichever is two-dimensional.
    """
    reps = (weights if weights is not None else np.atleast_2d(log_loss)).shape[0]
    per_rep = np.ndim(log_loss) == 2

    def fun(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return huber_objective(x, log_n, log_d, log_loss[rows] if per_rep else log_loss,
                               1.0 if weights is None else weights[rows], delta)

    start = np.tile(np.asarray(theta, dtype=float), (reps, 1))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return minimize_batch(fun, start, max_iter=1000)


def residual_noise(residuals: np.ndarray, n_params: int, reps: int,
                   rng: np.random.Generator) -> np.ndarray:
    """(reps,) log-space noise for the "pairs" method's prediction intervals, as before
    the residual bootstrap (so "pairs" gives the same numbers it always did): residuals
    resampled with replacement, times sqrt(n / (n - p)) (Davison & Hinkley 1997, ch. 6)."""
    n = residuals.size
    inflate = np.sqrt(n / (n - n_params)) if n > n_params else 1.0
    return rng.choice(residuals, size=reps, replace=True) * inflate


def prediction_noise(pool: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps,) log-space noise for prediction intervals: the shrunk smoothed bootstrap
    of `noise_pool` (Davison & Hinkley 1997, §3.4): a pool draw plus normal noise of
    bandwidth h = 1.06 s m^(-1/5) (Silverman 1986, eq. (3.28)), shrunk by
    (1 + h^2 / s^2)^(-1/2) to keep the pool's mean square s^2. One draw from the m
    pooled residuals alone has no tails (with m = 4, nothing beyond the largest
    residual), so an interval at the t levels would be too short; the parameter
    replicates need no smoothing, each averages n draws."""
    draws = rng.choice(pool, size=reps, replace=True)
    scale = float(np.sqrt(np.mean(pool**2)))
    if scale == 0.0:
        return draws
    h = 1.06 * scale * pool.size ** -0.2
    return (draws + h * rng.standard_normal(reps)) / math.sqrt(1.0 + (h / scale) ** 2)


def stretch(ci: float, dof: int | None) -> float:
    """t_{(1+ci)/2, dof} / z_{(1+ci)/2}: how far to stretch a percentile interval about
    the estimate (1 for dof None: the plain percentile interval).

    Replicates of the residual bootstrap are drawn with the noise scale fixed at
    its estimate; for linear least squares the stretched interval is then the
    Student-t interval (the reason for Hesterberg's 2015 expanded percentile, §6.6,
    which moves the quantile levels out instead; with few residuals the far tails
    of the replicates are not resolved: 0.46-0.49x the t interval's width at n - p = 2,
    against 1.01-1.08x stretched, tests/scaling/test_coverage.py)."""
    if dof is None:
        return 1.0
    q = (1 + ci) / 2
    return float(student_t.ppf(q, max(dof, 1)) / ndtri(q))


def stretch_bounds(point: np.ndarray | float, low: np.ndarray | float,
                   high: np.ndarray | float, factor: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) moved away from point by `factor` (elementwise, same coordinates)."""
    point, low, high = (np.asarray(x, dtype=float) for x in (point, low, high))
    return point - factor * (point - low), point + factor * (high - point)


def percentile_interval(samples: np.ndarray, point: float, ci: float, n: int,
                        dof: int | None = None, log: bool = False) -> Interval:
    """Percentile interval of the finite bootstrap samples (R,) around the full-data
    `point`, stretched by `stretch(ci, dof)` (dof None: not stretched); log: stretch in
    log coordinates (positive quantities: E, A, B, N, D, loss)."""
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return Interval(point=float(point), low=float("nan"), high=float("nan"), n=n, ci=ci)
    low, high = np.quantile(finite, [(1 - ci) / 2, (1 + ci) / 2])
    factor = stretch(ci, dof)
    if factor != 1.0:
        if log:
            with np.errstate(divide="ignore"):
                lo, hi = stretch_bounds(np.log(point), np.log(low), np.log(high), factor)
            low, high = np.exp(lo), np.exp(hi)
        else:
            low, high = stretch_bounds(point, low, high, factor)
    se = float(finite.std(ddof=1)) if finite.size > 1 else float("nan")
    return Interval(point=float(point), low=float(low), high=float(high), se=se, n=n, ci=ci)
