"""The step-time-by-phase section's data: where each trial's step time went, per rank.

`labcoat.torch.time_phases` journals every step's time by phase (data, forward, backward,
optimizer, comm, eval, checkpoint, a user's `run.phase` names, and `other`, the untimed
rest), and the step's wall time as `total`; the store keeps them as metric points
``phase_s/<phase>/rank<r>`` (`monitor.phase_arrays` reads them). This turns
them into what the reports show: per trial and rank the median time of each phase and its share of
the step time, the same medians before and after each slow-step alarm's step (alert rule
``phase.slow``), and a binned per-step series for a stacked chart. Experiments that time
no phase get no section (an empty dict), not an empty heading.

Medians, not means: on a shared machine a few steps stall for reasons of their own (another
process, the allocator), and one stall should not move the typical step. So the medians
of the phases do not add up to the median total; the share, which must add up, is each
phase's summed time over the summed step time.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from labcoat import store
from labcoat.journal import CPU_WAIT, STEP_PHASES, Events
from labcoat.monitor import phase_arrays
from labcoat.store import Experiment, Trial

BINS = 200  # at most this many points per phase in a chart's series
TOTAL, OTHER = "total", "other"  # the step's wall time; what no phase took


def step_phases(session: Session, experiment: Experiment, *, bins: int = BINS,
                trials: Sequence[Trial] | None = None) -> dict[str, Any]:
    """The section's data; {} when no trial of `experiment` (or of `trials`, some of its
    trials: a trial's own page) timed its phases.

    {"phases": [name, ...] (columns, in step order, `other` last),
     "trials": [{"key", "arm", "seed",
                 "ranks": [{"rank", "steps", "total_ms", "median_ms": {phase: ms},
                            "share": {phase: fraction of the summed step time},
                            "timed_steps": {phase: steps it was timed in}}],
                 "alarms": [{"step", "detected", "rank", "phase", "severity", "message",
                             "waits_for", "before_ms": {rank: {phase | "total": ms}},
                             "after_ms": {...}}],  # before: steps < step; after: >= step
                 "series": {rank: {"step": [x], "total": [ms], phase: [ms]}}}]}
    A series has at most `bins` points: each the median over consecutive steps of equal
    count (a phase not timed in a step counts 0 ms there, so the stack is a typical step).
    """
    trials = list(experiment.trials if trials is None else trials)
    times = phase_arrays(session, [t.id for t in trials])
    if not times:
        return {}
    alarms = _alarms(session, [t.id for t in trials if t.id in times])
    names = ({p for ranks in times.values() for per in ranks.values() for p in per}
             - {TOTAL, CPU_WAIT})  # the wait for a CPU overlaps the phases: not stacked
    order = [p for p in STEP_PHASES if p in names and p != OTHER]
    order += sorted(names - set(STEP_PHASES)) + ([OTHER] if OTHER in names else [])
    out = []
    for t in trials:
        if t.id not in times:
            continue
        ranks = times[t.id]
        out.append({
            "key": t.key, "arm": t.arm, "seed": t.seed,
            "ranks": [_summary(rank, ranks[rank], order) for rank in sorted(ranks)],
            "alarms": [{**a, **_before_after(ranks, a["step"], order)}
                       for a in alarms.get(t.id, [])],
            "series": {rank: _series(ranks[rank], order, bins) for rank in sorted(ranks)}})
    return {"phases": order, "trials": out}


Series = tuple[np.ndarray, np.ndarray]  # (steps, seconds), steps increasing


def _steps(per: Mapping[str, Series]) -> np.ndarray:
    """A rank's steps: those with a wall time, else those any phase was timed in."""
    if TOTAL in per:
        return per[TOTAL][0]
    return np.unique(np.concatenate([steps for steps, _ in per.values()]))


def _summary(rank: int, per: Mapping[str, Series], order: list[str]) -> dict[str, Any]:
    timed = [p for p in order if p in per and per[p][0].size]
    sums = {p: float(np.nansum(per[p][1])) for p in timed}
    whole = float(np.nansum(per[TOTAL][1])) if TOTAL in per else sum(sums.values())
    return {"rank": rank, "steps": int(_steps(per).size),
            "total_ms": _median_ms(per[TOTAL][1]) if TOTAL in per else None,
            "median_ms": {p: _median_ms(per[p][1]) for p in timed},
            "share": {p: s / whole if whole > 0 else None for p, s in sums.items()},
            "timed_steps": {p: int(per[p][0].size) for p in timed}}


def _before_after(ranks: Mapping[int, Mapping[str, Series]], step: int | None,
                  order: list[str]) -> dict[str, Any]:
    """Each rank's phase medians over the steps before `step` and from it on."""
    before: dict[int, dict[str, float | None]] = {}
    after: dict[int, dict[str, float | None]] = {}
    if step is None:
        return {"before_ms": before, "after_ms": after}
    for rank in sorted(ranks):
        per = ranks[rank]
        names = [p for p in [*order, TOTAL, CPU_WAIT] if p in per and per[p][0].size]
        before[rank] = {p: _median_ms(per[p][1][per[p][0] < step]) for p in names}
        after[rank] = {p: _median_ms(per[p][1][per[p][0] >= step]) for p in names}
    return {"before_ms": before, "after_ms": after}


def _series(per: Mapping[str, Series], order: list[str], bins: int
            ) -> dict[str, list[float | None]]:
    """Medians over `bins` runs of consecutive steps (see `step_phases`)."""
    steps = _steps(per)
    if steps.size == 0:
        return {"step": []}
    size = -(-steps.size // bins)  # steps per bin: ceil, so at most `bins` bins
    count = -(-steps.size // size)
    pad = count * size - steps.size

    def binned(values: np.ndarray) -> list[float | None]:
        grid = np.concatenate([values, np.full(pad, np.nan)]).reshape(count, size)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a bin of NaN only: None
            meds = np.nanmedian(grid, axis=1)
        return [None if not np.isfinite(m) else float(m) for m in meds]

    out: dict[str, list[float | None]] = {"step": binned(steps.astype(float))}
    for name in [TOTAL, *order]:
        if name not in per or not per[name][0].size:
            continue
        at, seconds = per[name]
        dense = np.full(steps.size, np.nan if name == TOTAL else 0.0)
        where = np.searchsorted(steps, at)
        known = (where < steps.size) & (steps[np.minimum(where, steps.size - 1)] == at)
        dense[where[known]] = seconds[known] * 1e3
        out[name] = binned(dense)
    return out


def _alarms(session: Session, trial_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Slow-step alarms (alert rule ``phase.slow``) by trial id, in step order."""
    out: dict[int, list[dict[str, Any]]] = {}
    for a in store.alerts(session, trial_ids):
        if a.rule != Events.PHASE_SLOW:
            continue
        ev = a.evidence or {}
        out.setdefault(a.trial_id, []).append({
            "step": a.step, "detected": ev.get("detected"), "rank": ev.get("rank"),
            "phase": ev.get("phase"), "severity": a.severity, "message": a.message,
            "waits_for": ev.get("waits_for"), "busy_s": ev.get("busy_s")})
    return out


def _median_ms(seconds: np.ndarray) -> float | None:
    finite = seconds[np.isfinite(seconds)]
    return float(np.median(finite)) * 1e3 if finite.size else None
