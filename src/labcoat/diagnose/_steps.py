"""The step each captured line was printed at, as far as the capture can tell.

The runner reads a trial's new output once per poll and tags every line of that read
with the latest step in the journal (`labcoat.runner._capture`). A trial that prints
fast, or finishes between two polls, then has hundreds of lines tagged with one late
step. What the capture does know: the lines of one read (one capture time) were printed
after the previous read, when the journal was at that read's step, and before this one.
So a line's step is known when both reads saw the same step; otherwise the line's own
words may say it ("step 12/300", within those bounds); otherwise it is unknown (None),
never a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labcoat.diagnose._fields import body_of, step_of


def printed_steps(events: Sequence[Any]) -> list[int | None]:
    """One step (or None) per captured line, in the order given.

    events: captured lines with ``attempt_id``, ``time`` (the capture's read time, shared
    by the lines of one read), ``step`` (the journal's step at that read) and ``message``,
    in capture order within each attempt (as `store.log_lines` returns them). A line
    without a capture time keeps its recorded step.
    """
    out: list[int | None] = []
    previous: dict[Any, tuple[float, int | None]] = {}  # attempt -> (read time, step)
    before: dict[Any, int | None] = {}  # attempt -> the step of the read before this one
    for event in events:
        attempt, read, step = event.attempt_id, event.time, event.step
        if read is None:
            out.append(step)
            continue
        last = previous.get(attempt)
        if last is None or last[0] != read:  # a new read of this attempt's output
            before[attempt] = last[1] if last is not None else None
            previous[attempt] = (read, step)
        low = before[attempt]
        if step is not None and low == step:
            out.append(step)  # the journal did not move between the two reads
            continue
        own = step_of(body_of(event.message or ""))
        inside = own is not None and (low is None or own >= low) and (
            step is None or own <= step)
        out.append(own if inside else None)
    return out
