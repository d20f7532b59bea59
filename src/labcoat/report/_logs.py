"""`labcoat logs`: what trials printed, filtered, with repeats across ranks collapsed."""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape

from labcoat.diagnose import body_of, line_filter, printed_steps
from labcoat.journal import LEVELS
from labcoat.store import Event

LEVEL_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "debug": "dim"}


@dataclass
class LogLine:
    """One printed line, or the same line printed by several ranks at one step."""

    trial: str
    attempt: int
    stream: str
    step: int | None
    level: str
    text: str
    ranks: list[int] = field(default_factory=list)
    count: int = 1
    noise: bool = False


def select_lines(events: list[Event], trials: dict[int, str], attempts: dict[int, int], *,
                 level: str | None = None, grep: str | None = None,
                 noise: bool = False) -> list[LogLine]:
    """Filter (level at or above, regex, noise hidden unless asked) and collapse lines that
    several ranks printed alike at the same step."""
    floor, pattern = line_filter(level, grep)
    merged: OrderedDict[tuple, LogLine] = OrderedDict()
    steps = printed_steps(events)  # not the capture's (possibly late) step: see there
    for e, step in zip(events, steps, strict=True):
        is_noise = bool((e.data or {}).get("noise"))
        if (is_noise and not noise) or LEVELS.index(_level(e.level)) < floor:
            continue
        if pattern is not None and not pattern.search(e.message):
            continue
        # "[rank3]: x" from every rank is one line "x" printed by ranks 0..N
        text = body_of(e.message) if e.rank is not None else e.message
        key = (e.trial_id, e.attempt_id, step, e.stream, text)
        line = merged.get(key)
        if line is None:
            merged[key] = LogLine(trials.get(e.trial_id, "?"), attempts.get(e.attempt_id, 0),
                                  e.stream, step, _level(e.level), text,
                                  [e.rank] if e.rank is not None else [], 1, is_noise)
        else:
            line.count += 1
            if e.rank is not None:
                line.ranks.append(e.rank)
    return list(merged.values())


# C0 controls but tab, DEL and C1: a trial's colour codes, cursor moves, title changes and
# bells, which would act on the reader's terminal if printed as they are
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with terminal control characters shown escaped (ESC as \\x1b), not obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def _level(level: str) -> str:
    return level if level in LEVELS else "info"


def print_lines(lines: list[LogLine], console: Console) -> None:
    if not lines:
        console.print("no lines match (noise is hidden; --all shows it)")
        return
    for line in lines:
        style = LEVEL_STYLE.get(line.level, "")
        step = "" if line.step is None else f" step {line.step}"
        ranks = f" ranks {_ranks(line.ranks)}" if len(line.ranks) > 1 else (
            f" rank {line.ranks[0]}" if line.ranks else "")
        times = f" (x{line.count})" if line.count > 1 else ""
        head = f"{line.trial}#{line.attempt} {line.stream}{step}{ranks}{times}"
        shown = escape(visible(line.text))
        text = f"[{style}]{shown}[/]" if style else shown
        console.print(f"[dim]{escape(visible(head))}[/] {text}", soft_wrap=True,
                      highlight=False)


def lines_json(lines: list[LogLine]) -> list[dict[str, Any]]:
    return [line.__dict__ for line in lines]


def _ranks(ranks: list[int]) -> str:
    return ",".join(str(r) for r in sorted(set(ranks)))
