"""Backtests: fit on the small scales, predict the held-out larger ones, check the intervals.

A scaling law earns trust by predicting scales it was not fitted on. Two schemes:
- "leave-largest-out": one fit without the `holdout` largest scales; predict them.
- "growing-budget": fit on the smallest k scales for every k from `min_scales`
  up, and predict the next `holdout` scale(s) each time (rolling origin).
A scale is a distinct value of N (by="N") or of compute 6 N D (by="compute").
Each held-out point gets the fit's prediction interval (bootstrap plus residual
noise); `broken` says some point fell outside, `direction` which side.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labcoat.scaling._checks import ScalingWarning, check_ci, positive_array
from labcoat.scaling._fit import ScalingFit, fit

SCHEMES = ("leave-largest-out", "growing-budget")


@dataclass(frozen=True)
class BacktestRow:
    """One held-out point. fold: the fit's number; fitted_scale: the largest scale
    in that fit; extrapolation: this point's scale / fitted_scale; error:
    predicted / observed - 1; covered: low <= observed <= high."""

    fold: int
    fitted_scale: float
    N: float
    D: float | None
    observed: float
    predicted: float
    low: float
    high: float
    covered: bool
    error: float
    extrapolation: float


@dataclass(frozen=True)
class Backtest:
    """rows: every held-out prediction; fits: the fits, by fold.

    coverage: fraction of rows inside their interval (nominal: `ci`).
    mean_abs_error, max_abs_error: of `error` (relative, predicted/observed - 1).
    bias: mean log(predicted/observed) (< 0: the law predicts lower loss than
        observed, i.e. the trend bends up or flattens at scale).
    broken: some held-out point lies outside its interval.
    first_miss: the smallest-scale row outside its interval (None if none).
    direction: "above" if the misses are observed above the band, "below",
        "both", or None.
    """

    scheme: str
    by: str
    ci: float
    rows: tuple[BacktestRow, ...]
    fits: tuple[ScalingFit, ...] = field(repr=False)
    coverage: float
    mean_abs_error: float
    max_abs_error: float
    bias: float
    broken: bool
    first_miss: BacktestRow | None
    direction: str | None
    warnings: tuple[ScalingWarning, ...] = field(default=(), repr=False)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (no rows)."""
        return {
            "scheme": self.scheme, "by": self.by, "ci": self.ci, "rows": len(self.rows),
            "fits": len(self.fits), "coverage": self.coverage,
            "mean_abs_error": self.mean_abs_error, "max_abs_error": self.max_abs_error,
            "bias": self.bias, "broken": self.broken, "direction": self.direction,
            "first_miss": None if self.first_miss is None else self.first_miss.__dict__,
        }

    def to_dict(self) -> dict[str, Any]:
        return self.summary() | {"rows_detail": [r.__dict__ for r in self.rows]}


def backtest(N: Sequence[float] | np.ndarray, D: Sequence[float] | np.ndarray | None = None,
             loss: Sequence[float] | np.ndarray | None = None, *,
             scheme: str = "leave-largest-out", holdout: int = 1, by: str = "N",
             min_scales: int | None = None, ci: float = 0.95, bootstrap: int = 1000,
             seed: int = 0, **fit_options: Any) -> Backtest:
    """Backtest a scaling-law fit on held-out larger scales.

    N, D, loss: (n,) as for `fit`. scheme: "leave-largest-out" or
    "growing-budget". holdout: how many of the largest distinct scales are held
    out (leave-largest-out) or predicted after each fit (growing-budget).
    by: "N" (model size) or "compute" (6 N D; needs D). min_scales: smallest
    number of distinct scales a fit may use (default: 5, or fewer if the data
    have fewer, but always more points than parameters). ci, bootstrap, seed
    and fit_options (form, huber_delta, grid, starts, groups is not supported)
    go to `fit`; fold k uses seed + k.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme={scheme!r}; choose between 'leave-largest-out' and "
                         "'growing-budget'")
    if by not in ("N", "compute"):
        raise ValueError(f"by={by!r}; choose between 'N' (model size) and 'compute' (6 N D)")
    if "groups" in fit_options:
        raise ValueError("backtest does not take groups=; it splits by scale")
    check_ci(ci)
    n_arr = positive_array("N", N)
    loss_arr = positive_array("loss", loss)
    d_arr = positive_array("D", D, allow_none=True)
    if by == "compute" and d_arr is None:
        raise ValueError("by='compute' needs D= (tokens) to compute 6 N D; or use by='N'")
    if isinstance(holdout, bool) or not isinstance(holdout, int) or holdout < 1:
        raise ValueError(f"holdout={holdout!r} must be a positive int (scales held out)")
    scale = n_arr if by == "N" else 6.0 * n_arr * d_arr
    levels = np.unique(scale)
    n_params = 5 if d_arr is not None and fit_options.get("form") != "power" else 3
    if min_scales is None:
        min_scales = min(5, max(2, levels.size - holdout))
    if isinstance(min_scales, bool) or not isinstance(min_scales, int) or min_scales < 2:
        raise ValueError(f"min_scales={min_scales!r} must be an int >= 2")
    if levels.size < min_scales + holdout:
        raise ValueError(f"{levels.size} distinct scales (by={by!r}) leave too few to fit "
                         f"{min_scales} and hold out {holdout}; lower min_scales or holdout, or "
                         "add scales")
    if scheme == "leave-largest-out":
        cuts = [levels.size - holdout]
    else:
        cuts = list(range(min_scales, levels.size))
    rows: list[BacktestRow] = []
    fits: list[ScalingFit] = []
    collected: list[ScalingWarning] = []
    for fold, k in enumerate(cuts):
        train = scale <= levels[k - 1]
        test = (scale > levels[k - 1]) & (scale <= levels[min(k + holdout, levels.size) - 1])
        if train.sum() <= n_params:
            continue
        f = fit(n_arr[train], None if d_arr is None else d_arr[train], loss_arr[train],
                ci=ci, bootstrap=bootstrap, seed=seed + fold, warn=False, **fit_options)
        fits.append(f)
        collected.extend(f.warnings)
        idx = np.flatnonzero(test)
        point, low, high = f._interval(n_arr[idx], None if f.D is None else d_arr[idx], ci=ci,
                                       noise=True)
        for j, i in enumerate(idx):
            obs = float(loss_arr[i])
            rows.append(BacktestRow(
                fold=len(fits) - 1, fitted_scale=float(levels[k - 1]), N=float(n_arr[i]),
                D=None if d_arr is None else float(d_arr[i]), observed=obs,
                predicted=float(point[j]), low=float(low[j]), high=float(high[j]),
                covered=_inside(obs, low[j], high[j]), error=float(point[j] / obs - 1),
                extrapolation=float(scale[i] / levels[k - 1])))
    if not rows:
        raise ValueError("no fold had enough points to fit; lower min_scales or add points")
    errors = np.array([r.error for r in rows])
    misses = [r for r in rows if not r.covered]
    above = any(r.observed > r.high for r in misses)
    below = any(r.observed < r.low for r in misses)
    direction = "both" if above and below else "above" if above else "below" if below else None
    first = min(misses, key=lambda r: (r.N * (r.D or 1.0), r.fold)) if misses else None
    result = Backtest(
        scheme=scheme, by=by, ci=ci, rows=tuple(rows), fits=tuple(fits),
        coverage=float(np.mean([r.covered for r in rows])),
        mean_abs_error=float(np.mean(np.abs(errors))), max_abs_error=float(np.abs(errors).max()),
        bias=float(np.mean(np.log1p(errors))), broken=bool(misses), first_miss=first,
        direction=direction, warnings=tuple(collected))
    if misses:
        warnings.warn(ScalingWarning(
            f"backtest ({scheme}): {len(misses)} of {len(rows)} held-out points fell outside "
            f"their {100 * ci:g}% prediction interval ({direction} the band), the first at "
            f"N={first.N:.3g}: the fitted trend does not hold at the larger scales",
            kind="backtest-miss"), stacklevel=2)
    return result


def _inside(observed: float, low: float, high: float) -> bool:
    """low <= observed <= high, up to rounding: a fit with ~zero residuals (points exactly
    on a law) has a zero-width band that its own held-out point must not miss by 1e-16."""
    slack = 1e-9 * abs(observed)
    return bool(low - slack <= observed <= high + slack)
