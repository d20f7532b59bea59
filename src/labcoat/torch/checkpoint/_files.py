"""Durable file writes: a temporary file in the same directory, fsync, rename, fsync the directory.

After ``write_atomic`` returns, the file is either entirely there under its
final name (and survives a power cut: its data and the directory entry were
fsynced) or, if anything failed, absent. A crash mid-write leaves only a
hidden ``.<name>.tmp-*`` file, which readers ignore.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20  # bytes per read when hashing a file


@dataclass(frozen=True)
class Digest:
    """Size and SHA-256 of a file's content."""

    bytes: int
    sha256: str


class HashingWriter:
    """A write-only stream that hashes (SHA-256) and counts every byte on its way to `file`.

    ``torch.save`` accepts any object with ``write`` and ``flush``, so the hash
    of what was serialized comes for free, without a second pass over the data.
    """

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.bytes = 0
        self._sha256 = hashlib.sha256()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self.file.write(data)
        self._sha256.update(data)
        self.bytes += len(data)
        return len(data)

    def flush(self) -> None:
        self.file.flush()

    def digest(self) -> Digest:
        return Digest(self.bytes, self._sha256.hexdigest())


def temp_name(path: Path) -> Path:
    """Where `path` is written before it is renamed into place (same directory, hidden)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def is_temp(path: Path) -> bool:
    return path.name.startswith(".") and ".tmp-" in path.name


def write_atomic(path: Path, produce: Callable[[HashingWriter], object]) -> Digest:
    """Write `path` atomically with `produce(writer)`; returns the digest of the bytes written.

    On any error the temporary file is removed and the error propagates; an
    existing file at `path` is then left as it was.
    """
    tmp = temp_name(path)
    try:
        with open(tmp, "xb") as f:
            writer = HashingWriter(f)
            produce(writer)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return writer.digest()


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a rename, a new file, a deletion) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_cached(path: Path) -> None:
    """Ask the OS to forget its cached copy of a file (already fsynced), so the next read
    comes from the device. A no-op where ``posix_fadvise`` does not exist (macOS, Windows)."""
    if not hasattr(os, "posix_fadvise"):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def file_digest(path: Path) -> Digest:
    """Size and SHA-256 of the file at `path`, read in chunks."""
    sha, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return Digest(size, sha.hexdigest())
