"""What `labcoat run` shows: a Rich live table on a terminal, plain lines elsewhere.

A table of every trial is cheap for tens of trials; for thousands, building and drawing
it each refresh took most of a core (2,000 trials: see benchmarks/README.md, "Live
display at scale"). Past SUMMARY_AT trials the live view summarises: counts per state
per arm, the running trials, the latest failures. It is redrawn at most
REFRESH_PER_SECOND times a second, however often the runner asks.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table

STATUS_STYLE = {
    "pending": "dim",
    "running": "cyan",
    "restarting": "yellow",
    "done": "green",
    "failed": "red",
}
SUMMARY_AT = 40  # more trials than this: the summary instead of a row per trial
SHOWN_RUNNING = 20  # running trials listed in the summary
SHOWN_FAILURES = 5  # latest failures listed in the summary
REFRESH_PER_SECOND = 2.0
PROGRESS_EVERY = 30.0  # plain output: seconds between progress lines of running trials


@dataclass
class TrialRow:
    key: str
    arm: str = ""
    status: str = "pending"
    step: int | None = None
    total: int | None = None
    metric: str = ""
    started: float | None = None
    ended: float | None = None
    note: str = ""

    def elapsed(self) -> float | None:
        if self.started is None:
            return None
        return (self.ended or time.time()) - self.started

    def eta(self) -> float | None:
        elapsed = self.elapsed()
        if self.status != "running" or not elapsed or not self.step or not self.total:
            return None
        return elapsed * (self.total - self.step) / self.step


class Display:
    """Live progress for a set of trials; `plain` forces line output (e.g. in CI)."""

    def __init__(
        self,
        title: str,
        rows: list[TrialRow],
        console: Console | None = None,
        plain: bool | None = None,
    ) -> None:
        self.title = title
        self.rows = {r.key: r for r in rows}
        self.console = console or Console()
        self.plain = not self.console.is_terminal if plain is None else plain
        self._live: Live | None = None
        self._drawn = 0.0  # when the live view was last redrawn
        self._progressed = time.monotonic()  # plain output: when progress was last printed

    def __enter__(self) -> Display:
        if not self.plain:
            # no auto-refresh: Rich would redraw the whole view 4 times a second on its own
            self._live = Live(self.view(), console=self.console, auto_refresh=False,
                              transient=False)
            self._live.__enter__()
            self._drawn = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self.view(), refresh=True)
            self._live.__exit__(*exc)

    def refresh(self) -> None:
        """Redraw the live view, at most REFRESH_PER_SECOND times a second; in plain
        output, a line per running trial every PROGRESS_EVERY seconds, so a log or a pipe
        never goes minutes without news."""
        now = time.monotonic()
        if self.plain and now - self._progressed >= PROGRESS_EVERY:
            self._progressed = now
            self._print_progress()
        if self._live is None or now - self._drawn < 1 / REFRESH_PER_SECOND:
            return
        self._drawn = now
        self._live.update(self.view(), refresh=True)

    def view(self) -> RenderableType:
        """A row per trial, or past SUMMARY_AT trials the summary."""
        return self._table() if len(self.rows) <= SUMMARY_AT else self._summary()

    def note(self, text: str) -> None:
        """A line about the whole run, above the live table."""
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def say(self, key: str, text: str) -> None:
        """A state change worth a line of its own (start, finish, failure)."""
        if self.plain:
            stamp = time.strftime("%H:%M:%S")
            self.console.print(f"[{stamp}] {key}: {text}", highlight=False, markup=False,
                               soft_wrap=True)
        else:
            self.rows[key].note = text
            self.refresh()

    def _print_progress(self) -> None:
        """One line per running trial: step of total, latest metric, elapsed, eta; past
        SHOWN_RUNNING trials, the count of the others."""
        running = [r for r in self.rows.values() if r.status in ("running", "restarting")]
        for row in running[:SHOWN_RUNNING]:
            parts = [row.status]
            if row.step is not None:
                parts.append(f"step {row.step}" + (f"/{row.total}" if row.total else ""))
            if row.metric:
                parts.append(row.metric)
            parts.append(f"{_duration(row.elapsed())} elapsed")
            if row.eta() is not None:
                parts.append(f"eta {_duration(row.eta())}")
            self.say(row.key, ", ".join(parts))
        if len(running) > SHOWN_RUNNING:
            self.note(f"... and {len(running) - SHOWN_RUNNING} more trials running")

    def _table(self, rows: list[TrialRow] | None = None, title: str | None = None) -> Table:
        table = Table(title=self.title if title is None else title, expand=False,
                      title_justify="left" if title else "center")
        for column in ("trial", "status", "step", "latest", "elapsed", "eta", "note"):
            table.add_column(column, no_wrap=column != "note")
        for row in self.rows.values() if rows is None else rows:
            step = (
                "" if row.step is None else f"{row.step}" + (f"/{row.total}" if row.total else "")
            )
            table.add_row(
                row.key,
                f"[{STATUS_STYLE.get(row.status, '')}]{row.status}",
                step,
                row.metric,
                _duration(row.elapsed()),
                _duration(row.eta()),
                row.note,
            )
        return table

    def _summary(self) -> Group:
        """Counts per state per arm, then the running trials and the latest failures."""
        counts: dict[str, Counter[str]] = {}
        running, failed = [], []
        for row in self.rows.values():
            counts.setdefault(row.arm, Counter())[row.status] += 1
            if row.status in ("running", "restarting"):
                running.append(row)
            elif row.status == "failed":
                failed.append(row)
        states = [s for s in STATUS_STYLE if any(c[s] for c in counts.values())]
        table = Table("arm", *states, "trials", title=f"{self.title} ({len(self.rows):,} "
                      "trials)", expand=False)
        for arm, c in counts.items():
            table.add_row(arm or "-", *(f"[{STATUS_STYLE[s]}]{c[s]:,}" for s in states),
                          f"{sum(c.values()):,}")
        parts: list[RenderableType] = [table]
        if running:
            more = len(running) - SHOWN_RUNNING
            parts.append(self._table(running[:SHOWN_RUNNING], title=f"running ({len(running)}"
                                     + (f", {more} not shown" if more > 0 else "") + ")"))
        if failed:
            failed.sort(key=lambda r: r.ended or 0, reverse=True)
            parts.append(self._table(failed[:SHOWN_FAILURES],
                                     title=f"latest failures (of {len(failed)})"))
        return Group(*parts)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"
