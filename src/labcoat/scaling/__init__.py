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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labcoat.scaling._backtest import Backtest, BacktestRow, backtest
    from labcoat.scaling._checks import ScalingWarning, check_range
    from labcoat.scaling._fit import FitDiagnostics, ScalingFit, fit
    from labcoat.scaling._isoflop import IsoFlopBudget, IsoFlopFit, isoflop_fit
    from labcoat.scaling._live import BandPoint, CurveCheck, Departure, LiveMonitor, check_curve

# Names load on first use (PEP 562), so registering `labcoat scaling` in the CLI
# does not import scipy: `labcoat --help` stays fast.
_WHERE = {
    "Backtest": "_backtest", "BacktestRow": "_backtest", "backtest": "_backtest",
    "ScalingWarning": "_checks", "check_range": "_checks",
    "FitDiagnostics": "_fit", "ScalingFit": "_fit", "fit": "_fit",
    "IsoFlopBudget": "_isoflop", "IsoFlopFit": "_isoflop", "isoflop_fit": "_isoflop",
    "BandPoint": "_live", "CurveCheck": "_live", "Departure": "_live",
    "LiveMonitor": "_live", "check_curve": "_live",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(f"labcoat.scaling.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'labcoat.scaling' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Backtest",
    "BacktestRow",
    "BandPoint",
    "CurveCheck",
    "Departure",
    "FitDiagnostics",
    "IsoFlopBudget",
    "IsoFlopFit",
    "LiveMonitor",
    "ScalingFit",
    "ScalingWarning",
    "backtest",
    "check_curve",
    "check_range",
    "fit",
    "isoflop_fit",
]
