"""Sealed directories: a hash manifest over a checkpoint another library wrote.

Hugging Face ``Trainer`` and Lightning write their own checkpoints (many files,
no completion marker, no fsync). `seal_directory` makes one count the way a
labcoat checkpoint counts: it fsyncs every file, hashes it (SHA-256, size) and
writes ``labcoat-manifest.json`` last, atomically. `verify_directory` accepts
the directory only if that manifest exists, parses, and every file it lists
still has its size and hash; so a checkpoint cut short by a crash (no manifest
yet) or changed afterwards (a flipped byte, a truncated file) is never resumed
from. The hashing and the size/hash comparison are `_files` and `_layout`'s,
shared with the `Checkpointer`.

labcoat-manifest.json::

    {"format": "labcoat.sealed", "version": 1, "step": 40, "time": <unix>,
     "files": {"model.safetensors": {"bytes": 1234, "sha256": "<hex>"}, ...}}
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from labcoat.torch.checkpoint._files import file_digest, fsync_dir, is_temp, write_atomic
from labcoat.torch.checkpoint._layout import Corrupt, _check_file

SEAL = "labcoat-manifest.json"
SEAL_FORMAT = "labcoat.sealed"
SEAL_VERSION = 1


def seal_directory(path: str | os.PathLike[str], *, step: int,
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Make the checkpoint at `path` durable and write its manifest last; returns the manifest.

    step: the training step the checkpoint holds. extra: more JSON-ready fields.
    Every regular file below `path` (but an existing seal and temporary files) is
    fsynced and hashed.
    """
    path = Path(path)
    (path / SEAL).unlink(missing_ok=True)  # a stale seal must not vouch for new files
    files: dict[str, dict[str, Any]] = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
        name = file.relative_to(path).as_posix()
        if name == SEAL or is_temp(file):
            continue
        with open(file, "rb") as f:
            os.fsync(f.fileno())
        digest = file_digest(file)
        files[name] = {"bytes": digest.bytes, "sha256": digest.sha256}
    for directory in {file.parent for file in path.rglob("*") if file.is_file()} | {path}:
        fsync_dir(directory)
    manifest = {"format": SEAL_FORMAT, "version": SEAL_VERSION, "step": int(step),
                "time": time.time(), "files": files, **(extra or {})}
    text = json.dumps(manifest, indent=1, sort_keys=True).encode()
    write_atomic(path / SEAL, lambda w: w.write(text))
    return manifest


def verify_directory(path: str | os.PathLike[str]) -> str | None:
    """None if the checkpoint at `path` is sealed and unchanged, else the reason it is not."""
    path = Path(path)
    try:
        raw = (path / SEAL).read_bytes()
    except FileNotFoundError:
        return f"no {SEAL}: the checkpoint was not completed (a crash mid-save) or not sealed"
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"{SEAL} is not valid JSON ({e})"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (not isinstance(manifest, dict) or manifest.get("format") != SEAL_FORMAT
            or manifest.get("version") != SEAL_VERSION or not isinstance(files, dict)
            or not files):
        return f"{SEAL} is not a version-{SEAL_VERSION} {SEAL_FORMAT} manifest with files"
    for name, meta in files.items():
        if (not isinstance(meta, dict) or not isinstance(meta.get("bytes"), int)
                or not isinstance(meta.get("sha256"), str)):
            return f"{SEAL} has no valid entry for {name}"
        try:
            _check_file(path / name, meta)
        except Corrupt as bad:
            return bad.reason
    return None
