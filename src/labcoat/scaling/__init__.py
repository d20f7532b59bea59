"""Scaling laws you can trust: fits, bootstrap intervals, backtests, live extrapolation.

numpy, scipy and labcoat.stats only (no torch, no database): usable on numbers
from anywhere (a notebook, a CSV, the runner).

- fit: L(N) = E + A/N^alpha ("power") or L(N, D) = E + A/N^alpha + B/D^beta
  ("chinchilla"; Hoffmann et al. 2022, approach 3), Huber loss in log space,
  L-BFGS from a grid of thousands of starts in about a second -> ScalingFit:
  params, bootstrap intervals (parameters, compute-optimal exponents),
  predict, predict_interval (with residual noise), allocation(C)
- isoflop_fit: approach 2 (isoFLOP parabolas), with its known bias documented
- backtest: fit on small scales, predict held-out larger ones, check coverage
- LiveMonitor, check_curve: does a larger run's loss curve leave the band?
- check_range: warnings for weak scale ranges and far extrapolation
- warnings that qualify a result: ScalingWarning (a labcoat.stats.StatsWarning)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.scaling._backtest import Backtest, BacktestRow, backtest
    from labcoat.scaling._checks import ScalingWarning, check_range
    from labcoat.scaling._fit import FitDiagnostics, ScalingFit, fit
    from labcoat.scaling._isoflop import IsoFlopBudget, IsoFlopFit, isoflop_fit
    from labcoat.scaling._live import BandPoint, CurveCheck, Departure, LiveMonitor, check_curve

# Names load on first use, so registering `labcoat scaling` in the CLI does not import
# scipy: `labcoat --help` stays fast.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_backtest": ("Backtest", "BacktestRow", "backtest"),
    "_checks": ("ScalingWarning", "check_range"),
    "_fit": ("FitDiagnostics", "ScalingFit", "fit"),
    "_isoflop": ("IsoFlopBudget", "IsoFlopFit", "isoflop_fit"),
    "_live": ("BandPoint", "CurveCheck", "Departure", "LiveMonitor", "check_curve"),
})
