"""Collapse repeats across ranks: N ranks printing the same message is one line x N.

"The same" means the same text after masking (`mask`): numbers, paths, ranks and
the like may differ, words may not. Lines that mask alike always share a
template, so the template id is the group's too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from labcoat.diagnose._errors import DiagnoseError
from labcoat.diagnose._fields import rank_of, step_of
from labcoat.diagnose._records import LogLine
from labcoat.diagnose._templates import Templates


@dataclass(frozen=True)
class RankGroup:
    """Lines that several ranks (or one rank, repeatedly) printed alike.

    text: the first line of the group, as printed.
    masked: the masked text every line of the group shares.
    template: its template id (see `Templates`).
    count: how many lines the group holds.
    ranks: the distinct ranks that printed it, ascending (unknown ranks omitted).
    step: the step the group belongs to (`per_step=True`), else None.
    first: position of the group's first line in the input.
    """

    text: str
    masked: str
    template: str
    count: int
    ranks: tuple[int, ...]
    step: int | None
    first: int


def collapse_ranks(
    records: Iterable[LogLine | tuple[int | None, str]],
    *,
    per_step: bool = False,
    templates: Templates | None = None,
) -> list[RankGroup]:
    """Group lines that mask alike, in order of first appearance.

    records: `LogLine`s or ``(rank, text)`` pairs; a missing rank is read from a
        ``[rank3]:``-style prefix in the text.
    per_step: also require the same step (a line's step, or ``step N`` in its text),
        so each step's per-rank lines collapse separately.
    templates: a miner to use (and teach); default: a fresh one.
    """
    miner = templates if templates is not None else Templates()
    groups: dict[tuple[str, int | None], list] = {}
    for i, record in enumerate(records):
        rank, text, step = _unpack(i, record)
        if rank is None:
            rank = rank_of(text)
        tid = miner.add(text)
        masked = miner.masked(text)
        key_step = (step if step is not None else step_of(text)) if per_step else None
        key = (masked, key_step)
        group = groups.get(key)
        if group is None:
            groups[key] = [text, masked, tid, 1, set() if rank is None else {rank}, key_step, i]
        else:
            group[3] += 1
            if rank is not None:
                group[4].add(rank)
    return [RankGroup(text, masked, miner.resolve(tid), count, tuple(sorted(ranks)), step, first)
            for text, masked, tid, count, ranks, step, first in groups.values()]


def _unpack(i: int, record: object) -> tuple[int | None, str, int | None]:
    if isinstance(record, LogLine):
        return record.rank, record.text, record.step
    if isinstance(record, tuple) and len(record) == 2 and isinstance(record[1], str) and (
        record[0] is None or isinstance(record[0], int)
    ):
        return record[0], record[1], None
    raise DiagnoseError(f"record {i} is {record!r}; expected a LogLine or a (rank, text) pair")
