"""Suspects of a failed attempt: cause-rule matches, Python exceptions, guard alerts and
non-finite metrics, the runner's record of the end, weighted and ranked (the ranking is
explained in `_diagnosis`)."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from labcoat.diagnose._causes import CauseHit, match_cause
from labcoat.diagnose._fields import body_of
from labcoat.diagnose._localize import (
    Line,
)
from labcoat.diagnose._records import AttemptEnd, MetricPoint, RunEvent
from labcoat.diagnose._traceback import STOP_EXCEPTIONS, Frame, PythonError, parse_tracebacks
from labcoat.journal import Events

# How strongly each cause explains a failure by itself (see the module docstring).
# A command that could not start (script_missing, command_not_found) ran nothing else.
WEIGHTS = {"script_missing": 9.0, "command_not_found": 9.0, "hardware": 10.0,
           "dataloader_worker": 9.0, "disk_full": 9.0, "out_of_memory": 9.0, "nan": 8.0,
           "exception": 7.0, "signal": 4.0, "collective_timeout": 3.0, "hang": 2.0}
ROOT_CAUSES = frozenset({"script_missing", "command_not_found", "hardware",
                         "dataloader_worker", "disk_full", "out_of_memory", "nan", "exception"})
LIBRARY_EXCEPTION = 5.0  # an exception raised with no frame in the user's code
ABORT = 2.5  # SIGABRT: how NCCL's watchdog takes a process down after a timeout
KNOWN = 0.25  # factor for a suspect whose template successful runs also print
NEW_LINE = 1.0  # a new (never seen in references) error-looking line, cause unknown
END_BONUS = 0.5  # the runner's record of the end agrees with this suspect
SURVIVED = 3  # printed steps after a suspect that show the run outlived it
_ERRORISH = ("error", "fail", "exception", "fatal", "abort", "panic", "warn", "cannot",
             "could not", "unable", "denied", "refused", "invalid")


@dataclass(frozen=True)
class Suspect:
    """A line (or event, metric, or the runner's record) that may explain the failure.

    cause: one of `CAUSES`, or None for a new error-looking line of unknown cause.
    rank, host, step: where and when (step: the step the rank had reached).
    ranks: every rank that printed this suspect's template (first one: `rank`).
    index: position in the attempt's lines (None: not a line).
    template: the line's template id; new: whether successful references lack it
        (None without references).
    evidence: why it is a suspect, in words.
    discounted: counted a quarter, because successful references print it too or the
        run went on training after it; never the cause by itself.
    """

    text: str
    cause: str | None
    score: float
    rank: int | None = None
    host: str | None = None
    step: int | None = None
    ranks: tuple[int, ...] = ()
    index: int | None = None
    time: float | None = None
    template: str | None = None
    new: bool | None = None
    evidence: tuple[str, ...] = ()
    discounted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "cause": self.cause, "score": round(self.score, 3),
                "discounted": self.discounted,
                "rank": self.rank, "host": self.host, "step": self.step,
                "ranks": list(self.ranks), "index": self.index, "time": self.time,
                "template": self.template, "new": self.new, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class NewTemplate:
    """A template the failed attempt printed and no successful reference did."""

    template: str
    text: str  # the template's text
    example: str  # its first line
    count: int
    ranks: tuple[int, ...]
    first_index: int
    first_step: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"template": self.template, "text": self.text, "example": self.example,
                "count": self.count, "ranks": list(self.ranks),
                "first_index": self.first_index, "first_step": self.first_step}


@dataclass
class _Draft:
    text: str
    cause: str | None
    weight: float
    rank: int | None = None
    host: str | None = None
    step: int | None = None
    index: int | None = None
    time: float | None = None
    template: str | None = None
    new: bool | None = None
    evidence: list[str] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)
    exception: str | None = None
    frame: Frame | None = None
    discounted: bool = False


def _weight(hit: CauseHit) -> float:
    if hit.cause == "signal" and ("ABRT" in hit.match or "Abort" in hit.match
                                  or hit.match.endswith(("-6", "134"))):
        return ABORT
    return WEIGHTS[hit.cause]


def _line_suspects(prepared: list[Line], known: dict[int, bool]) -> list[_Draft]:
    """One draft per (cause, template): its first line, with every rank that printed it."""
    by_key: dict[tuple[str | None, str], _Draft] = {}
    drafts: list[_Draft] = []

    def add(line: Line, cause: str | None, weight: float, reason: str) -> _Draft:
        key = (cause, line.template)
        draft = by_key.get(key)
        if draft is None:
            new = None if not known else not known.get(line.index, False)
            draft = _Draft(line.text, cause, weight * (KNOWN if new is False else 1.0),
                           line.rank, line.host, line.step, line.index, line.time,
                           line.template, new, [reason], discounted=new is False)
            by_key[key] = draft
            drafts.append(draft)
        if line.rank is not None:
            draft.ranks.add(line.rank)
        return draft

    at_index: dict[int, _Draft] = {}
    tracebacks = _tracebacks(prepared)
    inside = {i for _, _, block in tracebacks for i in block}
    # a traceback's frames quote source code ("raise ValueError('loss is nan')"): only its
    # exception line speaks for the failure
    quoted = inside - {line.index for line, _, _ in tracebacks}
    for line in prepared:
        if line.noise or line.index in quoted:
            continue
        hit = match_cause(line.body)
        if hit is not None:
            at_index[line.index] = add(line, hit.cause, _weight(hit), f"{hit.rule}: {hit.match}")
    for line, error, _ in tracebacks:
        if error.type is None or error.short_type in STOP_EXCEPTIONS:
            continue  # cut off, or how the process was stopped rather than why
        described = f"{error.type}: {error.message}" if error.message else str(error.type)
        hit = match_cause(described)
        frame = error.user_frame
        where = f" raised at {frame}" + (f" ({frame.code})" if frame and frame.code else "") \
            if frame else " raised in library code"
        draft = at_index.get(line.index)
        if draft is None or (draft.cause not in ROOT_CAUSES and hit is None):
            cause = hit.cause if hit is not None else "exception"
            weight = _weight(hit) if hit is not None else (
                WEIGHTS["exception"] if frame else LIBRARY_EXCEPTION)
            draft = add(line, cause, weight, f"Python exception {described[:160]}{where}")
        else:
            draft.evidence.append(f"Python exception{where}")
        draft.exception = draft.exception or described
        draft.frame = draft.frame or frame
    _survived(drafts, prepared, hit_at={i for i, d in at_index.items() if d.cause})
    _launcher_kills(drafts, prepared)
    for line in prepared:  # new error-looking lines of no known cause
        if line.noise or not known or known.get(line.index, True) or line.index in at_index \
                or line.index in inside:
            continue
        low = line.body.lower()
        if line.stream == "stderr" or any(word in low for word in _ERRORISH):
            if (None, line.template) not in by_key:
                add(line, None, NEW_LINE, "new: no successful reference printed this template")
            elif line.rank is not None:
                by_key[(None, line.template)].ranks.add(line.rank)
    return drafts


def _survived(drafts: list[_Draft], prepared: list[Line], hit_at: set[int]) -> None:
    """Count a quarter a suspect the run outlived: its rank (any rank, if unknown) went on
    to print SURVIVED or more later steps, in lines with no cause of their own (a retried
    download, a handled error). NaN losses printed on and on do not count as surviving."""
    progress = [(line.index, line.rank, line.own_step) for line in prepared
                if line.own_step is not None and not line.noise and line.index not in hit_at]
    for draft in drafts:
        if draft.index is None or draft.cause is None:
            continue
        later = {step for index, rank, step in progress if index > draft.index
                 and (draft.rank is None or rank == draft.rank)
                 and (draft.step is None or step > draft.step)}
        if len(later) >= SURVIVED and not draft.discounted:
            draft.weight *= KNOWN
            draft.discounted = True
            draft.evidence.append(f"but training went on for {len(later)} more printed steps")


_SENDS_TERM = re.compile(r"Sending process (\d+) closing signal (SIGTERM|SIGKILL)")
_SIGNAL_WORDS = {"SIGTERM": ("SIGTERM", "-15", "Signal 15"),
                 "SIGKILL": ("SIGKILL", "-9", "Signal 9")}
_PID = re.compile(r"\((?:pid: ?)?(\d+)\)|received by PID (\d+)|\bpid[ :=]+(\d+)")


def _launcher_kills(drafts: list[_Draft], prepared: list[Line]) -> None:
    """Count a quarter the signal lines about processes the launcher itself stopped: once
    a rank fails, torchrun sends its peers SIGTERM ("Sending process 4242 closing signal
    SIGTERM") and then lists them among the failures ("exitcode: -15 (pid: 4242)")."""
    sent = {m.group(1): m.group(2) for line in prepared
            for m in [_SENDS_TERM.search(line.body)] if m}
    if not sent:
        return
    for draft in drafts:
        if draft.cause != "signal" or draft.discounted or draft.index is None:
            continue
        found = _PID.search(draft.text)
        pid = next((g for g in found.groups() if g), None) if found else None
        # the same signal only: a rank that died of SIGKILL before the launcher's SIGTERM
        # reached it is the one that failed
        if pid in sent and any(w in draft.text for w in _SIGNAL_WORDS[sent[pid]]):
            draft.weight *= KNOWN
            draft.discounted = True
            draft.evidence.append(f"but the launcher sent process {pid} this signal itself, "
                                  "after another rank failed")


def _tracebacks(prepared: list[Line]) -> list[tuple[Line, PythonError, list[int]]]:
    """(exception line, the error, indices of its lines) for every traceback, parsed per
    output source (rank prefix or capture) and stream."""
    groups: dict[tuple[int | None, str], list[Line]] = defaultdict(list)
    for line in prepared:
        groups[(line.source, line.stream)].append(line)
    found = []
    for members in groups.values():
        for error in parse_tracebacks([m.body for m in members]):
            block = [m.index for m in members[error.start:error.end + 1]]
            found.append((members[error.end], error, block))
    found.sort(key=lambda item: item[0].index)
    return found


def _event_suspects(events: list[RunEvent]) -> list[_Draft]:
    drafts = []
    for event in events:
        data = event.data or {}
        rule = str(data.get("rule", ""))
        if event.kind == Events.GUARD_ALERT and (rule.startswith("nonfinite") or
                                            _is_nan_message(event.message)):
            drafts.append(_Draft(event.message or rule, "nan", WEIGHTS["nan"], event.rank,
                                 event.host, event.step, None, event.time,
                                 evidence=[f"guard alert {rule or '?'} at step {event.step}"]))
        elif event.kind.startswith("chaos."):
            hit = match_cause(event.message) or CauseHit("signal", "chaos", event.kind)
            drafts.append(_Draft(event.message or event.kind, hit.cause, _weight(hit),
                                 event.rank, event.host, event.step, None, event.time,
                                 evidence=[f"labcoat chaos injected this ({event.kind})"]))
    return drafts


def _is_nan_message(message: str) -> bool:
    hit = match_cause(message)
    return hit is not None and hit.cause == "nan"


def _metric_suspects(metrics: list[MetricPoint]) -> list[_Draft]:
    first: MetricPoint | None = None
    for point in sorted(metrics, key=lambda p: p.step):
        if not math.isfinite(point.value):
            first = point
            break
    if first is None:
        return []
    return [_Draft(f"{first.name} = {first.value} at step {first.step}", "nan", WEIGHTS["nan"],
                   first.rank, None, first.step, None, first.time,
                   evidence=[f"metric {first.name!r} is {first.value} at step {first.step}"])]


def _add_end(drafts: list[_Draft], hit: CauseHit | None, end: AttemptEnd | None) -> None:
    if hit is None or end is None:
        return
    reason = f"the runner recorded: {end.cause}" if end.cause else f"exit code {end.exit_code}"
    # A hang the runner detected outranks the signals it then sent (SIGTERM, and a
    # launcher relaying it); root causes still outrank the hang.
    weight = WEIGHTS["signal"] + END_BONUS if hit.cause == "hang" else _weight(hit)
    same = [d for d in drafts if d.cause == hit.cause]
    if same:
        # the line the runner quotes (its last stderr line) if it is one of them
        quoted = [d for d in same if d.index is not None and end.cause
                  and body_of(d.text).strip() and body_of(d.text).strip() in end.cause]
        best = max(quoted or same, key=lambda d: d.weight)
        best.weight = max(best.weight, weight) + END_BONUS
        best.evidence.append(reason)
        return
    drafts.append(_Draft(end.cause or f"exit code {end.exit_code}", hit.cause, weight,
                         step=end.last_step, time=end.last_time, evidence=[reason]))


def _rank(drafts: list[_Draft], hosts: dict[int, str]) -> list[Suspect]:
    inf = math.inf
    ordered = sorted(drafts, key=lambda d: (-d.weight, inf if d.step is None else d.step,
                                            inf if d.index is None else d.index))
    return [Suspect(d.text, d.cause, d.weight, d.rank, d.host or hosts.get(d.rank),
                    d.step, tuple(sorted(d.ranks)), d.index, d.time, d.template, d.new,
                    tuple(d.evidence), d.discounted) for d in ordered]


