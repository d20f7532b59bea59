"""Generic masking: variable parts of a log line become typed placeholders before Drain.

Drain (He et al. 2017, "Drain: An Online Log Parsing Approach with Fixed Depth
Tree", ICWS) expects "preprocessing by domain knowledge": each Loghub dataset
gets its own regexes for block ids, IPs or node names (Zhu et al. 2019, "Tools
and Benchmarks for Automated Log Parsing", ICSE-SEIP). labcoat sees logs from
any training script, so it uses one rule set instead, chosen on the benchmark in
`benchmarks/diagnose.py` across five source styles: structured values first
(timestamps, UUIDs, URLs, IPs, paths, hex, sizes, durations, ranks), then any
remaining token that contains a digit (a number, or an id such as
``blk_-1608999687919862906`` or ``R02-M1-N0-C:J12-U11``).

    >>> mask("[rank3]: step 12/300 loss 2.31 (450ms) saved /ckpt/step_12.pt 1.5GB")
    '[rank<RANK>]: step <NUM>/<NUM> loss <NUM> (<DUR>) saved <PATH> <SIZE>'

The same masked text is what "identical across ranks" means when repeats are
collapsed (`collapse_ranks`). Masks keep words: ``rank 3`` and ``rank 5`` mask
alike, ``loss`` and ``lr`` do not.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

# Placeholder names, in the order the rules run (earlier rules win on overlaps).
MASKS = ("TS", "UUID", "URL", "IP", "PATH", "HEX", "SIZE", "DUR", "RANK", "NUM", "ID")

_TIME = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # 2024-05-01 12:00:01,123 / 2024-05-01T12:00:01.5Z / 2005-06-03-15.42.50.675872 (BGL)
    # / 2024-05-01_12:00:00 (torchrun) / bare dates; then clock times 12:00:01.123.
    ("TS", re.compile(
        r"\b\d{4}-\d{2}-\d{2}(?:[T _\-]\d{2}[:.]\d{2}(?:[:.]\d{2}(?:[.,]\d+)?)?"
        r"(?:Z|[+-]\d{2}:?\d{2})?)?(?!\d)"
        r"|\b\d{2,4}/\d{2}/\d{2,4}\b"
        rf"|(?<![\d:.])\b{_TIME}\b(?![:\d])")),
    ("UUID", re.compile(
        r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")),
    ("URL", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s\"'<>]+")),
    # IPv4 with an optional port; "/10.0.0.1:50010" (HDFS) keeps its slash.
    ("IP", re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\w.])")),
    # Absolute, home or dot-relative paths: /a, ~/a/b, ./ckpt/x.pt (not "and/or", "3/30").
    ("PATH", re.compile(r"(?<![\w/.~\-<>])(?:~|\.{1,2})?(?:/[\w.@+%=,~\-]+)+/?")),
    ("HEX", re.compile(
        r"\b0[xX][0-9a-fA-F]+\b|\b[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){3,}\b")),
    # 1.5GB, 2048 MiB, 5.2 KB, 512 bytes (binary and decimal units).
    ("SIZE", re.compile(
        r"(?<![\w.])\d+(?:\.\d+)?\s?(?:[KMGTPE]i?B|[kK]B|bytes?|B)(?![\w])")),
    # 12.3s, 450ms, 600000 milliseconds, 3 min, 1.5h.
    ("DUR", re.compile(
        r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|milliseconds?|microseconds?|s|secs?"
        r"|seconds?|mins?|minutes?|h|hrs?|hours?)(?![\w])")),
    # rank 3, Rank: 3, [rank3], local_rank=2, torchrun's [default3]: prefix.
    ("RANK", re.compile(r"(?i)(?<![a-z])((?:rank|default)\s*[:=#]?\s*)\d+")),
)
# Runs of characters with a digit, e.g. "12", "1.96e-02", "blk_-160899", "x86_64"; the
# callback strips leading/trailing punctuation and types what is left.
_DIGITS = re.compile(r"[\w.+\-]*\d[\w.+\-]*")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:[.,]\d+)*|\d*\.\d+)(?:[eE][-+]?\d+)?")
_HEXLIKE = re.compile(r"(?=.*[a-fA-F])[0-9a-fA-F]{6,}")
_EDGE = ".+-"


def _digits(match: re.Match[str]) -> str:
    token = match.group()
    core = token.strip(_EDGE)
    if not core or not any(c.isdigit() for c in core):
        return token
    start = token.index(core)
    head, tail = token[:start], token[start + len(core):]
    if head.endswith(("-", "+")) and _NUMBER.fullmatch(head[-1] + core):
        head, core = head[:-1], head[-1] + core  # a sign belongs to its number
    if _NUMBER.fullmatch(core):
        name = "NUM"
    elif _HEXLIKE.fullmatch(core):
        name = "HEX"
    else:
        name = "ID"
    return f"{head}<{name}>{tail}"


def _replacement(name: str) -> str | Callable[[re.Match[str]], str]:
    if name == "RANK":
        return lambda m: f"{m.group(1)}<RANK>"
    return f"<{name}>"


_COMPILED = tuple((pattern, _replacement(name)) for name, pattern in _RULES)
_CANDIDATE = re.compile(r"[\d/]").search  # tokens without a digit or slash stay as they are
_PLAIN_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?").fullmatch
# A number and its unit, or "rank" and its number, written as two tokens ("2048 MiB").
_SPLIT_UNIT = re.compile(
    r"<NUM> (?:(?P<SIZE>[KMGTPE]i?B|[kK]B|bytes?|B)|(?P<DUR>ns|us|µs|ms|milliseconds?"
    r"|microseconds?|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?))(?![\w])"
    r"|(?P<RANK>(?i:(?<![a-z])rank)[:=#]?) <NUM>")


# A ctime/syslog date after masking: "Sun Jul <NUM> <TS> <NUM>", "Jul <NUM> <TS>",
# "Mon, Jun <NUM> <NUM>": a weekday or a clock time marks it as a date, not words.
_DAY_NAMES = "Mon|Tue|Wed|Thu|Fri|Sat|Sun"
_MONTH_NAMES = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_CALENDAR_DATE = re.compile(
    rf"(?<!\S)(?:(?:{_DAY_NAMES}),? (?:{_MONTH_NAMES}) <NUM>(?:,? <TS>)?(?:,? <NUM>)?"
    rf"|(?:{_MONTH_NAMES}) <NUM>,? <TS>(?:,? <NUM>)?)(?!\S)")


def _unit(match: re.Match[str]) -> str:
    name = match.lastgroup
    return f"{match.group('RANK')} <RANK>" if name == "RANK" else f"<{name}>"


@functools.lru_cache(maxsize=1 << 16)
def _mask_token(token: str) -> str:
    if _PLAIN_NUMBER(token):
        return "<NUM>"
    for pattern, replacement in _COMPILED:
        token = pattern.sub(replacement, token)
    return _DIGITS.sub(_digits, token)


def mask(text: str) -> str:
    """`text` with its variable parts replaced by placeholders (``<NUM>``, ``<PATH>``, ...;
    see `MASKS`) and its whitespace collapsed to single spaces. Deterministic and
    idempotent: ``mask(mask(x)) == mask(x)``."""
    if not isinstance(text, str):
        raise TypeError(f"mask() takes one line of text (str), not {type(text).__name__}")
    return _mask(text)


@functools.lru_cache(maxsize=1 << 14)  # a diagnosis masks each line a few times
def _mask(text: str) -> str:
    tokens = text.split()
    for i, token in enumerate(tokens):
        if _CANDIDATE(token):
            tokens[i] = _mask_token(token)

    masked = " ".join(tokens)
    if "<NUM>" in masked:
        masked = _SPLIT_UNIT.sub(_unit, masked)
        masked = _CALENDAR_DATE.sub("<TS>", masked)
    return masked


# --- headers ------------------------------------------------------------------------------
# A logging header (timestamp, level, logger or component, pid, rank tag) repeats on every
# line of a source; left in, its tokens make any two lines of equal length look alike to
# Drain. Loghub splits headers off with one format string per dataset (Zhu et al. 2019);
# labcoat strips them generically: the leading run of masked values, separators, level
# words, bracketed tags, month/day names and short all-caps words, and then one logger or
# component name ("train -", "dfs.DataNode$PacketResponder:", syslog's "host sshd[12]:"),
# provided the run holds a timestamp or a level word (so "[rank3]: step 5", "lr: 3e-4" and
# "CUDA out of memory" keep their words).
_LEVELS = frozenset({"TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "SEVERE",
                     "CRITICAL", "FATAL"})
_CALENDAR = frozenset({"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                       "Nov", "Dec", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"})
_SEPARATORS = frozenset({"-", "|", ":", "::", "--", "-:", "]", "[", "@"})
_MASKED_VALUE = re.compile(r"[\[\](),:|\-./]*(?:<[A-Z]+>[\[\](),:|\-./_]*)+")
_BRACKETED = re.compile(r"(?:<[A-Z]+>\])?(?:\[[^\]\s]*\])+:?")
_PY_LOGGING = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:")  # basicConfig
_CAPS = re.compile(r"[A-Z][A-Z0-9_]{1,9}:?")
_COMPONENT = re.compile(r"[A-Za-z_][\w.$/\-]*(?:\[<NUM>\]:|:<NUM>\]|:)")  # x: x[1]: x.py:1]
_LOGGER = re.compile(r"[A-Za-z_][\w.$/\-:<>]*")


def strip_header(masked: str) -> str:
    """`masked` (the output of `mask`) without a leading logging header, if it has one."""
    found = _PY_LOGGING.match(masked)
    if found and found.end() < len(masked):
        return masked[found.end():].lstrip() or masked
    tokens = masked.split(" ")
    i, anchored, n = 0, False, min(len(tokens), 14)
    while i < n - 1:  # never strip the last token: a header needs a message after it
        token = tokens[i]
        word = token.strip("[]:")
        if token in _SEPARATORS or _MASKED_VALUE.fullmatch(token) or word in _CALENDAR:
            anchored = anchored or "<TS>" in token
        elif word in _LEVELS:
            anchored = True
        elif _BRACKETED.fullmatch(token):
            anchored = anchored or "<TS>" in token or any(
                w in _LEVELS for w in re.findall(r"[A-Z]+", token))
        elif _CAPS.fullmatch(token):  # RAS KERNEL, alert tags; kept unless a header anchors
            pass
        else:
            break
        i += 1
    if not anchored:
        return masked
    if i < n - 1 and _COMPONENT.fullmatch(tokens[i]):
        i += 1
    elif i < n - 2 and _LOGGER.fullmatch(tokens[i]) and _COMPONENT.fullmatch(tokens[i + 1]):
        i += 2  # syslog: "host program[pid]:"
    elif i < n - 2 and tokens[i + 1] in ("-", "|") and _LOGGER.fullmatch(tokens[i]):
        i += 2
        while i < n - 1 and tokens[i] in _SEPARATORS:
            i += 1
        if i < n - 1 and tokens[i].strip("[]:") in _LEVELS:  # "name - LEVEL - message"
            i += 1
            while i < n - 1 and tokens[i] in _SEPARATORS:
                i += 1
    return " ".join(tokens[i:])
