"""Online change detection on step times: which phase of which rank got slower, from when.

A step's phase durations on a shared machine are heavy-tailed: most steps sit near the
median and one in ten or so is hit by a descheduling that adds a time slice (5-20 ms)
to whichever phase was running. A mean-based CUSUM on such data alarms on bursts of
those spikes; so the detector counts exceedances instead of summing sizes:

1. Baseline: the phase's median and its 90th percentile over the last `window` steps
   before the current excursion (robust to the spikes themselves; refreshed as the run
   goes, so a slow drift is absorbed).
2. Each step is an exceedance when it is above that percentile *and* at least
   `min_effect_s` above the median (tiny phases never alarm on microseconds).
3. A Bernoulli CUSUM (Reynolds & Stoumbos 1999) of the log-likelihood ratio of an
   exceedance rate `p1` against the baseline's `p0` (at most 1 - quantile):
   S_t = max(0, S_{t-1} + log(p1/p0) if exceeded else log((1-p1)/(1-p0))). It alarms at
   S_t >= threshold, and the change point is the step after the last reset (the CUSUM's
   maximum-likelihood estimate, Page 1954). With p0 = 0.1, p1 = 0.5 and threshold 12,
   about eight consecutive exceedances alarm; isolated spikes never do.
4. Confirmation: the median since the change point exceeds the baseline median by
   `min_effect_s` and by `min_share` of the step's median time; a burst of spikes that
   leaves the median in place is not a slow step.

`slow_steps` runs this per rank and phase against the rank's own history and against the
median of the other ranks at the same steps (a rank slower than its peers), and then
attributes: a slowdown in a wait phase (the gradient all-reduce's wait) that coincides
with another rank's slowdown in a compute phase is that rank's, not the waiting one's;
and a slowdown that the rank's own wait for a CPU explains (the time its training thread
sat on a run queue while other processes held the cores: `busy`) is the machine's, not
the run's. On a shared machine that wait is the usual cause of a sustained +2-5 ms on
a 1 ms phase, which no detector on the phase times alone can tell from a finding.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True, kw_only=True)
class SlowStepRule:
    """Settings of the slow-step detector (the defaults are labcoat's alarm).

    warmup: steps ignored at the start (allocator, caches, the first compile).
    window: baseline steps (the last ones before the current excursion).
    min_baseline: steps a baseline needs before anything is judged.
    quantile: an exceedance is above this quantile of the baseline (p0 = 1 - quantile).
    p1: the exceedance rate the CUSUM is tuned to detect.
    threshold: the CUSUM's alarm level (log-likelihood ratio).
    min_effect_s: the smallest slowdown reported, in seconds per step.
    min_share: ... and as a share of the median step time.
    coincide: steps within which a wait and another rank's compute change coincide.
    busy_share: a slowdown is the machine's when the rank's wait for a CPU rose by at least
        this share of it over the same steps.
    """

    warmup: int = 20
    window: int = 100
    min_baseline: int = 30
    quantile: float = 0.9
    p1: float = 0.5
    threshold: float = 12.0
    min_effect_s: float = 0.002
    min_share: float = 0.05
    coincide: int = 30
    busy_share: float = 0.5

    def __post_init__(self) -> None:
        if not 0.5 <= self.quantile < 1:
            raise ValueError(f"quantile={self.quantile} must be in [0.5, 1)")
        if not 1 - self.quantile < self.p1 < 1:
            raise ValueError(f"p1={self.p1} must be in (1 - quantile, 1)")
        if self.threshold <= 0 or self.min_effect_s < 0 or self.min_share < 0:
            raise ValueError("threshold must be > 0, min_effect_s and min_share >= 0")
        if self.warmup < 0 or self.min_baseline < 5 or self.window < self.min_baseline:
            raise ValueError("need warmup >= 0, min_baseline >= 5 and window >= min_baseline")


@dataclass(frozen=True)
class Shift:
    """A sustained slowdown of one series: indices into it, and seconds per step."""

    start: int  # first slow step (the change point)
    detected: int  # the step at which the alarm fired
    before: float  # baseline median
    after: float  # median from `start` to `detected`

    @property
    def delta(self) -> float:
        return self.after - self.before


def bernoulli_cusum(exceeded: np.ndarray, p0: float, p1: float) -> tuple[np.ndarray, np.ndarray]:
    """The upper CUSUM of Bernoulli exceedances and, at each step, where its run began.

    exceeded: (n,) bool. Returns S: (n,) with S_t = max(0, S_{t-1} + llr_t), S_{-1} = 0,
    and start: (n,) the first index of the run that S_t sums (t + 1 where S_t = 0).
    Equivalently S_t = max(0, max_j sum_{i=j..t} llr_i) (Lindley's recursion unrolled).
    """
    up, down = math.log(p1 / p0), math.log((1 - p1) / (1 - p0))
    llr = np.where(np.asarray(exceeded, dtype=bool), up, down)
    s = np.empty(len(llr))
    start = np.empty(len(llr), dtype=np.int64)
    total, begin = 0.0, 0
    for t, v in enumerate(llr):
        total += v
        if total <= 0:
            total, begin = 0.0, t + 1
        s[t], start[t] = total, begin
    return s, start


def detect_shift(x: Sequence[float] | np.ndarray, *, step_time: float = 0.0,
                 rule: SlowStepRule | None = None) -> Shift | None:
    """The first sustained slowdown of series `x` (seconds per step), or None.

    x: (n,) one phase's durations at consecutive steps (NaN: not measured, skipped).
    step_time: the run's median step time, for `rule.min_share`.
    """
    rule = rule or SlowStepRule()
    x = np.asarray(x, dtype=float)
    p0 = 1 - rule.quantile
    up, down = math.log(rule.p1 / p0), math.log((1 - rule.p1) / (1 - p0))
    floor = max(rule.min_effect_s, rule.min_share * step_time)
    total, begin = 0.0, rule.warmup
    baseline: tuple[float, float] | None = None
    refreshed = -1
    for t in range(rule.warmup, len(x)):
        if total == 0.0 and (baseline is None or t - refreshed >= rule.window // 4):
            past = x[max(rule.warmup, t - rule.window):t]
            past = past[np.isfinite(past)]
            if len(past) >= rule.min_baseline:
                baseline = (float(np.median(past)), float(np.quantile(past, rule.quantile)))
                refreshed = t
        if baseline is None or not np.isfinite(x[t]):
            continue
        median, high = baseline
        exceeded = x[t] > high and x[t] >= median + rule.min_effect_s
        total += up if exceeded else down
        if total <= 0:
            total, begin = 0.0, t + 1
            continue
        if total >= rule.threshold:
            after = x[begin:t + 1]
            after = float(np.median(after[np.isfinite(after)]))
            if after - median >= floor:
                return Shift(start=begin, detected=t, before=median, after=after)
    return None


@dataclass(frozen=True)
class SlowStep:
    """One alarm: `phase` of `rank` got `delta` seconds per step slower from `step`.

    against: "own history" or "other ranks". waits_for: for a wait, the rank it waited
    for. busy: where the rank's wait for a CPU explains the slowdown, by how much that wait
    rose (seconds per step): the machine was busy, the run is not the cause.
    """

    phase: str
    rank: int
    step: int
    detected: int
    before: float
    after: float
    against: str
    wait: bool = False
    waits_for: int | None = None
    busy: float | None = None

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def cause(self) -> bool:
        """A slowdown of the run itself: neither a wait for another rank nor the machine's."""
        return not self.wait and self.busy is None

    def message(self) -> str:
        what = f"{self.phase} {_ms(self.delta)}/step on rank {self.rank} from step {self.step}"
        base = (f"({_ms(self.before, sign=False)} -> {_ms(self.after, sign=False)}, "
                f"against {self.against}; seen at step {self.detected})")
        if self.waits_for is not None:
            return f"{what}: waiting for rank {self.waits_for} {base}"
        if self.busy is not None:
            return (f"{what}: the machine was busy (this rank waited {_ms(self.busy)}/step "
                    f"more for a CPU) {base}")
        return f"{what} {base}"


def _ms(seconds: float, *, sign: bool = True) -> str:
    ms = seconds * 1e3
    text = f"{ms:.3g} ms" if abs(ms) < 100 else f"{ms:.0f} ms"
    return ("+" if sign and ms >= 0 else "") + text


def slow_steps(times: Mapping[int, Mapping[str, Mapping[int, float]]], *,
               waits: Sequence[str] = ("comm",), totals: Sequence[str] = ("total", "other"),
               busy: str | None = None, rule: SlowStepRule | None = None) -> list[SlowStep]:
    """Slow-step alarms of a run: per rank and phase, against the rank's own history and
    against the other ranks; waits explained by another rank's compute are attributed.

    times: rank -> phase -> step -> seconds. Phases in `totals` (the step's wall time and
    the remainder) are not judged: a slow phase shows in them too. busy: the name in
    `times` of each step's wait for a CPU (not judged; an alarm it explains is marked
    `busy`). Returns one alarm per (rank, phase) at most, the causes first, in step order.
    """
    rule = rule or SlowStepRule()
    steps = sorted({s for phases in times.values() for series in phases.values()
                    for s in series})
    if not steps:
        return []
    index = {s: i for i, s in enumerate(steps)}
    ranks = sorted(times)
    names = sorted({p for phases in times.values() for p in phases} - set(totals) - {busy})
    grid = np.full((len(ranks), len(names), len(steps)), np.nan)
    for r, rank in enumerate(ranks):
        for p, name in enumerate(names):
            for s, v in times[rank].get(name, {}).items():
                grid[r, p, index[s]] = v
        present = np.isfinite(grid[r]).any(axis=0)  # a step the rank timed: absent phase = 0
        grid[r][:, present] = np.nan_to_num(grid[r][:, present])
    step_time = _median_step(times, ranks, totals)
    waited = np.full((len(ranks), len(steps)), np.nan)
    for r, rank in enumerate(ranks):
        for s, v in (times[rank].get(busy, {}) if busy else {}).items():
            waited[r, index[s]] = v
    found: dict[tuple[int, str], SlowStep] = {}
    for r, rank in enumerate(ranks):
        for p, name in enumerate(names):
            series = [(grid[r, p], "own history")]
            if len(ranks) > 1:
                others = np.delete(grid[:, p], r, axis=0)
                with warnings.catch_warnings():  # steps no other rank timed: NaN, quietly
                    warnings.simplefilter("ignore", RuntimeWarning)
                    peer = np.nanmedian(others, axis=0) if np.isfinite(others).any() else None
                if peer is not None:
                    series.append((grid[r, p] - peer, "other ranks"))
            candidates = [(shift, against, busy_rise(waited[r], shift, rule))
                          for x, against in series
                          for shift in [_first_cause(x, waited[r], step_time, rule)]
                          if shift is not None]
            if not candidates:
                continue
            # the earliest cause; a busy machine's slowdown only where no cause was seen
            shift, against, rise = min(candidates, key=lambda c: (c[2] is not None,
                                                                  c[0].detected))
            found[(rank, name)] = SlowStep(
                phase=name, rank=rank, step=steps[shift.start], detected=steps[shift.detected],
                before=shift.before, after=shift.after, against=against, wait=name in waits,
                busy=rise)
    return _attribute(list(found.values()), rule)


def _first_cause(x: np.ndarray, waited: np.ndarray, step_time: float,
                 rule: SlowStepRule) -> Shift | None:
    """The first shift of `x` that the wait for a CPU does not explain, else the first
    shift (the machine's), else None: a busy spell early in a run does not hide a real
    slowdown later in the same phase. After a busy shift the search goes on from the step
    after its detection (no second warmup: the baseline is the steps since)."""
    first, offset = None, 0
    while offset < len(x):
        shift = detect_shift(x[offset:], step_time=step_time,
                             rule=rule if offset == 0 else replace(rule, warmup=0))
        if shift is None:
            return first
        shift = Shift(start=shift.start + offset, detected=shift.detected + offset,
                      before=shift.before, after=shift.after)
        if busy_rise(waited, shift, rule) is None:
            return shift
        first = first or shift
        offset = shift.detected + 1
    return first


def busy_rise(waited: np.ndarray, shift: Shift, rule: SlowStepRule | None = None
              ) -> float | None:
    """How much the wait for a CPU rose over `shift`'s steps, where it explains at least
    `rule.busy_share` of the slowdown; else None (or where the wait was not measured).

    waited: (n,) seconds per step the training thread waited on a run queue, aligned with
    the series `shift` indexes. Before: the median of up to `rule.window` steps before the
    change point; after: from the change point to the detection, as the shift's own.
    """
    rule = rule or SlowStepRule()
    before = waited[max(rule.warmup, shift.start - rule.window):shift.start]
    after = waited[shift.start:shift.detected + 1]
    before, after = before[np.isfinite(before)], after[np.isfinite(after)]
    if not before.size or not after.size:
        return None
    rise = float(np.median(after) - np.median(before))
    return rise if rise > 0 and rise >= rule.busy_share * shift.delta else None


def _median_step(times: Mapping[int, Mapping[str, Mapping[int, float]]], ranks: list[int],
                 totals: Sequence[str]) -> float:
    values = [v for rank in ranks for v in times[rank].get(totals[0], {}).values()] \
        if totals else []
    return float(np.median(values)) if values else 0.0


def _attribute(alarms: list[SlowStep], rule: SlowStepRule) -> list[SlowStep]:
    """A wait that began within `rule.coincide` steps of another rank's compute slowdown
    is marked as waiting for that rank (kept, but never reported as a cause)."""
    causes = [a for a in alarms if a.cause]
    out = [a for a in alarms if not a.wait]
    for a in alarms:
        if not a.wait:
            continue
        near = [c for c in causes if c.rank != a.rank and abs(c.step - a.step) <= rule.coincide]
        if near:
            culprit = min(near, key=lambda c: abs(c.step - a.step))
            a = SlowStep(**{**a.__dict__, "waits_for": culprit.rank})
        out.append(a)
    return sorted(out, key=lambda a: (not a.cause, a.step, a.rank, a.phase))
