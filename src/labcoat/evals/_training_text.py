"""Training text streamed from files as blocks of normalized words, never loaded whole.

Formats, by file name: `.jsonl` (optionally `.jsonl.gz`) is one JSON object per
line with the document in a text field (default "text"); anything else is plain
UTF-8 text (optionally gzip-compressed, `.gz`) read as one stream. Plain text is
read in blocks cut at whitespace; the last `overlap` words of a block are read
again at the start of the next, so n-grams of up to overlap + 1 words that span
blocks are seen. JSONL documents are separate: no n-gram spans two records.
Byte offsets are of the decompressed stream.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from labcoat.errors import LabcoatError
from labcoat.evals._ngrams import (
    Hasher,
    ascii_kept,
    normalize_ascii,
    normalize_prepared,
    normalize_text,
    prepare,
    translate_ascii,
)

_WHITESPACE = b" \n\t\r\x0b\x0c\x1c\x1d\x1e\x1f"
_SUB_BLOCK = 1 << 14  # non-ASCII text is prepared in pieces this big, to locate hits cheaply
_TOKEN = re.compile(r"\S+")


@dataclass
class Block:
    """Normalized words of part of one file.

    buf: (m,) uint8 normalized bytes; starts, ends: (w,) byte range of each word in
    buf; hashes: (w,) uint64 word hashes; doc: (w,) document of each word (JSONL) or
    None (one stream); locate(i) -> (byte offset, line or None) of word i in the file.
    """

    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    hashes: np.ndarray
    doc: np.ndarray | None
    locate: Callable[[int], tuple[int, int | None]]
    raw_bytes: int  # new bytes of the file this block covers (overlap not counted twice)


def training_files(paths: list[Path]) -> list[Path]:
    """Files to scan: each path, or every non-hidden file under a directory (sorted)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file()
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
            if not found:
                raise LabcoatError(f"{path}: directory has no files to scan; give training "
                                   "text files (.txt, .jsonl, optionally .gz)")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise LabcoatError(f"{path}: no such training file or directory; check the "
                               "--train path")
    return files


def is_jsonl(path: Path) -> bool:
    return path.name.removesuffix(".gz").endswith(".jsonl")


def _open(path: Path) -> IO[bytes]:
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")  # noqa: SIM115
    except OSError as e:
        raise LabcoatError(f"{path}: cannot read ({e.strerror})") from None


def stream_blocks(path: Path, hasher: Hasher, *, overlap: int, block_bytes: int,
                  text_field: str = "text") -> Iterator[Block]:
    """Blocks of `path` (format from its name; see the module docstring)."""
    try:
        if is_jsonl(path):
            yield from _jsonl_blocks(path, hasher, block_bytes, text_field)
        else:
            yield from _plain_blocks(path, hasher, overlap, block_bytes)
    except (gzip.BadGzipFile, EOFError) as e:
        raise LabcoatError(f"{path}: not a valid gzip file ({e})") from None


def _plain_blocks(path: Path, hasher: Hasher, overlap: int, block_bytes: int
                  ) -> Iterator[Block]:
    start = 0  # file offset of carry[0]
    carry = b""
    consumed = 0  # file bytes already counted in raw_bytes
    with _open(path) as f:
        while True:
            data = f.read(block_bytes)
            eof = not data
            buf = carry + data
            if not buf:
                return
            if eof:
                piece, rest = buf, b""
            else:
                cut = max(buf.rfind(bytes([b])) for b in _WHITESPACE)
                if cut < 0:  # one enormous token: read on until whitespace
                    carry = buf
                    continue
                piece, rest = buf[: cut + 1], buf[cut + 1:]
            block = _plain_block(path, piece, start, hasher)
            block.raw_bytes = start + len(piece) - consumed
            consumed = start + len(piece)
            yield block
            if eof:
                return
            words = block.starts.size
            # Re-read the last `overlap` words so n-grams spanning the cut are seen.
            tail = block.locate(words - overlap)[0] - start if overlap and words > overlap \
                else (0 if overlap else len(piece))
            carry = piece[tail:] + rest
            start += tail


def _plain_block(path: Path, piece: bytes, start: int, hasher: Hasher) -> Block:
    if piece.isascii():
        buf = normalize_ascii(piece)
        starts, ends, hashes = hasher.words(buf)
        kept: list[np.ndarray] = []  # positions of kept bytes, computed when first needed

        def locate_ascii(i: int) -> tuple[int, int | None]:
            if not kept:
                kept.append(ascii_kept(piece))
            return start + int(kept[0][starts[i]]), None

        return Block(buf, starts, ends, hashes, None, locate_ascii, 0)
    # Non-ASCII: NFKC and lowercase sub-blocks cut at whitespace (neither step acts
    # across whitespace), remembering where each starts to locate hits later.
    raw_offsets, parts, texts = [], [], []
    position = 0
    while position < len(piece):
        end = min(position + _SUB_BLOCK, len(piece))
        if end < len(piece):
            cut = max(piece.rfind(bytes([b]), position, end) for b in _WHITESPACE)
            if cut >= position:
                end = cut + 1
            else:  # no whitespace in this window: extend to the next one
                end = min((i for i in (piece.find(bytes([b]), end) for b in _WHITESPACE)
                           if i >= 0), default=len(piece) - 1) + 1
        try:
            text = piece[position:end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise LabcoatError(f"{path}: not UTF-8 text at byte {start + position + e.start}; "
                               "convert the file to UTF-8") from None
        raw_offsets.append(position)
        texts.append(text)
        parts.append(prepare(text).encode("utf-8"))
        position = end
    buf, part_starts = normalize_prepared(parts)
    starts, ends, hashes = hasher.words(buf)
    firsts = np.searchsorted(starts, part_starts)  # first word of each sub-block

    def locate(i: int) -> tuple[int, int | None]:
        j = int(np.searchsorted(firsts, i, side="right")) - 1
        return start + raw_offsets[j] + _token_offset(texts[j], i - int(firsts[j])), None

    return Block(buf, starts, ends, hashes, None, locate, 0)


def _token_offset(text: str, k: int) -> int:
    """UTF-8 byte offset in `text` of the whitespace token holding normalized word k."""
    count = 0
    for token in _TOKEN.finditer(text):
        count += len(normalize_text(token.group()).split())
        if count > k:
            return len(text[: token.start()].encode("utf-8"))
    return len(text.encode("utf-8"))


def _jsonl_blocks(path: Path, hasher: Hasher, block_bytes: int, text_field: str
                  ) -> Iterator[Block]:
    texts: list[str] = []
    lines: list[int] = []
    offsets: list[int] = []
    size = offset = 0
    with _open(path) as f:
        for number, raw in enumerate(f, start=1):
            line_offset, offset = offset, offset + len(raw)
            size += len(raw)
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except UnicodeDecodeError:
                raise LabcoatError(f"{path}:{number}: not UTF-8 text; convert the file to "
                                   "UTF-8") from None
            except json.JSONDecodeError as e:
                raise LabcoatError(f"{path}:{number}: not valid JSON ({e.msg}); fix or remove "
                                   "the line") from None
            if not isinstance(record, dict) or text_field not in record:
                found = ", ".join(map(str, record)) if isinstance(record, dict) else \
                    type(record).__name__
                raise LabcoatError(f"{path}:{number}: no {text_field!r} field (found: "
                                   f"{found or 'nothing'}); name the text field with "
                                   "--text-field")
            text = record[text_field]
            if not isinstance(text, str):
                raise LabcoatError(f"{path}:{number}: field {text_field!r} is "
                                   f"{type(text).__name__}, not a string; name the text field "
                                   "with --text-field")
            texts.append(text)
            lines.append(number)
            offsets.append(line_offset)
            if size >= block_bytes:
                yield _jsonl_block(texts, lines, offsets, hasher, size)
                texts, lines, offsets, size = [], [], [], 0
    if texts:
        yield _jsonl_block(texts, lines, offsets, hasher, size)
    elif size:  # only blank lines since the last block: count their bytes too
        yield _jsonl_block([""], [0], [0], hasher, size)


def _jsonl_block(texts: list[str], lines: list[int], offsets: list[int], hasher: Hasher,
                 size: int) -> Block:
    joined = "\n".join(texts)
    if joined.isascii():
        raws = [translate_ascii(t.encode("ascii")) for t in texts]
        lengths = np.fromiter((len(r) + 1 for r in raws), dtype=np.int64, count=len(raws))
        buf = np.frombuffer(b" ".join(raws), dtype=np.uint8)
        starts, ends, hashes = hasher.words(buf)
        doc_starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        doc = np.searchsorted(doc_starts, starts, side="right") - 1
    else:  # per document only C-level string calls; the rest on the joined bytes
        buf, doc_starts = normalize_prepared([prepare(t).encode("utf-8") for t in texts])
        starts, ends, hashes = hasher.words(buf)
        doc = np.searchsorted(doc_starts, starts, side="right") - 1
    return Block(buf, starts, ends, hashes, doc,
                 lambda i: (offsets[int(doc[i])], lines[int(doc[i])]), size)
