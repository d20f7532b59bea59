"""Computed pages per experiment, kept until its data change.

The analysis of a 100-trial experiment (bootstrap intervals, meta-analysis) and
its bucketed curves take about a second; the data behind them change only when
the runner ingests more of a journal or a trial changes state. The fingerprint
is read from rows the page loads anyway (trials and attempts: statuses, ingested
journal and output offsets, end times), so a cached page is served only while
nothing it shows has changed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from labcoat.store import Experiment

T = TypeVar("T")


def fingerprint(experiment: Experiment) -> tuple[Any, ...]:
    return (experiment.id, experiment.design_hash, str(experiment.analysis_plan),
            _why_stamp(experiment.name),  # `labcoat inside` saved new results
            tuple((t.id, t.status, tuple((a.id, a.journal_offset, a.stdout_offset,
                                          a.stderr_offset, a.ended_at) for a in t.attempts))
                  for t in experiment.trials))


class PageCache:
    """At most `size` entries (least recently used dropped), safe across request threads."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, Any], tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, kind: str, experiment: Experiment, build: Callable[[], T]) -> T:
        key, mark = (kind, experiment.id), fingerprint(experiment)
        with self._lock:
            found = self._entries.get(key)
            if found is not None and found[0] == mark:
                self._entries.move_to_end(key)
                return found[1]
        value = build()  # outside the lock: other experiments are served meanwhile
        with self._lock:
            self._entries[key] = (mark, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value


def _why_stamp(name: str) -> int | None:
    """When `labcoat inside` last saved this experiment's why section (None: never)."""
    from labcoat.analysis import why_path

    try:
        return why_path(name).stat().st_mtime_ns
    except OSError:
        return None
