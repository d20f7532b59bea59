"""Trial-side SDK: stdlib only, so importing it costs nothing in a training process."""

from labcoat.sdk._journal import (
    JOURNAL_NAME,
    JournalChunk,
    JournalWriter,
    rank_journal,
    read_journal,
    read_lines,
)
from labcoat.sdk._run import Run, init

__all__ = [
    "JOURNAL_NAME",
    "JournalChunk",
    "JournalWriter",
    "Run",
    "init",
    "rank_journal",
    "read_journal",
    "read_lines",
]
