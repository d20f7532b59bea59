"""Interval coverage over repeated synthetic data sets (fixed seeds), and the residual
bootstrap against an independent reference.

Reference: with a large huber_delta the fit is nonlinear least squares in log loss,
and at low noise its sampling distribution is the linearized one, so the 95%
intervals should be scipy's `curve_fit` estimate +- t_{n-p} x its standard error
(from the Jacobian, not from any resampling). The default residual bootstrap must
match their width within the Monte-Carlo error of 2,000 replicates; the pairs
bootstrap does not (1.4-1.5x for the 8-point power law, measured).

The fast coverage test uses 20 power-law data sets; the slow one 40 chinchilla data sets.
With 95% intervals the count of misses is Binomial(k, 0.05): the thresholds
allow for that (and for the percentile bootstrap's known undercoverage with
few points) while still catching intervals that ignore a source of error.

Two bands answer two questions, and each is checked against its own reference:
- noise=False is the band of the fitted *curve*: it should cover the true curve
  ~95% of the time, and its width should match the spread of the fitted curve
  over repeated data sets (the Monte Carlo sampling distribution, computed here
  independently of the bootstrap).
- noise=True is the band for a *new run's loss*: it should cover ~95% of new
  noisy points. Inside the fitted range the curve is pinned down much more
  tightly than one run scatters, so the curve band alone must miss many new
  points there; far out, parameter uncertainty dominates and the two bands
  nearly agree (which is why the check is made at an interior point).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest
from scipy.optimize import curve_fit
from scipy.stats import t as student_t

from labcoat import scaling
from labcoat.scaling import ScalingWarning


def _log_power(log_n: np.ndarray, e: float, a: float, alpha: float) -> np.ndarray:
    return np.logaddexp(e, a - alpha * log_n)


def _log_chinchilla(x: np.ndarray, e: float, a: float, alpha: float, b: float, beta: float
                    ) -> np.ndarray:
    return np.logaddexp.reduce([np.full(x.shape[1], e), a - alpha * x[0], b - beta * x[1]])


@pytest.mark.parametrize("form", ["power", "chinchilla"])
def test_residual_intervals_match_least_squares_t_intervals(
    form: str, epoch: dict, law: Callable, grid: Callable
) -> None:
    rng = np.random.default_rng(5)
    if form == "power":  # 8 points, 3 parameters: 5 degrees of freedom, t = 2.57
        N, D = np.geomspace(1e6, 1e9, 8), None
        true, x, model = 1.5 + 300 * N**-0.3, np.log(N), _log_power
    else:  # 3 sizes x 5 token ratios, 5 parameters: 10 degrees of freedom
        N, D = grid(sizes=3)
        true, x, model = law(N, D, epoch), np.log(np.stack([N, D])), _log_chinchilla
    loss = true * np.exp(rng.normal(0, 0.003, N.size))
    f = scaling.fit(N=N, D=D, loss=loss, form=form, huber_delta=1.0, bootstrap=2000, seed=0,
                    warn=False)
    popt, pcov = curve_fit(model, x, np.log(loss), p0=f.theta, xtol=1e-14, ftol=1e-14,
                           gtol=1e-14)
    assert np.allclose(popt, f.theta, atol=1e-6)  # the same least-squares estimate
    dof = N.size - popt.size
    half = student_t.ppf(0.975, dof) * np.sqrt(np.diag(pcov))
    names = ["E", "A", "alpha", "B", "beta"][: popt.size]
    for j, name in enumerate(names):
        iv = f.intervals[name]
        log = name in ("E", "A", "B")  # fitted as log E, log A, log B
        low, high = (np.log(iv.low), np.log(iv.high)) if log else (iv.low, iv.high)
        # measured 0.98-1.00 (8 of 8 parameters); for the power law, unstretched
        # percentiles give 0.75, Student-t quantile levels instead of stretching 0.93-0.95,
        # and the pairs bootstrap 1.41-1.51
        assert (high - low) / (2 * half[j]) == pytest.approx(1.0, abs=0.08), name
        assert (low + high) / 2 == pytest.approx(popt[j], abs=0.15 * half[j]), name


def test_power_law_intervals_cover() -> None:
    rng = np.random.default_rng(2024)
    E, A, alpha, sd = 1.5, 300.0, 0.3, 0.02
    N = np.geomspace(1e6, 1e9, 12)
    targets = {"interior": 3e7, "extrapolated": 3e9}
    k, new_per_fit = 20, 500
    hits = {"alpha": 0, "E": 0}
    curve_hits = dict.fromkeys(targets, 0)
    log_error: dict[str, list[float]] = {t: [] for t in targets}
    half_width: dict[str, list[float]] = {t: [] for t in targets}
    new_cover = {t: {"noise": 0.0, "curve band": 0.0} for t in targets}
    for i in range(k):
        loss = (E + A * N**-alpha) * np.exp(rng.normal(0, sd, N.size))
        f = scaling.fit(N=N, loss=loss, bootstrap=200, seed=i, starts=32)
        hits["alpha"] += f.intervals["alpha"].low <= alpha <= f.intervals["alpha"].high
        hits["E"] += f.intervals["E"].low <= E <= f.intervals["E"].high
        for name, target in targets.items():
            true = E + A * target**-alpha
            new = true * np.exp(rng.normal(0, sd, new_per_fit))
            point, lo, hi = f.predict_interval(target, noise=False)
            curve_hits[name] += lo <= true <= hi
            log_error[name].append(float(np.log(point / true)))
            half_width[name].append(float(np.log(hi / lo) / 2))
            new_cover[name]["curve band"] += np.mean((lo <= new) & (new <= hi)) / k
            _, lo, hi = f.predict_interval(target, noise=True)
            new_cover[name]["noise"] += np.mean((lo <= new) & (new <= hi)) / k
    assert hits["alpha"] >= 17 and hits["E"] >= 17, hits
    for name in targets:
        # The curve band covers the true curve...
        assert curve_hits[name] >= 17, (name, curve_hits)
        # ...and is as wide as the curve's sampling spread says: bootstrap half-width vs
        # 1.96 x the RMS error of the fitted curve over the k data sets. The RMS of 20
        # errors is itself uncertain by ~16%, hence the generous bounds; a band that
        # is half or twice as wide as it should be fails.
        rms = float(np.sqrt(np.mean(np.square(log_error[name]))))
        ratio = float(np.mean(half_width[name])) / (1.96 * rms)
        assert 0.67 <= ratio <= 1.5, (name, ratio, rms)
        # The band with residual noise covers new runs at about its level...
        assert 0.88 <= new_cover[name]["noise"] <= 0.995, (name, new_cover)
    # ...while inside the fitted range the curve band alone misses many of them (the
    # curve's spread is ~0.01 in log loss, one run's ~0.02): a prediction interval
    # that forgot the residual noise would fail the check above.
    interior = new_cover["interior"]
    assert interior["curve band"] <= 0.8, new_cover
    assert interior["noise"] - interior["curve band"] >= 0.15, new_cover


@pytest.mark.slow
def test_chinchilla_intervals_cover(epoch: dict, law: Callable, grid: Callable) -> None:
    rng = np.random.default_rng(7)
    N, D = grid(sizes=6)
    k = 40
    hits = dict.fromkeys(["E", "alpha", "B", "beta", "a", "new point"], 0)
    a_true = epoch["beta"] / (epoch["alpha"] + epoch["beta"])
    estimates: dict[str, list[float]] = {"alpha": [], "beta": []}
    widths: dict[str, list[float]] = {"alpha": [], "beta": []}
    for i in range(k):
        loss = law(N, D, epoch) * np.exp(rng.normal(0, 0.01, N.size))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScalingWarning)
            f = scaling.fit(N=N, D=D, loss=loss, bootstrap=300, seed=i, starts=64)
            _, lo, hi = f.predict_interval(3e10, 6e11)
        new = law(3e10, 6e11, epoch) * np.exp(rng.normal(0, 0.01))
        for name in ("E", "alpha", "B", "beta", "a"):
            true = a_true if name == "a" else epoch[name]
            hits[name] += f.intervals[name].low <= true <= f.intervals[name].high
        hits["new point"] += lo <= new <= hi
        for name in estimates:
            estimates[name].append(f.params[name])
            widths[name].append(f.intervals[name].high - f.intervals[name].low)
    # Misses ~ Binomial(40, 0.05): 33 or more hits has probability 0.99 at 95% coverage.
    assert all(v >= 33 for v in hits.values()), hits
    # As wide as the estimates' spread over the 40 data sets (a normal 95% interval is
    # 3.92 SDs); that SD is itself uncertain by ~11%, so only a band 1.4x too wide (or
    # 0.7x too narrow) fails.
    for name in estimates:
        ratio = np.mean(widths[name]) / (3.92 * np.std(estimates[name], ddof=1))
        assert 0.7 <= ratio <= 1.4, (name, ratio)
