"""A short torch.profiler window, captured in the trial when one of its phases gets slower
(off by default: ``time_phases(..., profile_on_slow=N)`` or ``LABCOAT_PROFILE_ON_SLOW=N``).

The slow-step alarm proper runs in the runner (`labcoat.monitor`), outside the trial's
process, where no profiler can be switched on. So the timer judges its own rank's recent
phase times with the alarm's detector (`stats.detect_shift`, against this rank's own
history; the other ranks' times are the runner's) every `check_every` steps. On the first
alarm it profiles the next N steps with each phase marked (``record_function`` ranges
``labcoat.phase.<name>``: data, forward, backward, optimizer), writes the chrome trace
beside the run's journal and journals a ``phase.profile`` event naming the file; then it
stops watching (one window a run).

Cost: off, one attribute test per hook. On, a screen every `check_every` steps (the
median of the last few steps of each phase against the window's, numpy on a
(steps, phases) array), and the detector proper only on a phase that passes it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from labcoat import environment
from labcoat.errors import LabcoatError
from labcoat.journal import CPU_WAIT, Events
from labcoat.sdk import Run

if TYPE_CHECKING:
    from labcoat import stats

TOTALS = ("total", "other")  # the step's wall time and its untimed rest: not judged
MARK = "labcoat.phase."  # record_function names in the trace: labcoat.phase.data, ...


@dataclass(frozen=True, kw_only=True)
class ProfileOnSlow:
    """When and what to profile once a phase gets slower.

    steps: steps profiled after the alarm (the window).
    check_every: steps between two looks at the recent phase times.
    rule: the detector's settings (`stats.SlowStepRule`; the runner's alarm's by default).
    directory: where the trace goes (None: beside the run's journal).
    """

    steps: int = 5
    check_every: int = 20
    rule: stats.SlowStepRule = field(default_factory=lambda: _stats().SlowStepRule())
    directory: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        for name in ("steps", "check_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LabcoatError(f"ProfileOnSlow({name}={value!r}) must be an int >= 1")


def profile_setting(value: int | ProfileOnSlow | None) -> ProfileOnSlow | None:
    """`value` as a setting (an int N: N steps, the rest default; 0: off), or when None,
    ``$LABCOAT_PROFILE_ON_SLOW`` (N, or unset/0: off)."""
    where = "time_phases(profile_on_slow=...)"
    if value is None:
        raw = os.environ.get(environment.PROFILE_ON_SLOW, "").strip()
        if not raw:
            return None
        if not raw.isdigit():
            raise LabcoatError(f"{environment.PROFILE_ON_SLOW}={raw!r} must be a number of "
                               "steps to profile (e.g. 5), or 0 for off")
        value, where = int(raw), environment.PROFILE_ON_SLOW
    if isinstance(value, ProfileOnSlow):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LabcoatError(f"{where}: {value!r} must be a number of steps (an int >= 0; 0: "
                           "off) or a ProfileOnSlow")
    return ProfileOnSlow(steps=value) if value else None


class PhaseMarks:
    """``record_function`` ranges for the phases, open while a profile is captured."""

    def __init__(self) -> None:
        self._open: dict[str, Any] = {}

    def begin(self, name: str) -> None:
        self.end(name)
        mark = torch.profiler.record_function(MARK + name)
        mark.__enter__()
        self._open[name] = mark

    def end(self, name: str) -> None:
        mark = self._open.pop(name, None)
        if mark is not None:
            mark.__exit__(None, None, None)

    def end_all(self) -> None:
        for name in list(self._open):
            self.end(name)


class SlowWatch:
    """Watches a timer's records; on the first slowdown, profiles `setting.steps` steps.

    profiles: the trace files written (at most one).
    """

    def __init__(self, setting: ProfileOnSlow, run: Run | None, *, cuda: bool) -> None:
        directory = setting.directory
        if directory is None and run is None:
            raise LabcoatError("profile_on_slow needs somewhere to write the trace: pass "
                               "run=... (the trace goes beside its journal) or "
                               "ProfileOnSlow(directory=...)")
        self.setting = setting
        self.run = run
        self.directory = Path(directory) if directory is not None else run.journal.parent  # type: ignore[union-attr]
        self.rank = run.rank if run is not None else 0
        self.cuda = cuda
        self.rule = dataclasses.replace(setting.rule, warmup=0)  # the run's warmup skipped here
        # an alarm needs about this many exceedances in a row (the CUSUM's threshold)
        self.recent = max(3, math.ceil(setting.rule.threshold / math.log(
            setting.rule.p1 / (1 - setting.rule.quantile))))
        self.span = setting.rule.window + setting.check_every + 2 * self.recent
        self.profiles: list[Path] = []
        self.marks: PhaseMarks | None = None
        self._seen = 0
        self._left = 0
        self._profiler: Any = None
        self._alarm: stats.SlowStep | None = None
        self._first = 0
        self._done = False
        self.ending = False  # the run is closing: no window opens on the steps it journals

    def after_step(self, records: Sequence[tuple[int, dict[str, float]]]) -> PhaseMarks | None:
        """Called once a step is journaled (`records` ends with it); returns the marks the
        timer opens while profiling (None: not profiling)."""
        if self._done:
            return None
        if self._profiler is not None:
            self._left -= 1
            if self._left <= 0:
                self._stop(records[-1][0])
            return self.marks
        self._seen += 1
        if self.ending:
            return None
        rule = self.setting.rule
        if (self._seen % self.setting.check_every
                or self._seen < rule.warmup + rule.min_baseline + self.recent):
            return None
        alarm = self._check(records, min(self._seen - rule.warmup, self.span))
        if alarm is not None:
            self._start(alarm, records[-1][0])
        return self.marks

    def close(self, step: int) -> None:
        """The run ends: a window still open is written with the steps it has."""
        if self._profiler is not None:
            self._stop(step)
        self._done = True

    def _check(self, records: Sequence[tuple[int, dict[str, float]]],
               span: int) -> stats.SlowStep | None:
        window = list(itertools.islice(reversed(records), span))[::-1]  # the last `span`
        names = sorted({n for _, seconds in window for n in seconds} - {*TOTALS, CPU_WAIT})
        if not names or len(window) <= self.recent + self.rule.min_baseline:
            return None
        x = np.array([[seconds.get(n, 0.0) for n in names] for _, seconds in window])
        step_time = float(np.median([s.get("total", 0.0) for _, s in window]))
        waited = np.array([s.get(CPU_WAIT, np.nan) for _, s in window])  # a busy machine's
        floor = max(self.rule.min_effect_s, self.rule.min_share * step_time)
        # the screen: only a phase whose last steps sit `floor` above the window's median
        # can be a sustained slowdown; the detector proper judges those alone
        rise = np.median(x[-self.recent:], axis=0) - np.median(x[:-self.recent], axis=0)
        for p in np.flatnonzero(rise >= floor):
            shift = _stats().detect_shift(x[:, p], step_time=step_time, rule=self.rule)
            if shift is not None and _stats().busy_rise(waited, shift, self.rule) is None:
                return _stats().SlowStep(
                    phase=names[p], rank=self.rank, step=window[shift.start][0],
                    detected=window[shift.detected][0], before=shift.before,
                    after=shift.after, against="own history")
        return None

    def _start(self, alarm: stats.SlowStep, step: int) -> None:
        # the autograd profiler torch.profiler.profile drives, entered directly: the latter's
        # start() imports torch._inductor first (seconds, inside a training step)
        self._profiler = torch.autograd.profiler.profile(
            use_kineto=True, use_device="cuda" if self.cuda else None)
        self._profiler.__enter__()
        self._alarm, self._first = alarm, step + 1
        self._left = self.setting.steps + 1  # the step now under way is profiled in part
        self.marks = PhaseMarks()

    def _stop(self, step: int) -> None:
        profiler, self._profiler = self._profiler, None
        alarm = self._alarm
        assert alarm is not None
        if self.marks is not None:
            self.marks.end_all()
        self.marks = None
        self._done = True
        profiler.__exit__(None, None, None)
        name = f"profile-rank{self.rank}-step{self._first}.json"
        path = self.directory / name
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            profiler.export_chrome_trace(str(path))
        except OSError as e:  # a diagnostic that failed: say so, training goes on
            self._say(f"could not write the profile of {alarm.message()} to {path}: {e}",
                      level="warning", alarm=alarm, step=step, error=str(e))
            return
        self.profiles.append(path)
        self._say(f"{alarm.message()}; steps {self._first}-{step} profiled (torch.profiler) "
                  f"into {path}", level="info", alarm=alarm, step=step, file=name,
                  path=str(path), first_step=self._first, last_step=step)

    def _say(self, message: str, *, level: str, alarm: stats.SlowStep, step: int,
             **data: Any) -> None:
        print(f"labcoat: {message}", file=sys.stderr, flush=True)
        if self.run is not None and not self.run.finished:
            self.run.event(Events.PHASE_PROFILE, message, level=level, step=step,
                           phase=alarm.phase, rank=alarm.rank, from_step=alarm.step,
                           detected=alarm.detected, before_s=alarm.before,
                           after_s=alarm.after, **data)


def _stats() -> Any:
    """labcoat.stats, imported on first use: it loads scipy (0.7 s), which a training
    process that never slows down does not need."""
    from labcoat import stats

    return stats
