"""Diagnose a failed attempt: when it started, where (rank, host), what is new, and why.

Inputs are plain records (`LogLine`, `MetricPoint`, `RunEvent`, `AttemptEnd`);
`diagnose_trial` reads them from the store. The answer is a `Diagnosis`: the
likely cause, rank, host and step, with ranked suspect lines and the evidence
for each.

How suspects are ranked. Each line that matches a cause rule (see `CAUSES`),
each Python exception (with the frame in the user's code), each non-finite
metric or guard alert, and the runner's record of the end become suspects.
Root causes outrank the failures they trigger (hardware > data-loader death,
disk full, out of memory > NaN > a user exception > a signal > a collective
timeout > a hang): when one rank dies, its peers time out in the next
collective and a launcher kills them, so their errors are later and secondary.
A suspect whose template also appears in successful reference runs counts a
quarter (it did not kill them). Ties go to the earliest step, then the earliest
line. When the best suspect is a secondary kind (signal, timeout, hang) the
rank comes from `_localize`: the launcher's verdict, a straggler, the rank
missing from everyone's timeout, or the rank whose log ends first.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from labcoat.diagnose._causes import CAUSES, CauseHit, cause_of_end, match_cause
from labcoat.diagnose._errors import DiagnoseError
from labcoat.diagnose._fields import body_of, rank_of, step_of, time_of
from labcoat.diagnose._localize import (
    Line,
    barrier_culprits,
    ends_first,
    launcher_verdict,
    missing_from,
    slowdown_onset,
    straggler,
)
from labcoat.diagnose._noise import is_noise
from labcoat.diagnose._records import AttemptEnd, LogLine, MetricPoint, RunEvent
from labcoat.diagnose._templates import TemplateConfig, Templates
from labcoat.diagnose._traceback import STOP_EXCEPTIONS, Frame, PythonError, parse_tracebacks

# How strongly each cause explains a failure by itself (see the module docstring).
WEIGHTS = {"hardware": 10.0, "dataloader_worker": 9.0, "disk_full": 9.0, "out_of_memory": 9.0,
           "nan": 8.0, "exception": 7.0, "signal": 4.0, "collective_timeout": 3.0,
           "hang": 2.0}
ROOT_CAUSES = frozenset({"hardware", "dataloader_worker", "disk_full", "out_of_memory", "nan",
                         "exception"})
LIBRARY_EXCEPTION = 5.0  # an exception raised with no frame in the user's code
ABORT = 2.5  # SIGABRT: how NCCL's watchdog takes a process down after a timeout
KNOWN = 0.25  # factor for a suspect whose template successful runs also print
NEW_LINE = 1.0  # a new (never seen in references) error-looking line, cause unknown
END_BONUS = 0.5  # the runner's record of the end agrees with this suspect
SURVIVED = 3  # printed steps after a suspect that show the run outlived it
_ERRORISH = ("error", "fail", "exception", "fatal", "abort", "panic", "warn", "cannot",
             "could not", "unable", "denied", "refused", "invalid")


class Reference:
    """Successful runs to compare a failed one with (same design, or earlier experiments).

    Learns their templates once; `knows(line)` tells whether a line of the failed run
    has a template they printed too. Reuse one `Reference` to diagnose many attempts.
    """

    def __init__(self, lines: Iterable[LogLine | str] = (), *,
                 config: TemplateConfig | None = None) -> None:
        self.templates = Templates(config)
        self.trials: set[str] = set()
        self.lines = 0
        for i, line in enumerate(lines):
            text = _text(line, i, "reference line")
            if isinstance(line, LogLine) and line.trial is not None:
                self.trials.add(str(line.trial))
            self.templates.add(text)
            self.lines += 1
        self._known: dict[str, bool] = {}

    def knows(self, text: str) -> bool:
        masked = self.templates.masked(text)
        known = self._known.get(masked)
        if known is None:
            known = self._known[masked] = self.templates.match(text) is not None
        return known

    def __bool__(self) -> bool:
        return self.lines > 0


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


@dataclass(frozen=True)
class Diagnosis:
    """Why an attempt failed, as far as its output tells.

    cause: the likely cause (one of `CAUSES`) or None if nothing points to one.
    rank, host: where it started (None if no rank stands out or ranks are unknown).
    step: when: the step the failing rank had reached when it failed (for a
        straggler, the step its slowdown began).
    suspects: ranked, best first.
    new_templates: what the failed attempt printed that successful references never did.
    evidence: the reasoning behind rank and step, in words.
    exception: the user-code exception, if the cause is one (``Type: message``).
    user_frame: the frame in the user's code it was raised from.
    first_new_step: the step of the first new (non-noise) template, if any.
    metric_jump: (metric, step) of the first abrupt jump in a loss-like metric.
    last_step: the last step the attempt's journal recorded (its last heartbeat).
    references: how many reference lines the comparison used (0: none).
    reference_trials: the labels of the reference runs (`LogLine.trial`), sorted.
    phase: what the run was doing when it failed: ``"startup"`` (before any step),
        ``"checkpoint"`` (saving or loading one), ``"evaluation"``, ``"training"``;
        None when no cause was found.
    """

    cause: str | None
    rank: int | None
    host: str | None
    step: int | None
    suspects: tuple[Suspect, ...] = ()
    new_templates: tuple[NewTemplate, ...] = ()
    evidence: tuple[str, ...] = ()
    exception: str | None = None
    user_frame: Frame | None = None
    first_new_step: int | None = None
    metric_jump: tuple[str, int] | None = None
    last_step: int | None = None
    references: int = 0
    reference_trials: tuple[str, ...] = ()
    phase: str | None = None

    @property
    def summary(self) -> str:
        """One sentence: cause, where, when, and the best suspect line."""
        if self.cause is None and not self.suspects:
            return "no cause found: the output has no known failure message"
        what = self.cause or "unknown cause"
        where = f" on rank {self.rank}" if self.rank is not None else ""
        where += f" ({self.host})" if self.host else ""
        when = f" at step {self.step}" if self.step is not None else ""
        line = self.suspects[0].text.strip() if self.suspects else ""
        frame = f" [{self.user_frame}]" if self.user_frame else ""
        return f"{what}{where}{when}: {line[:200]}{frame}"

    def __str__(self) -> str:
        out = [self.summary]
        out += [f"  because {reason}" for reason in self.evidence]
        for i, suspect in enumerate(self.suspects[:5], start=1):
            where = "" if suspect.rank is None else f" rank {suspect.rank}"
            when = "" if suspect.step is None else f" step {suspect.step}"
            out.append(f"  {i}. [{suspect.cause or '?'}{where}{when}] {suspect.text.strip()[:160]}")
        if self.new_templates:
            out.append(f"  new vs {self.references} reference line(s): "
                       f"{len(self.new_templates)} template(s), first: "
                       f"{self.new_templates[0].example.strip()[:120]}")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause, "cause_text": CAUSES.get(self.cause or ""),
            "rank": self.rank, "host": self.host, "step": self.step,
            "summary": self.summary, "evidence": list(self.evidence),
            "exception": self.exception,
            "user_frame": None if self.user_frame is None else {
                "file": self.user_frame.file, "line": self.user_frame.line,
                "function": self.user_frame.function, "code": self.user_frame.code},
            "first_new_step": self.first_new_step,
            "metric_jump": list(self.metric_jump) if self.metric_jump else None,
            "last_step": self.last_step, "references": self.references,
            "reference_trials": list(self.reference_trials), "phase": self.phase,
            "suspects": [s.to_dict() for s in self.suspects],
            "new_templates": [t.to_dict() for t in self.new_templates],
        }


def diagnose(
    lines: Sequence[LogLine | str],
    references: Reference | Iterable[LogLine | str] = (),
    *,
    end: AttemptEnd | None = None,
    metrics: Iterable[MetricPoint] = (),
    events: Iterable[RunEvent] = (),
    config: TemplateConfig | None = None,
) -> Diagnosis:
    """Diagnose a failed attempt from what it printed.

    lines: the attempt's lines in the order printed (all ranks; `LogLine`s or plain text).
    references: lines of successful runs of the same design (or a prebuilt `Reference`).
    end: how the runner saw the attempt end (cause string, exit code, last step).
    metrics: its metric points (e.g. the loss), for NaN/Inf and jumps.
    events: its journal events (``guard.alert`` NaN alerts, ``chaos.*`` injections).
    config: template-miner settings (default: the benchmarked ones).
    """
    if isinstance(lines, str | bytes):
        raise DiagnoseError("diagnose() takes a sequence of lines, not one string; "
                            "use text.splitlines()")
    if end is not None and not isinstance(end, AttemptEnd):
        raise DiagnoseError(f"end must be an AttemptEnd, not {type(end).__name__}")
    reference = references if isinstance(references, Reference) else Reference(
        references, config=config)
    prepared, miner = _prepare(lines, config)
    metrics = _checked(metrics, MetricPoint, "metrics")
    events = _checked(events, RunEvent, "events")

    known = {line.index: reference.knows(line.text) for line in prepared if not line.noise} \
        if reference else {}
    drafts = _line_suspects(prepared, known)
    drafts += _event_suspects(events) + _metric_suspects(metrics)
    end_hit = cause_of_end(end.cause, end.exit_code) if end is not None else None
    _add_end(drafts, end_hit, end)
    hosts = {line.rank: line.host for line in prepared if line.rank is not None and line.host}
    suspects = _rank(drafts, hosts)

    alarming = {d.index for d in drafts if d.index is not None}
    alarming |= {line.index for line in prepared if not line.noise and (
        line.stream == "stderr" or (known and not known.get(line.index, True)))}
    cause, rank, step, evidence = _decide(suspects, prepared, end, alarming)
    verdict = launcher_verdict(prepared)
    if verdict is not None and verdict.rank == rank and verdict.host:
        host = verdict.host  # the launcher knows where each rank ran; the capture may not
    else:
        host = hosts.get(rank) if rank is not None else None
        if host is None and suspects and suspects[0].rank == rank:
            host = suspects[0].host
    exception, frame = _exception(drafts, [s for s in suspects
                                           if s.cause == cause and not s.discounted])
    new = _new_templates(prepared, miner, known) if reference else ()
    top = suspects[0] if suspects else None
    return Diagnosis(
        cause=cause, rank=rank, host=host, step=step, suspects=tuple(suspects),
        new_templates=new, evidence=tuple(evidence), exception=exception, user_frame=frame,
        first_new_step=new[0].first_step if new else None,
        metric_jump=_metric_jump(metrics),
        last_step=end.last_step if end is not None and end.last_step is not None
        else max((line.step for line in prepared if line.step is not None), default=None),
        references=reference.lines,
        reference_trials=tuple(sorted(reference.trials)),
        phase=_phase(cause, step, top, prepared, events),
    )


# --- preparing lines ------------------------------------------------------------------


def _text(line: object, i: int, what: str) -> str:
    if isinstance(line, LogLine):
        if not isinstance(line.text, str):
            raise DiagnoseError(f"{what} {i}: text is {type(line.text).__name__}, not str")
        return line.text
    if isinstance(line, str):
        return line
    raise DiagnoseError(f"{what} {i} is {type(line).__name__}; expected a LogLine or str")


def _checked(items: Iterable[Any], kind: type, name: str) -> list[Any]:
    items = list(items)
    for i, item in enumerate(items):
        if not isinstance(item, kind):
            raise DiagnoseError(f"{name}[{i}] is {type(item).__name__}, not {kind.__name__}")
    return items


def _prepare(lines: Sequence[LogLine | str], config: TemplateConfig | None
             ) -> tuple[list[Line], Templates]:
    records = [line if isinstance(line, LogLine) else LogLine(text=_text(line, i, "line"))
               for i, line in enumerate(lines)]
    for i, record in enumerate(records):
        _text(record, i, "line")
    miner = Templates(config)
    sources = [r.rank if r.rank is not None else rank_of(r.text, tags=False) for r in records]
    ranks = [s if s is not None else rank_of(r.text) for s, r in zip(sources, records,
                                                                      strict=True)]
    # noise flags per (rank, stream): a warning's source line follows its own warning
    noise = [False] * len(records)
    streams: dict[tuple[int | None, str], list[int]] = defaultdict(list)
    for i, record in enumerate(records):
        streams[(sources[i], record.stream)].append(i)
    for members in streams.values():
        for i, flag in zip(members, is_noise([records[i].text for i in members]), strict=True):
            noise[i] = flag
    carried: dict[int | None, int] = {}
    prepared = []
    for i, record in enumerate(records):
        rank = ranks[i]
        body = body_of(record.text)
        own = step_of(body) if not noise[i] else None
        if own is not None:
            carried[rank] = own
        if own is not None:
            step = own
        else:  # the rank's last printed step, or the capture's (journal) step if later
            known = [s for s in (carried.get(rank), record.step) if s is not None]
            step = max(known) if known else None
        stamped = time_of(body)  # the line's own timestamp beats the capture's poll time
        time = stamped if stamped is not None else record.time
        prepared.append(Line(i, rank, sources[i], record.host, step, own, time, record.stream,
                             record.text, body, noise[i], miner.masked(record.text),
                             miner.add(record.text)))
    for line in prepared:  # a later line may have merged an earlier template
        line.template = miner.resolve(line.template)
    return prepared, miner


# --- suspects ---------------------------------------------------------------------------


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
        if event.kind == "guard.alert" and (rule.startswith("nonfinite") or
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


# --- deciding -----------------------------------------------------------------------------


def _decide(suspects: list[Suspect], prepared: list[Line], end: AttemptEnd | None,
            alarming: set[int]) -> tuple[str | None, int | None, int | None, list[str]]:
    # a cause needs evidence successful runs do not also print
    top = next((s for s in suspects if s.cause is not None and not s.discounted), None)
    cause = top.cause if top else None
    evidence: list[str] = []
    if top is not None and top.cause in ROOT_CAUSES and top.rank is not None:
        return cause, top.rank, _first_sign(top, suspects, evidence), evidence
    rank, step = _where(cause, top, suspects, prepared, alarming, evidence,
                        end.last_step if end is not None else None)
    if top is not None and top.cause in ROOT_CAUSES and top.step is not None:
        # the failure line's own step beats where its rank was last seen
        step = _first_sign(top, suspects, evidence)
    if step is None and top is not None and top.rank in (None, rank):
        step = top.step
    if step is None and end is not None:
        step = end.last_step  # the journal's last step: the last sign of progress
    return cause, rank, step, evidence


def _first_sign(top: Suspect, suspects: list[Suspect], evidence: list[str]) -> int | None:
    """The step of the best suspect, or for a NaN the earliest step with a sign of it on
    the same rank: a run dies of a NaN some steps after the loss (or a guard, or a
    printed line) first showed it, and the issue is where it started."""
    if top.cause != "nan" or top.step is None:
        return top.step
    steps = [s.step for s in suspects if s.cause == "nan" and not s.discounted
             and s.step is not None and (s.rank is None or top.rank is None
                                         or s.rank == top.rank)]
    first = min(steps, default=top.step)
    if first < top.step:
        evidence.append(f"the first sign of NaN/Inf is at step {first}, "
                        f"{top.step - first} step(s) before the run stopped")
    return first


def _where(cause: str | None, top: Suspect | None, suspects: list[Suspect],
           prepared: list[Line], alarming: set[int], evidence: list[str],
           last_step: int | None) -> tuple[int | None, int | None]:
    """The rank where a secondary failure (signal, timeout, hang) started, and its step."""
    verdict = launcher_verdict(prepared)
    slow = straggler(prepared)
    timeouts = {r for s in suspects if s.cause == "collective_timeout" for r in s.ranks}
    missing = missing_from(timeouts, prepared) if timeouts else None
    barrier = barrier_culprits(prepared)
    first = ends_first(prepared, alarming)
    # the step a rank had reached: its last progress line, else the run's last step (a rank
    # that prints no progress, e.g. all but rank 0, moves in lockstep with the others)
    progress: dict[int, int] = {}
    printing = {line.rank for line in prepared if line.rank is not None and line.own_step}
    for line in prepared:
        if line.rank in printing and line.step is not None and not line.noise:
            progress[line.rank] = max(line.step, progress.get(line.rank, line.step))
    overall = last_step if last_step is not None else max(
        (line.step for line in prepared if line.step is not None), default=None)
    known_ranks = {line.rank for line in prepared if line.rank is not None}

    def reached(rank: int) -> int | None:
        return progress.get(rank, overall)

    def verdict_rank() -> tuple[int, int | None] | None:
        if verdict is None or (cause == "collective_timeout" and verdict.exit_code == -6):
            return None  # the first rank a watchdog aborted says nothing about the cause
        code = "" if verdict.exit_code is None else f" (exit code {verdict.exit_code})"
        evidence.append(f"the launcher reports rank {verdict.rank} failed first{code}")
        return verdict.rank, reached(verdict.rank)

    def slow_rank() -> tuple[int, int | None] | None:
        if slow is None:
            return None
        evidence.append(f"rank {slow.rank} is a straggler from step {slow.step}: {slow.how} "
                        f"were {slow.ratio:.1f}x its peers' until its log ended")
        return slow.rank, slow.step

    def barrier_rank() -> tuple[int, int | None] | None:
        if len(barrier) != 1:
            return None
        rank = next(iter(barrier))
        evidence.append(f"a monitored barrier names rank {rank} as not arriving")
        return rank, reached(rank)

    def missing_rank() -> tuple[int, int | None] | None:
        if missing is None:
            return None
        evidence.append(f"every rank but {missing} reports the collective timeout: rank "
                        f"{missing} never entered the collective")
        step = reached(missing)
        onset = slowdown_onset(prepared)
        if onset is not None and step is not None and onset[0] < step:
            evidence.append(f"every rank's step time rose {onset[1]:.1f}x from step "
                            f"{onset[0]}: rank {missing} slowed all of them before it stopped")
            step = onset[0]
        return missing, step

    def first_rank() -> tuple[int, int | None] | None:
        if first is None:
            return None
        evidence.append(f"rank {first[0]}'s log ends first: {first[1]}")
        return first[0], reached(first[0])

    def alone_rank() -> tuple[int, int | None] | None:
        # the best suspect is a message only one rank printed (e.g. its network error)
        if top is None or top.rank is None or len(top.ranks) != 1 or len(known_ranks) < 2:
            return None
        evidence.append(f"only rank {top.rank} printed the first {top.cause} message")
        return top.rank, top.step

    if cause in ("collective_timeout", "hang"):
        order = (slow_rank, barrier_rank, missing_rank, alone_rank, first_rank, verdict_rank)
    else:
        order = (verdict_rank, barrier_rank, alone_rank, first_rank, slow_rank, missing_rank)
    for attempt in order:
        found = attempt()
        if found is not None:
            return found
    if top is not None and top.rank is not None:
        return top.rank, top.step
    return None, None


_PHASE_WORDS = (("checkpoint", ("checkpoint", "save_checkpoint", "torch.save", ".ckpt",
                                 "state_dict", "saving")),
                ("evaluation", ("evaluat", " eval", "eval_", "validation")))


def _phase(cause: str | None, step: int | None, top: Suspect | None, prepared: list[Line],
           events: list[RunEvent]) -> str | None:
    """What the run was doing when it failed, from the words around the best suspect: the
    suspect itself, its evidence, and the few lines its rank printed just before it (a
    traceback's frames name the function that was running)."""
    if cause is None and top is None:
        return None
    if step is None and not any(line.own_step is not None for line in prepared):
        return "startup"
    words: list[str] = []
    if top is not None:
        words += [top.text, *top.evidence]
        if top.index is not None:
            before = [line for line in prepared[max(0, top.index - 12):top.index + 1]
                      if line.source == prepared[top.index].source]
            words += [line.body for line in before]
        if top.index is None and any(e.kind == "chaos.disk-full" for e in events):
            words.append("checkpoint")
    text = " ".join(words).lower()
    for phase, cues in _PHASE_WORDS:
        if any(cue in text for cue in cues):
            return phase
    return "training"


def _exception(drafts: list[_Draft], causing: list[Suspect]
               ) -> tuple[str | None, Frame | None]:
    """The exception (and user frame) behind the best suspect of the cause that is one."""
    for suspect in causing:
        if suspect.index is None:
            continue
        for draft in drafts:
            if draft.index == suspect.index and draft.exception:
                return draft.exception, draft.frame
    return None, None


def _new_templates(prepared: list[Line], miner: Templates, known: dict[int, bool]
                   ) -> tuple[NewTemplate, ...]:
    groups: dict[str, list[Line]] = {}
    for line in prepared:
        if not line.noise:
            groups.setdefault(line.template, []).append(line)
    out = []
    for tid, members in groups.items():
        if any(known.get(m.index, False) for m in members):
            continue
        first = members[0]
        out.append(NewTemplate(tid, miner.template(tid), first.text, len(members),
                               tuple(sorted({m.rank for m in members if m.rank is not None})),
                               first.index, first.step))
    out.sort(key=lambda t: t.first_index)
    return tuple(out)


def _metric_jump(metrics: list[MetricPoint]) -> tuple[str, int] | None:
    """The first step where a loss-like metric jumps far beyond its recent variation
    (10 robust standard deviations of its step-to-step changes)."""
    series: dict[str, list[MetricPoint]] = defaultdict(list)
    for point in metrics:
        if "loss" in point.name.lower() and point.rank is None:
            series[point.name].append(point)
    found: list[tuple[int, str]] = []
    for name, points in series.items():
        points.sort(key=lambda p: p.step)
        values = [p.value for p in points]
        for i in range(6, len(values)):
            if not math.isfinite(values[i]):
                found.append((points[i].step, name))
                break
            diffs = [values[j] - values[j - 1] for j in range(max(1, i - 20), i)
                     if math.isfinite(values[j]) and math.isfinite(values[j - 1])]
            if len(diffs) < 5:
                continue
            scale = 1.4826 * statistics.median(abs(d) for d in diffs) or 1e-12
            if abs(values[i] - values[i - 1]) > 10 * scale and \
                    abs(values[i] - values[i - 1]) > 0.2 * abs(values[i - 1]):
                found.append((points[i].step, name))
                break
    if not found:
        return None
    step, name = min(found)
    return name, step
