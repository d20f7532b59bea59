"""What a printed line says about itself: the rank that printed it, the step, the time.

Used when the capture could not know (the runner reads one stdout file for all
ranks of a trial): torchrun's ``--tee`` prefix ``[default3]:``, PyTorch's
``[rank3]:`` prefix (or both, ``[default3]:[rank3]:``) or a ``[rank 3]`` tag near
the start; ``step 120``,
``Step: 120/1000``, ``iteration 120``, ``global_step=120``; an ISO timestamp
near the start (read as UTC when it has no offset).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

# torchrun --tee's prefix may wrap PyTorch's own (``[default1]:[rank1]: Traceback ...``)
_PREFIX = re.compile(r"^\s*\[(?:default|rank)(\d+)\]:(?:[ \t]*\[(?:default|rank)\d+\]:)*")
_TAG = re.compile(r"\[(?:rank|Rank|RANK)[ :]?(\d+)\]|\brank[ =:](\d+)\b[:\]|]")
_STEP = re.compile(r"(?i)\b(?:global[_ ]?step|step|iter(?:ation)?)\b\s*[:=#]?\s*\[?\s*(\d+)")
_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[T _](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,6}))?"
                   r"(Z|[+-]\d{2}:?\d{2})?")


def rank_of(text: str, *, tags: bool = True) -> int | None:
    """The rank a line names as its author: a leading ``[default3]:``/``[rank3]:`` or
    (`tags`) a ``[rank 3]``-style tag in its first 100 characters."""
    found = _PREFIX.match(text)
    if found:
        return int(found.group(1))
    if not tags:
        return None
    found = _TAG.search(text, 0, 100)
    if found:
        return int(found.group(1) or found.group(2))
    return None


def body_of(text: str) -> str:
    """The line without a leading ``[default3]:``/``[rank3]:`` prefix."""
    found = _PREFIX.match(text)
    return text[found.end():] if found else text


def step_of(text: str) -> int | None:
    """The training step a line reports (``step 12``, ``Step: 12/300``, ``iter 12``)."""
    found = _STEP.search(text)
    return int(found.group(1)) if found else None


def time_of(text: str) -> float | None:
    """Unix seconds of an ISO timestamp in the line's first 60 characters, if any."""
    found = _TIME.search(text, 0, 60)
    if not found:
        return None
    date, clock, fraction, zone = found.groups()
    stamp = f"{date}T{clock}"
    if fraction:
        stamp += "." + fraction.ljust(6, "0")
    if zone and zone != "Z":
        stamp += zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
