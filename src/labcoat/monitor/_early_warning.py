"""Early warning: while a trial trains, compare its loss and eval curves with reference
trials and say when it is behind them beyond seed noise.

References: the finished trials of the same arm and scale in this experiment (its
other seeds), or, when the design names an earlier experiment (`reference: EXP`),
that experiment's finished trials of the same arm (else of its control arm; of the
same scale name when it has one). At least
`MIN_REFERENCES` are needed; trials this rule flagged, or with an error or
critical guard alert, are left out.

The rule (labcoat.stats.prediction_band): at matched steps the trial is one more
run of the reference process, so its value should lie in the prediction band
mean +- t(K-1) * sd * sqrt(1 + 1/K) of the K reference runs at that step. The
band is as wide as the seeds' spread *at that step*: early in training, when
seeds disagree most, a trial lagging the reference mean is usually inside it
("expected early underperformance"). A trial outside the 95% band of one look
alone but inside the band over all looks is what a single glance would call
behind; it is noted once in the run display, not alerted. Looks are planned in
advance: `LOOKS` log-spaced steps per signal (loss,
and the eval score when items are logged during training), and the 5% false
alarm rate per trial is split over signals and looks (Bonferroni), so a clean
seed is flagged with probability at most 5% however often the runner polls.
One look outside the band on the bad side (loss above, eval score below) raises
one alert per attempt (rule "reference.behind"), shown live like a guard alert
and listed by `labcoat status` and `labcoat report`. Ahead of the band is not
an alarm. The check only watches; it never stops a trial.

Caveats: the band assumes seed-to-seed values at a step are roughly normal and
that the reference trials ran the same schedule (a different step count
stretches a cosine schedule, and matched steps stop being comparable).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from labcoat import spec, store
from labcoat.store import Attempt, Experiment, Trial

RULE = "reference.behind"
MIN_REFERENCES = 3  # below this a t band on K - 1 = 1 degree of freedom is useless
FAMILY_ALPHA = 0.05  # false-alarm rate per trial, over all signals and looks
LOOKS = 10  # planned looks per signal, log-spaced over the references' steps
CHECK_SECONDS = 2.0  # a watched trial is compared at most this often (and at its exit)
ALERT_SEQ = -2  # the alert's key in the alert table: one per attempt (-1 is scaling's)
EVAL = "eval"  # the eval signal: mean over tasks of the mean item score at a step


@dataclass
class Signal:
    """One curve of the references, thinned to the planned looks.

    steps: (looks,); low, high, mean, sd: (looks,) band at those steps.
    """

    name: str
    lower_is_better: bool
    steps: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    sd: np.ndarray
    n_runs: int
    single_low: np.ndarray  # the band of one look at 95%, without the split over looks
    single_high: np.ndarray


@dataclass
class _Watch:
    signals: list[Signal]
    basis: str
    looked: dict[str, int] = field(default_factory=dict)  # signal -> looks already made
    checked_at: float = 0.0
    alerted: bool = False
    noted: bool = False


@dataclass
class EarlyWarning:
    """Per-run state of the check (built by the runner loop)."""

    experiment: Experiment
    metric: str = "loss"
    reference: Experiment | None = None  # a named earlier experiment, else None (same design)
    _watches: dict[int, _Watch | None] = field(default_factory=dict)  # attempt id -> watch
    _bands: dict[tuple[str, frozenset[int]], list[Signal]] = field(default_factory=dict)

    @classmethod
    def for_experiment(cls, session: Session, experiment: Experiment) -> EarlyWarning:
        """The check for `experiment`; the design's `reference: EXP` must name an
        experiment in the store (LabcoatError listing the known ones otherwise)."""
        out = cls(experiment)
        if experiment.design_yaml:
            design = spec.parse_design(experiment.design_yaml, f"design of {experiment.name}")
            out.metric = spec.fitted_metric(design)
            if design.reference:
                out.reference = store.find_experiment(session, design.reference)
        return out

    def check(self, session: Session, trial: Trial, attempt: Attempt, *,
              final: bool = False) -> tuple[list[dict[str, Any]], str | None]:
        """(new alerts, already written to the alert table; a one-time note for the
        display, or None). final: the process has exited (check now)."""
        watch = self._watch(session, trial, attempt)
        if watch is None or watch.alerted:
            return [], None
        now = time.monotonic()
        if now - watch.checked_at < CHECK_SECONDS and not final:
            return [], None
        watch.checked_at = now
        note = None
        for signal in watch.signals:
            curve = _curve(session, trial.id, signal.name, self.metric)
            if not curve:
                continue
            last = max(curve)
            done = watch.looked.get(signal.name, 0)
            for i in range(done, len(signal.steps)):
                step = int(signal.steps[i])
                if step > last:
                    break
                watch.looked[signal.name] = i + 1
                value = _at(curve, step)
                if value is None:
                    continue  # no value near this look: the look is spent, conservatively
                verdict = _judge(signal, i, value)
                if verdict == "behind":
                    watch.alerted = True
                    return [self._alert(session, trial, attempt, signal, i, value,
                                        watch.basis)], None
                if verdict == "lagging" and not watch.noted:
                    watch.noted = True
                    early = step <= signal.steps[-1] / 2
                    note = (f"{_label(signal, self.metric)} {value:.4g} at step {step} is "
                            f"behind a single-look 95% band [{signal.single_low[i]:.4g}, "
                            f"{signal.single_high[i]:.4g}] but inside the band over all "
                            f"{len(signal.steps)} looks [{signal.low[i]:.4g}, "
                            f"{signal.high[i]:.4g}]: "
                            + ("expected early underperformance (seeds spread widely early)"
                               if early else "within seed noise") + ", not an alarm")
        return [], note

    def _alert(self, session: Session, trial: Trial, attempt: Attempt, signal: Signal,
               i: int, value: float, basis: str) -> dict[str, Any]:
        step = int(signal.steps[i])
        side = "above" if signal.lower_is_better else "below"
        alert = {
            "trial_id": trial.id, "attempt_id": attempt.id, "seq": ALERT_SEQ,
            "step": step, "rule": RULE, "severity": "warning",
            "message": (f"{_label(signal, self.metric)} {value:.4g} at step {step} is {side} "
                        f"the reference band [{signal.low[i]:.4g}, {signal.high[i]:.4g}] "
                        f"(mean {signal.mean[i]:.4g} of {basis}): behind the reference "
                        f"beyond seed noise ({100 * (1 - FAMILY_ALPHA):.3g}% band over "
                        f"{len(signal.steps)} planned looks)"),
            "evidence": {"signal": signal.name, "step": step, "value": value,
                         "mean": float(signal.mean[i]), "low": float(signal.low[i]),
                         "high": float(signal.high[i]), "sd": float(signal.sd[i]),
                         "references": signal.n_runs, "looks": len(signal.steps)},
            "time": time.time(),
        }
        store.insert_alerts(session, [alert])
        return alert

    def _watch(self, session: Session, trial: Trial, attempt: Attempt) -> _Watch | None:
        if attempt.id in self._watches:
            return self._watches[attempt.id]
        references = self._references(session, trial)
        if len(references) < MIN_REFERENCES:
            return None  # not yet: a seed of the arm may finish; look again next poll
        key = (trial.arm, frozenset(t.id for t in references))
        if key not in self._bands:
            self._bands[key] = self._signals(session, references)
        signals = self._bands[key]
        if not signals:
            self._watches[attempt.id] = None
            return None
        where = f"{self.reference.name}" if self.reference else "this experiment"
        arms = sorted({t.arm for t in references})
        basis = f"{len(references)} finished trial(s) of {where} ({', '.join(arms)})"
        self._watches[attempt.id] = _Watch(signals, basis)
        return self._watches[attempt.id]

    def _references(self, session: Session, trial: Trial) -> list[Trial]:
        source = self.reference or self.experiment
        done = [t for t in source.trials if t.status == "done" and t.id != trial.id]
        if self.reference is None:
            done = [t for t in done if t.arm == trial.arm and t.scale == trial.scale]
        else:
            done = _matching_arm(self.reference, done, trial.arm)
            done = [t for t in done if t.scale == trial.scale] or done
        flagged = {a.trial_id for a in store.alerts(session, [t.id for t in done])
                   if a.rule == RULE or a.severity in ("error", "critical")}
        return [t for t in done if t.id not in flagged]

    def _signals(self, session: Session, references: list[Trial]) -> list[Signal]:
        from labcoat import stats

        names = [self.metric, EVAL]
        curves = {name: [_curve(session, t.id, name, self.metric) for t in references]
                  for name in names}
        usable = {n: c for n, c in curves.items() if sum(1 for x in c if x) >= MIN_REFERENCES}
        out = []
        for name, per_run in usable.items():
            runs = [c for c in per_run if c]
            shared = sorted(set.intersection(*(set(c) for c in runs)))
            steps = _looks([s for s in shared if s >= 1])
            if steps.size == 0:
                continue
            values = np.array([[c[s] for s in steps] for c in runs])
            band = stats.prediction_band(values, ci=1 - FAMILY_ALPHA / len(usable),
                                         looks=steps.size)
            single = stats.prediction_band(values, ci=1 - FAMILY_ALPHA)
            out.append(Signal(name, name != EVAL, steps, band.mean, band.low, band.high,
                              band.sd, band.n_runs, single.low, single.high))
        return out


def _matching_arm(reference: Experiment, trials: list[Trial], arm: str) -> list[Trial]:
    """The reference experiment's trials of `arm`, else of its control arm, else all."""
    same = [t for t in trials if t.arm == arm]
    if same:
        return same
    control = None
    if reference.design_yaml:
        design = spec.parse_design(reference.design_yaml, f"design of {reference.name}")
        control = design.control
    return [t for t in trials if t.arm == control] or trials


def _curve(session: Session, trial_id: int, name: str, metric: str) -> dict[int, float]:
    """step -> value of one trial's signal (finite values only)."""
    if name != EVAL:
        return {p.step: p.value for p in store.metric_points(session, [trial_id], name)
                if p.value is not None and math.isfinite(p.value)}
    per_step: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in store.eval_items(session, [trial_id]):
        if row.variant == "" and row.score is not None and math.isfinite(row.score):
            per_step[row.step][row.task].append(row.score)
    return {step: float(np.mean([np.mean(v) for v in tasks.values()]))
            for step, tasks in per_step.items()}


def _looks(steps: list[int]) -> np.ndarray:
    """At most LOOKS of the shared steps, log-spaced (curves change fastest early)."""
    if len(steps) <= LOOKS:
        return np.array(steps, dtype=int)
    wanted = np.geomspace(steps[0], steps[-1], LOOKS)
    idx = np.unique(np.searchsorted(steps, wanted).clip(0, len(steps) - 1))
    return np.array([steps[i] for i in idx], dtype=int)


def _at(curve: dict[int, float], step: int) -> float | None:
    """The trial's value at `step`, or linearly between its two nearest logged steps."""
    if step in curve:
        return curve[step]
    before = [s for s in curve if s < step]
    after = [s for s in curve if s > step]
    if not before or not after:
        return None
    a, b = max(before), min(after)
    return curve[a] + (curve[b] - curve[a]) * (step - a) / (b - a)


def _judge(signal: Signal, i: int, value: float) -> str:
    """"behind" (outside the band over all looks, on the bad side), "lagging" (outside
    the band of this one look alone, inside the band over all looks: what a single
    glance would call behind, yet within the noise of watching a whole curve), else
    "fine"."""
    if signal.lower_is_better:
        return ("behind" if value > signal.high[i] else
                "lagging" if value > signal.single_high[i] else "fine")
    return ("behind" if value < signal.low[i] else
            "lagging" if value < signal.single_low[i] else "fine")


def _label(signal: Signal, metric: str) -> str:
    return "eval score" if signal.name == EVAL else metric
