"""Live extrapolation: does a larger run's loss curve stay inside the band its
smaller siblings predict?

A run with N parameters that consumes `tokens_per_step` tokens per optimizer
step has seen D = step * tokens_per_step tokens at `step`. A chinchilla fit
L(N, D) on (N, D, loss) points of smaller runs gives a prediction interval at
(N, D) for every step; the run "leaves the band" when `patience` consecutive
monitored points lie on the same side outside it (one noisy point does not
alarm). The departure is reported at the first point of that streak.

The band is only as comparable as the points behind the fit: fit it on points
measured the way the live curve is (the same loss, eval or smoothed training
loss, and points taken the same way along the schedule: with a cosine schedule
a mid-run loss is above the final loss of a run trained to that many tokens,
Hoffmann et al. 2022 §3.1 and figure A1), and expect per-step training loss to
scatter more than the fit's residuals (raise `patience` or feed a smoothed loss).
Steps before `min_tokens` (default: the smallest D among the fitted points)
are not monitored: there the band is an extrapolation to fewer tokens than any
fitted point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from labcoat.scaling._checks import check_ci
from labcoat.scaling._fit import ScalingFit

Band = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class BandPoint:
    """One observed point against the band. state: "inside", "above", "below" or
    "unmonitored" (before min_tokens, or a non-finite loss)."""

    step: int
    tokens: float
    loss: float
    point: float
    low: float
    high: float
    state: str


@dataclass(frozen=True)
class Departure:
    """Where the curve left the band: step (first point of the streak), confirmed_step
    (the point that completed `patience` in a row), direction ("above": worse than
    predicted; "below": better), and the first point's loss and band."""

    step: int
    confirmed_step: int
    direction: str
    loss: float
    point: float
    low: float
    high: float


@dataclass(frozen=True)
class CurveCheck:
    """check_curve's answer: departure (None if the curve stayed inside) and every point."""

    departure: Departure | None
    points: tuple[BandPoint, ...] = field(repr=False)

    @property
    def left_band(self) -> bool:
        return self.departure is not None


class LiveMonitor:
    """Watch a loss curve, one point at a time, against a scaling-law band.

    source: a chinchilla ScalingFit (the band is its prediction interval at
        (N, step * tokens_per_step)), or a callable band(steps) -> (point, low,
        high), each (k,) for steps (k,).
    N, tokens_per_step: the watched run's parameters and tokens per step (fit only).
    ci: the band's level; noise: include residual noise (a prediction interval).
    patience: consecutive points on one side outside the band before alarming.
    min_tokens: tokens before which points are not monitored (default: the
        smallest D of the fitted points; 0 for a callable band).

    update(step, loss) -> BandPoint; `departure` is set (once) when the curve
    leaves the band; `alarm` says whether it has.
    """

    def __init__(self, source: ScalingFit | Band, *, N: float | None = None,
                 tokens_per_step: float | None = None, ci: float = 0.95, noise: bool = True,
                 patience: int = 3, min_tokens: float | None = None) -> None:
        check_ci(ci)
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience={patience!r} must be a positive int (consecutive "
                             "points outside the band before alarming), e.g. 3")
        self.patience = patience
        self.tokens_per_step = None
        if isinstance(source, ScalingFit):
            if source.form != "chinchilla":
                raise ValueError("LiveMonitor needs a chinchilla fit, L(N, D), to predict "
                                 "loss against tokens seen; fit with D= (tokens seen at each "
                                 "point) and form='chinchilla'")
            for name, value in (("N", N), ("tokens_per_step", tokens_per_step)):
                if value is None or not np.isfinite(value) or value <= 0:
                    raise ValueError(f"{name}={value!r}: give the watched run's {name} (> 0) "
                                     "so the tokens seen at each step are known")
            assert source.D is not None and N is not None and tokens_per_step is not None
            if source.samples.shape[0] == 0:
                raise ValueError("the fit has no bootstrap replicates (bootstrap=0); refit "
                                 "with bootstrap=1000 or more to get a band")
            fitted, n_run, per_step = source, float(N), float(tokens_per_step)
            self.tokens_per_step = per_step

            def band(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                return fitted._interval(np.full(steps.shape, n_run), steps * per_step,
                                        ci=ci, noise=noise)

            self._band: Band = band
            self.min_tokens = float(source.D.min()) if min_tokens is None else float(min_tokens)
        elif callable(source):
            self._band = source
            self.min_tokens = 0.0 if min_tokens is None else float(min_tokens)
            self.tokens_per_step = None if tokens_per_step is None else float(tokens_per_step)
        else:
            raise ValueError("source must be a ScalingFit or a callable band(steps) -> "
                             "(point, low, high)")
        self.history: list[BandPoint] = []
        self.departure: Departure | None = None
        self._streak: list[BandPoint] = []

    @property
    def alarm(self) -> bool:
        return self.departure is not None

    def band(self, steps: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(point, low, high) of the band at `steps` (k,), each (k,)."""
        s = np.asarray(steps, dtype=float).ravel()
        if (s <= 0).any() or not np.isfinite(s).all():
            raise ValueError("steps must be finite and >= 1 (step k has seen k * "
                             "tokens_per_step tokens)")
        return self._band(s)

    def update(self, step: int, loss: float) -> BandPoint:
        """Record one point; returns it with its band and state."""
        return self._record(*self._classify(np.array([step]), np.array([loss], dtype=float)))[0]

    def extend(self, steps: Sequence[int] | np.ndarray,
               losses: Sequence[float] | np.ndarray) -> list[BandPoint]:
        """Record many points at once (one vectorized band computation)."""
        s = np.asarray(steps).ravel()
        v = np.asarray(losses, dtype=float).ravel()
        if s.shape != v.shape:
            raise ValueError(f"steps and losses must have the same length ({s.size} vs "
                             f"{v.size})")
        return self._record(*self._classify(s, v))

    def _classify(self, steps: np.ndarray, losses: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                             np.ndarray]:
        point, low, high = self.band(steps)
        per_step = self.tokens_per_step
        tokens = steps * per_step if per_step is not None else np.full(steps.shape, np.nan)
        return steps, tokens, losses, point, low, high

    def _record(self, steps: np.ndarray, tokens: np.ndarray, losses: np.ndarray,
                point: np.ndarray, low: np.ndarray, high: np.ndarray) -> list[BandPoint]:
        out = []
        for i in range(steps.size):
            loss = float(losses[i])
            early = _early(tokens[i], self.min_tokens)
            if early or not np.isfinite(loss):
                state = "unmonitored"
            elif loss > high[i]:
                state = "above"
            elif loss < low[i]:
                state = "below"
            else:
                state = "inside"
            bp = BandPoint(step=int(steps[i]), tokens=float(tokens[i]), loss=loss,
                           point=float(point[i]), low=float(low[i]), high=float(high[i]),
                           state=state)
            self.history.append(bp)
            out.append(bp)
            if state == "unmonitored":
                continue
            if state == "inside" or (self._streak and self._streak[0].state != state):
                self._streak = [] if state == "inside" else [bp]
            else:
                self._streak.append(bp)
            if self.departure is None and len(self._streak) >= self.patience:
                first = self._streak[0]
                self.departure = Departure(
                    step=first.step, confirmed_step=bp.step, direction=first.state,
                    loss=first.loss, point=first.point, low=first.low, high=first.high)
        return out


def _early(tokens: float, min_tokens: float) -> bool:
    return bool(np.isfinite(tokens) and tokens < min_tokens)


def check_curve(source: ScalingFit | Band, steps: Sequence[int] | np.ndarray,
                losses: Sequence[float] | np.ndarray, *, N: float | None = None,
                tokens_per_step: float | None = None, ci: float = 0.95, noise: bool = True,
                patience: int = 3, min_tokens: float | None = None) -> CurveCheck:
    """Check a whole loss curve at once: whether and where it leaves the band.

    steps, losses: (k,) the curve, steps ascending. Other arguments as for LiveMonitor.
    """
    monitor = LiveMonitor(source, N=N, tokens_per_step=tokens_per_step, ci=ci, noise=noise,
                          patience=patience, min_tokens=min_tokens)
    s = np.asarray(steps).ravel()
    if s.size > 1 and (np.diff(s) <= 0).any():
        raise ValueError("steps must be strictly increasing (one point per step, in order)")
    points = monitor.extend(s, losses)
    return CurveCheck(departure=monitor.departure, points=tuple(points))
