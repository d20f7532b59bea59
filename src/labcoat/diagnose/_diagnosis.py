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

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from labcoat.diagnose._causes import CAUSES, cause_of_end, launch_failure, match_cause
from labcoat.diagnose._decide import _decide, _exception, _metric_jump, _new_templates, _phase
from labcoat.diagnose._errors import DiagnoseError
from labcoat.diagnose._fields import body_of, rank_of, step_of, time_of
from labcoat.diagnose._localize import (
    Line,
    launcher_verdict,
)
from labcoat.diagnose._noise import is_noise
from labcoat.diagnose._records import AttemptEnd, LogLine, MetricPoint, RunEvent
from labcoat.diagnose._suspects import (
    NewTemplate,
    Suspect,
    _add_end,
    _event_suspects,
    _line_suspects,
    _metric_suspects,
    _rank,
)
from labcoat.diagnose._templates import TemplateConfig, Templates
from labcoat.diagnose._traceback import Frame


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
    happened: for a command that could not start, what happened in words ("command not
        found: X", "script missing: path"); fix: what to do about it.
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
    happened: str | None = None
    fix: str | None = None

    @property
    def summary(self) -> str:
        """One sentence: cause, where, when, and the best suspect line."""
        if self.cause is None and not self.suspects:
            return "no cause found: the output has no known failure message"
        what = self.happened or self.cause or "unknown cause"
        where = f" on rank {self.rank}" if self.rank is not None else ""
        where += f" ({self.host})" if self.host else ""
        when = f" at step {self.step}" if self.step is not None else ""
        line = self.suspects[0].text.strip() if self.suspects else ""
        frame = f" [{self.user_frame}]" if self.user_frame else ""
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{what}{where}{when}: {line[:200]}{frame}{fix}"

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
            "happened": self.happened, "fix": self.fix,
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
    happened, fix = _launch(cause, suspects)
    return Diagnosis(
        cause=cause, rank=rank, host=host, step=step, suspects=tuple(suspects),
        new_templates=new, evidence=tuple(evidence), exception=exception, user_frame=frame,
        first_new_step=new[0].first_step if new else None,
        metric_jump=_metric_jump(metrics),
        last_step=end.last_step if end is not None and end.last_step is not None
        else max((line.step for line in prepared if line.step is not None), default=None),
        references=reference.lines,
        reference_trials=tuple(sorted(reference.trials)),
        phase=_phase(cause, step, top, prepared, events), happened=happened, fix=fix,
    )


def _launch(cause: str | None, suspects: list[Suspect]) -> tuple[str | None, str | None]:
    """What a launch failure names (the command, script or module) and its fix, from the
    best suspect of that cause: a printed line, or the runner's record of the end."""
    for suspect in suspects:
        if suspect.cause != cause or suspect.discounted:
            continue
        hit = match_cause(body_of(suspect.text)) or cause_of_end(suspect.text)
        found = launch_failure(hit) if hit is not None and hit.cause == cause else None
        if found is not None:
            return found
    return None, None


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
