"""A stored experiment's logs as templates, and its trials picked out for diagnosis.

`experiment_templates` mines Drain3 templates over everything an experiment's
trials printed (every attempt, every rank) and says, per template, how often,
where and from which step it was printed, and whether only failed attempts
printed it. `summarize_templates` does the same on plain `LogLine`s.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from labcoat.diagnose._errors import DiagnoseError
from labcoat.diagnose._fields import rank_of
from labcoat.diagnose._records import LogLine
from labcoat.diagnose._steps import printed_steps
from labcoat.diagnose._templates import TemplateConfig, Templates
from labcoat.diagnose._trial import _failed
from labcoat.journal import LEVELS

if TYPE_CHECKING:  # the store (SQLAlchemy) loads only when stored logs are read
    from sqlalchemy.orm import Session

    from labcoat.store import Experiment, Trial



@dataclass(frozen=True)
class TemplateSummary:
    """One template of a set of lines.

    template: its id (``"T1"``...: order of first appearance over all lines mined).
    text: the template (``<NUM>``, ``<HEX>``... masks; ``<*>`` where Drain generalized).
    example: the first line printed with it.
    count: how many lines have it; trials: which trials printed it (sorted);
        ranks: which ranks (sorted; empty if ranks are unknown).
    first_step: the earliest step at which it was printed (None: before any step,
        or steps unknown).
    levels: the levels of its lines, worst last.
    only_failed: every line of it came from a failed attempt (and at least one
        attempt that did not fail printed something): a message the successful
        runs never print.
    """

    template: str
    text: str
    example: str
    count: int
    trials: tuple[str, ...]
    ranks: tuple[int, ...]
    first_step: int | None
    levels: tuple[str, ...] = ()
    only_failed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"template": self.template, "text": self.text, "example": self.example,
                "count": self.count, "trials": list(self.trials), "ranks": list(self.ranks),
                "first_step": self.first_step, "levels": list(self.levels),
                "only_failed": self.only_failed}


def summarize_templates(
    lines: Sequence[LogLine],
    *,
    failed: Collection[tuple[str | None, int | None]] = (),
    levels: Sequence[str] | None = None,
    show: Sequence[bool] | None = None,
    config: TemplateConfig | None = None,
) -> list[TemplateSummary]:
    """Mine `lines` together and summarize each template, in order of first appearance.

    failed: the (trial, attempt) pairs of `LogLine.trial`/`LogLine.attempt` that failed.
    levels: each line's level (default "info").
    show: which lines to count in the summaries (default all); every line is mined, so
        template ids do not depend on this selection. Templates with no shown line are
        left out.
    """
    if isinstance(lines, str | bytes):
        raise DiagnoseError("summarize_templates() takes a sequence of LogLines, not a string")
    for name, flags in (("levels", levels), ("show", show)):
        if flags is not None and len(flags) != len(lines):
            raise DiagnoseError(f"{name} has {len(flags)} entries for {len(lines)} lines")
    failed = {(str(t) if t is not None else None, a) for t, a in failed}
    miner = Templates(config)
    members: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        if not isinstance(line, LogLine):
            raise DiagnoseError(f"line {i} is {type(line).__name__}, not a LogLine")
        members.setdefault(miner.add(line.text), []).append(i)
    members = _merged(members, miner)
    runs_ok = {(line.trial, line.attempt) for line in lines} - failed
    out = []
    for tid, indices in members.items():
        shown = [i for i in indices if show is None or show[i]]
        if not shown:
            continue
        picked = [lines[i] for i in shown]
        steps = [line.step for line in picked if line.step is not None]
        seen = {levels[i] if levels is not None else "info" for i in shown}
        only_failed = bool(runs_ok) and all((lines[i].trial, lines[i].attempt) in failed
                                            for i in indices)
        out.append(TemplateSummary(
            tid, miner.template(tid), picked[0].text, len(picked),
            tuple(sorted({str(line.trial) for line in picked if line.trial is not None})),
            tuple(sorted({line.rank for line in picked if line.rank is not None})),
            min(steps) if steps else None,
            tuple(sorted(seen, key=lambda v: LEVELS.index(v) if v in LEVELS else 1)),
            only_failed))
    return out


def experiment_templates(
    session: Session,
    experiment: Experiment,
    *,
    trial: str | None = None,
    rank: int | None = None,
    level: str | None = None,
    grep: str | None = None,
    noise: bool = False,
    config: TemplateConfig | None = None,
) -> list[TemplateSummary]:
    """Templates of what `experiment`'s trials printed (captured log events).

    All of the experiment's lines are mined (known noise too if `noise`), so ids and
    `only_failed` are the same whatever is selected; the summaries count only the
    selected lines: of trial `trial`, of rank `rank`, at level `level` or worse,
    matching the regular expression `grep`. A line's rank is the capture's, else the
    one its text names (torchrun's ``[default3]:``, PyTorch's ``[rank3]:``...).
    """
    from labcoat import store

    floor, pattern = line_filter(level, grep)
    if trial is not None:
        find_trial(experiment, trial)
    keys = {t.id: t.key for t in experiment.trials}
    attempt_of = {a.id: a for t in experiment.trials for a in t.attempts}
    failed = {(t.key, a.number) for t in experiment.trials for a in t.attempts
              if _failed(a.cause)}
    lines, levels, show = [], [], []
    events = store.log_lines(session, list(keys))
    for event, step in zip(events, printed_steps(events), strict=True):
        if (event.data or {}).get("noise") and not noise:
            continue
        attempt = attempt_of.get(event.attempt_id)
        key = keys[event.trial_id]
        # the capture reads one output for all of a trial's ranks: the line may name its rank
        at_rank = event.rank if event.rank is not None else rank_of(event.message)
        lines.append(LogLine(text=event.message, trial=key,
                             attempt=attempt.number if attempt else None, rank=at_rank,
                             host=event.host, step=step, time=event.time,
                             stream=event.stream or "stdout"))
        at = event.level if event.level in LEVELS else "info"
        levels.append(at)
        show.append((trial is None or key == trial) and (rank is None or at_rank == rank)
                    and LEVELS.index(at) >= floor
                    and (pattern is None or pattern.search(event.message) is not None))
    return summarize_templates(lines, failed=failed, levels=levels, show=show, config=config)


def line_filter(level: str | None, grep: str | None) -> tuple[int, re.Pattern[str] | None]:
    """The `--level` floor (an index into LEVELS) and the compiled `--grep` pattern, checked."""
    if level is not None and level not in LEVELS:
        raise DiagnoseError(f"--level {level!r} is not a level; choose one of "
                            f"{', '.join(LEVELS)}")
    try:
        pattern = re.compile(grep) if grep else None
    except re.error as e:
        raise DiagnoseError(f"--grep {grep!r} is not a valid regular expression ({e})") from None
    return (LEVELS.index(level) if level else 0), pattern


def find_trial(experiment: Experiment, key: str) -> Trial:
    """The trial of `experiment` with this key (`store.find_trial`)."""
    from labcoat import store

    return store.find_trial(experiment, key)


def failed_trials(experiment: Experiment) -> list[Trial]:
    """The experiment's trials whose status is failed, in trial order."""
    return [t for t in experiment.trials if t.status == "failed"]


def _merged(members: dict[str, list[int]], miner: Templates) -> dict[str, list[int]]:
    """`members` keyed by the templates' final ids (a later line may merge two)."""
    out: dict[str, list[int]] = {}
    for tid, indices in members.items():
        out.setdefault(miner.resolve(tid), []).extend(indices)
    return {tid: sorted(indices) for tid, indices in out.items()}
