"""Live extrapolation: while a trial at a larger scale trains, compare its loss curve
with the band that the finished smaller-scale trials of its arm predict.

For a design with `scales:`, the scale variable N is the numeric scale parameter
that differs between scales (`labcoat.spec.scale_variable`). Once at least 3 distinct smaller
scales of an arm have finished, their loss curves become (N, D, loss) points,
D = step x `tokens_per_step` (a trial param; 1 if absent, so D counts steps), and
a chinchilla law L = E + A/N^alpha + B/D^beta is fitted to them (leaving out
trials that were themselves flagged off their path)
(labcoat.scaling.fit, bootstrap). A running trial whose N exceeds every
finished one is then watched with labcoat.scaling.LiveMonitor: when `PATIENCE`
consecutive points lie on one side outside the 95% prediction band, the runner
records one alert (rule "scaling.off_path") for the attempt, shown live like a
guard alert and listed by `labcoat status` and `labcoat report`.

Caveats (also in labcoat.scaling._live): the points of one curve are not
independent, so the band from a point bootstrap is optimistic about the curve's
shape; and the band compares like with like only if every scale runs the same
schedule shape (with a cosine schedule the mid-run loss of a long run sits above
the final loss of a short one). The monitor only watches; it never stops a trial.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from labcoat import spec, store
from labcoat.store import Attempt, Experiment, Trial

RULE = "scaling.off_path"
MIN_SCALES = 3  # distinct finished smaller scales before a band is drawn
PATIENCE = 3  # consecutive points outside the band before alerting
POINTS_PER_CURVE = 60  # finished curves are thinned to this many log-spaced steps
BOOTSTRAP = 300  # replicates of the band: enough for 95% percentiles, ~1 s to fit
CHECK_SECONDS = 2.0  # a watched trial's new points are compared at most this often
ALERT_SEQ = -1  # the alert's key in the alert table: one per attempt, idempotent


@dataclass
class _Watch:
    monitor: Any  # labcoat.scaling.LiveMonitor
    basis: str  # what the band was fitted on, for the message
    last_step: int = 0
    checked_at: float = 0.0
    alerted: bool = False


@dataclass
class Extrapolation:
    """Per-run state of the live check (built by the runner loop; inert without scales)."""

    experiment: Experiment
    variable: str | None = None
    metric: str = "loss"
    _watches: dict[int, _Watch | None] = field(default_factory=dict)  # attempt id -> watch
    _fits: dict[tuple[str, frozenset[int]], Any] = field(default_factory=dict)

    @classmethod
    def for_experiment(cls, experiment: Experiment) -> Extrapolation:
        out = cls(experiment)
        if experiment.design_yaml:
            design = spec.parse_design(experiment.design_yaml, f"design of {experiment.name}")
            if design.scales:
                out.variable, _ = spec.scale_variable(design)
                out.metric = spec.fitted_metric(design)
        return out

    def check(self, session: Session, trial: Trial, attempt: Attempt, *,
              final: bool = False) -> tuple[list[dict[str, Any]], str | None]:
        """(new off-path alerts, at most one per attempt; no note): see `_alerts`."""
        return self._alerts(session, trial, attempt, final=final), None

    def _alerts(self, session: Session, trial: Trial, attempt: Attempt, *,
                final: bool) -> list[dict[str, Any]]:
        """New off-path alerts for this running attempt (at most one, once), already
        written to the alert table. final: the process has exited (check now, whatever
        the throttle says)."""
        if self.variable is None:
            return []
        watch = self._watch(session, trial, attempt)
        if watch is None or watch.alerted:
            return []
        now = time.monotonic()
        if now - watch.checked_at < CHECK_SECONDS and not final:
            return []
        watch.checked_at = now
        points = [p for p in store.metric_points(session, [trial.id], self.metric)
                  if p.step > watch.last_step and p.step >= 1]
        if not points:
            return []
        watch.last_step = points[-1].step
        watch.monitor.extend([p.step for p in points], [p.value for p in points])
        departure = watch.monitor.departure
        if departure is None:
            return []
        watch.alerted = True
        side = "above" if departure.direction == "above" else "below"
        worse = "worse" if side == "above" else "better"
        alert = {
            "trial_id": trial.id, "attempt_id": attempt.id, "seq": ALERT_SEQ,
            "step": departure.step, "rule": RULE, "severity": "warning",
            "message": (f"{self.metric} {departure.loss:.4g} at step {departure.step} is "
                        f"{side} the 95% band [{departure.low:.4g}, {departure.high:.4g}] "
                        f"predicted from {watch.basis} ({PATIENCE} points in a row, to step "
                        f"{departure.confirmed_step}): {worse} than the scaling law expects"),
            "evidence": {"step": departure.step, "confirmed_step": departure.confirmed_step,
                         "direction": side, "loss": departure.loss, "predicted": departure.point,
                         "low": departure.low, "high": departure.high,
                         "variable": self.variable},
            "time": time.time(),
        }
        store.insert_alerts(session, [alert])
        return [alert]

    def _watch(self, session: Session, trial: Trial, attempt: Attempt) -> _Watch | None:
        current = self._watches.get(attempt.id)
        if current is not None:
            return current
        x = spec.numeric_param((trial.params or {}).get(self.variable))
        if x is None:
            return None
        done = [t for t in self.experiment.trials
                if t.arm == trial.arm and t.status == "done" and t.id != trial.id
                and spec.numeric_param((t.params or {}).get(self.variable)) is not None]
        if any(float(t.params[self.variable]) >= x for t in done):
            self._watches[attempt.id] = None  # a finished trial is as large: not an extrapolation
            return None
        # Trials that themselves left their band do not draw the next one.
        off_path = {a.trial_id for a in store.alerts(session, [t.id for t in done])
                    if a.rule == RULE}
        finished = [t for t in done if t.id not in off_path]
        if len({float(t.params[self.variable]) for t in finished}) < MIN_SCALES:
            return None  # not yet: check again next poll
        fitted = self._fit(session, trial.arm, finished)
        if fitted is None:
            self._watches[attempt.id] = None
            return None
        from labcoat.scaling import LiveMonitor

        tokens = _tokens_per_step(trial)
        monitor = LiveMonitor(fitted, N=x, tokens_per_step=tokens, patience=PATIENCE)
        sizes = sorted({float(t.params[self.variable]) for t in finished})
        basis = (f"{len(finished)} finished trial(s) at {self.variable} "
                 f"{', '.join(f'{s:g}' for s in sizes)}")
        watch = _Watch(monitor=monitor, basis=basis)
        self._watches[attempt.id] = watch
        return watch

    def _fit(self, session: Session, arm: str, finished: list[Trial]) -> Any:
        key = (arm, frozenset(t.id for t in finished))
        if key in self._fits:
            return self._fits[key]
        from labcoat.scaling import ScalingWarning, fit

        n, d, y = [], [], []
        for t in finished:
            curve = [(p.step, p.value) for p in store.metric_points(session, [t.id], self.metric)
                     if p.step >= 1 and math.isfinite(p.value) and p.value > 0]
            for step, value in _thin(curve):
                n.append(float(t.params[self.variable]))
                d.append(step * _tokens_per_step(t))
                y.append(value)
        result = None
        if len(y) > 10:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ScalingWarning)
                try:
                    result = fit(N=n, D=d, loss=y, form="chinchilla", bootstrap=BOOTSTRAP,
                                 seed=0, starts=64, warn=False)
                except ValueError:
                    result = None
        self._fits[key] = result
        return result


def _thin(curve: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """At most POINTS_PER_CURVE points, log-spaced in step (early steps change fastest)."""
    if len(curve) <= POINTS_PER_CURVE:
        return curve
    steps = np.array([s for s, _ in curve], dtype=float)
    wanted = np.geomspace(steps[0], steps[-1], POINTS_PER_CURVE)
    idx = sorted(set(np.searchsorted(steps, wanted).clip(0, len(curve) - 1).tolist()))
    return [curve[i] for i in idx]


def _tokens_per_step(trial: Trial) -> float:
    value = spec.numeric_param((trial.params or {}).get("tokens_per_step"))
    return value if value is not None and value > 0 else 1.0
