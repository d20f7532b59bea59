"""Where a multi-rank failure started: the rank that deviates from its peers.

In data-parallel training every rank runs the same loop, so their logs are
alike until one of them breaks; the others then fail *because* of it, later and
with secondary errors (collective timeouts, a launcher terminating them). The
evidence used here, strongest first:

- the launcher's own verdict: torchrun's "Root Cause (first observed failure)"
  block names the rank and its exit code;
- a straggler: a rank whose per-step durations (``412 ms/step``, ``step_time
  1.2s``) or line times lag its peers' from some step on, until its log ends;
- the rank missing from a collective timeout that every other rank reports
  (it never entered the collective);
- the rank whose log ends first: fewer steps than every peer, or silent while
  every peer still prints (timeouts, tracebacks).
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

_ROOT = re.compile(r"Root Cause \(first observed failure\)")
_FIELD = re.compile(r"^\s*(rank|exitcode|host|traceback)\s*:\s*(.*?)\s*$")
_ELASTIC_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
_SRUN = re.compile(r"^srun: error: (\S+): tasks? (\d+)(?:-\d+)?: (.*)$")
_BARRIER = re.compile(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier")
_DURATION = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s?(ns|us|µs|ms|milliseconds?|s|secs?|seconds?|mins?|minutes?)"
    r"(?![\w])")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "millisecond": 1e-3,
         "milliseconds": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0,
         "seconds": 1.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0}
SLOW_RATIO = 1.5  # a straggler's step takes >= 1.5x its peers' median, through its end


@dataclass
class Line:
    """A line of the failed attempt, prepared for localization (internal)."""

    index: int
    rank: int | None
    source: int | None  # the rank known to the capture or named by a line prefix (not a tag)
    host: str | None
    step: int | None  # step reached (own or carried forward)
    own_step: int | None  # step printed in this line (a progress line)
    time: float | None
    stream: str
    text: str
    body: str
    noise: bool
    masked: str
    template: str


@dataclass(frozen=True)
class LauncherVerdict:
    """What the launcher (torchrun) said failed first."""

    rank: int
    exit_code: int | None
    host: str | None
    detail: str
    index: int


def launcher_verdict(lines: Sequence[Line]) -> LauncherVerdict | None:
    """torchrun's root-cause block (or its "failed (exitcode: -9) local_rank: 2" line)."""
    for i, line in enumerate(lines):
        if _ROOT.search(line.body):
            fields: dict[str, str] = {}
            for later in lines[i + 1:i + 14]:
                found = _FIELD.match(later.body)
                if found and found.group(1) not in fields:
                    fields[found.group(1)] = found.group(2)
            rank = re.match(r"\d+", fields.get("rank", ""))
            if rank:
                code = re.match(r"-?\d+", fields.get("exitcode", ""))
                return LauncherVerdict(int(rank.group()), int(code.group()) if code else None,
                                       fields.get("host"), fields.get("traceback", ""),
                                       line.index)
    for line in lines:
        found = _ELASTIC_FAILED.search(line.body)
        if found:
            return LauncherVerdict(int(found.group(2)), int(found.group(1)), None, "",
                                   line.index)
    for line in lines:  # Slurm lists tasks in the order they ended: the first one failed first
        found = _SRUN.match(line.body)
        if found:
            code = re.search(r"exit code (\d+)", found.group(3))
            signal = {"Killed": -9, "Terminated": -15, "Aborted": -6, "Segmentation": -11}
            number = next((v for k, v in signal.items() if found.group(3).startswith(k)), None)
            return LauncherVerdict(int(found.group(2)), int(code.group(1)) if code else number,
                                   found.group(1), found.group(3), line.index)
    return None


def barrier_culprits(lines: Sequence[Line]) -> set[int]:
    """Ranks a monitored barrier names as not having arrived."""
    ranks: set[int] = set()
    for line in lines:
        found = _BARRIER.search(line.body)
        if found:
            ranks.update(int(r) for r in re.findall(r"\d+", found.group(1)))
    return ranks


def ends_first(lines: Sequence[Line], alarming: set[int]) -> tuple[int, str] | None:
    """The rank whose log ends first, and why; None unless one rank clearly does.

    alarming: indices of lines that report trouble (errors, tracebacks, new templates).
    A rank ends first if its last progress step is lower than every other rank's, or if
    it printed nothing alarming after its last progress line while every other rank did
    (it died silently; they complained).
    """
    last_step: dict[int, int] = {}
    last_progress: dict[int, int] = {}
    ranks: set[int] = set()
    for line in lines:
        if line.rank is None or line.noise:
            continue
        ranks.add(line.rank)
        if line.own_step is not None:
            last_step[line.rank] = max(line.own_step, last_step.get(line.rank, line.own_step))
            last_progress[line.rank] = line.index
    if len(ranks) < 2 or len(last_step) < len(ranks):
        return None  # some rank prints no progress: whose log "ends first" means nothing
    lowest = min(last_step.values())
    at_lowest = [r for r, s in last_step.items() if s == lowest]
    if len(at_lowest) == 1:
        others = min(s for r, s in last_step.items() if r != at_lowest[0])
        return at_lowest[0], f"its last step is {lowest}; every other rank reached {others}"
    complained = {line.rank for line in lines
                  if line.index in alarming and line.rank is not None
                  and line.index > last_progress[line.rank]}
    silent = ranks - complained
    if len(silent) == 1 and len(complained) >= 1:
        rank = next(iter(silent))
        return rank, ("it printed nothing after its last step while every other rank "
                      "reported errors")
    return None


def missing_from(ranks_reporting: set[int], lines: Sequence[Line]) -> int | None:
    """The one rank that printed something but not the message the others all report."""
    known = {line.rank for line in lines if line.rank is not None}
    missing = known - ranks_reporting
    if len(ranks_reporting) >= 2 and len(missing) == 1:
        return next(iter(missing))
    return None


@dataclass(frozen=True)
class Straggler:
    rank: int
    step: int  # first step of the slowdown
    ratio: float  # median ratio to peers over the slowdown
    how: str


def straggler(lines: Sequence[Line]) -> Straggler | None:
    """A rank slower than its peers from some step until its log ends, by the durations
    its per-step lines report or, failing that, by when it printed them."""
    durations, times = _per_step(lines)
    found = _slowest(durations, lambda value, peers: value / peers if peers > 0 else 1.0,
                     "its per-step durations")
    if found is None and times:
        period = _step_period(times) or 1.0
        # late = printed its step-k line at least 0.5 s (above the capture's polling)
        # after its peers' median, scored as 1 + lag / step period
        found = _slowest(times, lambda value, peers: 1.0 + (value - peers) / period
                         if value - peers >= 0.5 else 1.0, "it printed its steps late")
    return found


SLOWDOWN = 2.0  # every rank's step time this many times its earlier median: a slowdown


def slowdown_onset(lines: Sequence[Line]) -> tuple[int, float] | None:
    """(step, factor) from which the step time of every rank stayed `SLOWDOWN` times or
    more above its median over the steps before, until the log ends. In synchronous
    data parallelism one slow rank slows all (its peers wait in the next all-reduce),
    so a rank that slows down and then stops leaves this trace in everyone's log,
    while who it was shows only in who later misses the collective."""
    durations, _ = _per_step(lines)
    by_field: dict[str, dict[int, float]] = defaultdict(dict)
    for (field, step), by_rank in durations.items():
        by_field[field][step] = statistics.median(by_rank.values())
    found: tuple[int, float] | None = None
    for series in by_field.values():
        steps = sorted(series)
        for i in range(3, len(steps)):
            before = statistics.median(series[k] for k in steps[:i])
            if before > 0 and all(series[k] >= SLOWDOWN * before for k in steps[i:]):
                factor = statistics.median(series[k] for k in steps[i:]) / before
                if found is None or steps[i] < found[0]:
                    found = (steps[i], factor)
                break
    return found


def _per_step(lines: Sequence[Line]) -> tuple[dict[tuple[str, int], dict[int, float]],
                                               dict[tuple[str, int], dict[int, float]]]:
    """Per (template and field, step) of progress lines: rank -> each duration the line
    reports (seconds); per (template, step): rank -> time the line was printed."""
    durations: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    times: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for line in lines:
        if line.rank is None or line.own_step is None or line.noise:
            continue
        key = (line.template, line.own_step)
        if "<DUR>" in line.masked:
            for k, found in enumerate(_DURATION.finditer(line.body)):
                seconds = float(found.group(1)) * _UNIT[found.group(2)]
                durations[(f"{line.template}#{k}", line.own_step)].setdefault(line.rank, seconds)
        if line.time is not None:
            times[key].setdefault(line.rank, line.time)
    return durations, times


def _step_period(times: dict[tuple[str, int], dict[int, float]]) -> float | None:
    """Median seconds per step between consecutive progress lines (any template)."""
    first: dict[int, float] = {}
    for (_, step), by_rank in times.items():
        moment = statistics.median(by_rank.values())
        first[step] = min(moment, first.get(step, moment))
    steps = sorted(first)
    pairs = zip(steps, steps[1:], strict=False)
    gaps = [(first[b] - first[a]) / (b - a) for a, b in pairs if b > a]
    gaps = [g for g in gaps if g > 0]
    return statistics.median(gaps) if gaps else None


def _slowest(table: dict[tuple[str, int], dict[int, float]], ratio_of, how: str
             ) -> Straggler | None:
    worst: dict[int, dict[int, float]] = defaultdict(dict)  # rank -> step -> largest ratio
    for (_, step), values in table.items():
        if len(values) < 2:
            continue
        for rank, value in values.items():
            peers = statistics.median(v for r, v in values.items() if r != rank)
            ratio = ratio_of(value, peers)
            worst[rank][step] = max(ratio, worst[rank].get(step, ratio))
    best: Straggler | None = None
    for rank, by_step in worst.items():
        series = sorted(by_step.items())
        streak: list[tuple[int, float]] = []
        for step, ratio in reversed(series):
            if ratio < SLOW_RATIO:
                break
            streak.append((step, ratio))
        # slow through its end, for two observations at least (three if it was slow from
        # its very first step: then there is no healthy stretch to contrast with)
        if len(streak) < (3 if len(streak) == len(series) else 2):
            continue
        ratio = statistics.median(r for _, r in streak)
        if best is None or ratio > best.ratio:
            best = Straggler(rank, streak[-1][0], ratio, how)
    return best
