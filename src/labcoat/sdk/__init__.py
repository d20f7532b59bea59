"""Trial-side SDK: stdlib only, so importing it costs nothing in a training process.

It only journals (the format: `labcoat.journal`); the reading side ingests.
The journal readers are re-exported here for code written against earlier versions.
"""

from labcoat.journal import JOURNAL_NAME, JournalChunk, rank_journal, read_journal, read_lines
from labcoat.sdk._journal import JournalWriter
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
