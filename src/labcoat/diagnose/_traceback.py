"""Python tracebacks in printed output: the exception and the frame in the user's code.

A traceback printed by Python reads

    Traceback (most recent call last):
      File "/home/me/proj/train.py", line 88, in <module>
        main()
      File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1532, in ...
        return self._call_impl(*args, **kwargs)
    RuntimeError: shapes cannot be multiplied

The frame that explains the failure is usually the last one in the user's own
code: frames below it are libraries (site-packages, dist-packages), the
standard library (``lib/pythonX.Y/``), frozen modules or launcher scripts
(``.../bin/torchrun``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_START = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
_FRAME = re.compile(r'^(?P<indent>\s*)File "(?P<file>[^"]+)", line (?P<line>\d+)'
                    r"(?:, in (?P<function>.+?))?\s*$")
_ERROR = re.compile(
    r"^(?P<indent>\s*)(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit"
    r"|Interrupt|Failure|Fault|Warning)|StopIteration|KeyboardInterrupt|GeneratorExit"
    r"|OutOfMemoryError|[A-Z]\w*(?=:)))(?::\s?(?P<message>.*))?\s*$")
_MARKERS = re.compile(r"^\s*[~^]+\s*$|^\s*\.\.\.\s*$|^\s*\[Previous line repeated")
_LIBRARY = re.compile(
    r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d+(?:\.\d+)?[/\\]"
    r"|[/\\]Lib[/\\]|[/\\]bin[/\\][^/\\]+$|^<")
# Exceptions that report how the process was stopped, not what went wrong in it.
STOP_EXCEPTIONS = ("KeyboardInterrupt", "SystemExit", "SignalException", "ChildFailedError")


@dataclass(frozen=True)
class Frame:
    """One frame of a traceback: file, line number, function and the source line shown."""

    file: str
    line: int
    function: str
    code: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


@dataclass(frozen=True)
class PythonError:
    """An exception printed with its traceback.

    type: the exception's (qualified) name, e.g. ``torch.OutOfMemoryError``; None if
        the output ended inside the traceback.
    start, end: positions of the ``Traceback`` line and of the exception line (or the
        last frame) in the lines given to `parse_tracebacks`.
    """

    type: str | None
    message: str
    frames: tuple[Frame, ...]
    start: int
    end: int

    @property
    def user_frame(self) -> Frame | None:
        return user_frame(self.frames)

    @property
    def short_type(self) -> str:
        return (self.type or "").rsplit(".", 1)[-1]

    def __str__(self) -> str:
        head = f"{self.type}: {self.message}" if self.message else str(self.type)
        frame = self.user_frame
        return f"{head} (at {frame})" if frame else head


def is_library(path: str) -> bool:
    """Whether a frame's file belongs to an installed library, the standard library, a
    frozen module or a launcher script rather than the user's code."""
    return bool(_LIBRARY.search(path))


def user_frame(frames: Sequence[Frame]) -> Frame | None:
    """The frame closest to the raise that is in the user's code (None if all are library
    frames)."""
    for frame in reversed(frames):
        if not is_library(frame.file):
            return frame
    return None


def parse_tracebacks(lines: Sequence[str]) -> list[PythonError]:
    """Every traceback in `lines` (one process's output, in order, without rank prefixes),
    chained ones ("During handling of the above exception ...") separately."""
    errors: list[PythonError] = []
    i, n = 0, len(lines)
    while i < n:
        if not _START.match(lines[i]):
            i += 1
            continue
        start, frames = i, []
        frame_indent: int | None = None
        error: PythonError | None = None
        i += 1
        while i < n:
            text = lines[i]
            found = _FRAME.match(text)
            if found:
                frame_indent = len(found.group("indent"))
                frames.append(Frame(found.group("file"), int(found.group("line")),
                                    found.group("function") or "?"))
                i += 1
                # the source line shown under the frame is indented further
                if i < n and _indent(lines[i]) > frame_indent and not _FRAME.match(lines[i]) \
                        and lines[i].strip() and not _START.match(lines[i]):
                    frames[-1] = Frame(frames[-1].file, frames[-1].line, frames[-1].function,
                                       lines[i].strip())
                    i += 1
                continue
            if _MARKERS.match(text) or (not text.strip() and not frames):
                i += 1
                continue
            if _START.match(text):
                break  # a new traceback before this one's exception line
            found = _ERROR.match(text)
            if found and (frame_indent is None or len(found.group("indent")) <= frame_indent):
                error = PythonError(found.group("type"), (found.group("message") or "").strip(),
                                    tuple(frames), start, i)
                i += 1
                break
            break  # something else: the traceback was cut off
        if error is None:
            error = PythonError(None, "", tuple(frames), start, max(start, i - 1))
        errors.append(error)
    return errors


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())
