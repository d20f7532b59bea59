"""What `labcoat run` shows: a Rich live table on a terminal, plain lines elsewhere."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.table import Table

STATUS_STYLE = {
    "pending": "dim",
    "running": "cyan",
    "restarting": "yellow",
    "done": "green",
    "failed": "red",
}


@dataclass
class TrialRow:
    key: str
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

    def __enter__(self) -> Display:
        if not self.plain:
            self._live = Live(
                self._table(), console=self.console, refresh_per_second=4, transient=False
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(*exc)

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._table())

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

    def _table(self) -> Table:
        table = Table(title=self.title, expand=False)
        for column in ("trial", "status", "step", "latest", "elapsed", "eta", "note"):
            table.add_column(column, no_wrap=column != "note")
        for row in self.rows.values():
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


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"
