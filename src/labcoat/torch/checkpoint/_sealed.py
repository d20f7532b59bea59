"""Sealed checkpoints: a hash manifest over a checkpoint another library wrote.

Hugging Face ``Trainer`` (a directory of files) and Lightning (one ``.ckpt``
file) write their own checkpoints, with no completion marker and no fsync.
`seal_directory` / `seal_file` make one count the way a labcoat checkpoint
counts: every file is fsynced and hashed (SHA-256, size) and the manifest is
written last, atomically: ``<dir>/labcoat-manifest.json`` for a directory,
``<file>.labcoat-manifest.json`` beside a file. `verify_directory` /
`verify_file` accept the checkpoint only if that manifest exists, parses, and
every file it lists still has its size and hash; so a checkpoint cut short by a
crash (no manifest yet) or changed afterwards (a flipped byte, a truncated
file) is never resumed from. The hashing and the size/hash comparison are
`_files` and `_layout`'s, shared with the `Checkpointer`.

The manifest::

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
    """Make the checkpoint directory `path` durable and write its manifest last; returns it.

    step: the training step the checkpoint holds. extra: more JSON-ready fields.
    Every regular file below `path` (but the seal and temporary files) is fsynced
    and hashed.
    """
    path = Path(path)
    (path / SEAL).unlink(missing_ok=True)  # a stale seal must not vouch for new files
    names = sorted(p.relative_to(path).as_posix() for p in path.rglob("*")
                   if p.is_file() and not p.is_symlink() and p.name != SEAL and not is_temp(p))
    return _seal(path, names, path / SEAL, step, extra)


def seal_file(path: str | os.PathLike[str], *, step: int,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Make the checkpoint file `path` durable and write its manifest beside it; returns it."""
    path = Path(path)
    manifest = file_manifest(path)
    manifest.unlink(missing_ok=True)
    return _seal(path.parent, [path.name], manifest, step, extra)


def file_manifest(path: str | os.PathLike[str]) -> Path:
    """Where the manifest of the checkpoint file `path` goes: ``<path>.labcoat-manifest.json``."""
    path = Path(path)
    return path.with_name(f"{path.name}.{SEAL}")


def verify_directory(path: str | os.PathLike[str]) -> str | None:
    """None if the checkpoint directory `path` is sealed and unchanged, else why it is not."""
    return _verify(Path(path), Path(path) / SEAL)


def verify_file(path: str | os.PathLike[str]) -> str | None:
    """None if the checkpoint file `path` is sealed and unchanged, else why it is not."""
    return _verify(Path(path).parent, file_manifest(path))


def _seal(root: Path, names: list[str], manifest_path: Path, step: int,
          extra: dict[str, Any] | None) -> dict[str, Any]:
    files: dict[str, dict[str, Any]] = {}
    for name in names:
        with open(root / name, "rb") as f:
            os.fsync(f.fileno())
        digest = file_digest(root / name)
        files[name] = {"bytes": digest.bytes, "sha256": digest.sha256}
    for directory in {(root / name).parent for name in names} | {root}:
        fsync_dir(directory)
    manifest = {"format": SEAL_FORMAT, "version": SEAL_VERSION, "step": int(step),
                "time": time.time(), "files": files, **(extra or {})}
    text = json.dumps(manifest, indent=1, sort_keys=True).encode()
    write_atomic(manifest_path, lambda w: w.write(text))
    return manifest


def _verify(root: Path, manifest_path: Path) -> str | None:
    try:
        raw = manifest_path.read_bytes()
    except FileNotFoundError:
        return (f"no {manifest_path.name}: the checkpoint was not completed (a crash mid-save) "
                "or not sealed")
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"{manifest_path.name} is not valid JSON ({e})"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (not isinstance(manifest, dict) or manifest.get("format") != SEAL_FORMAT
            or manifest.get("version") != SEAL_VERSION or not isinstance(files, dict)
            or not files):
        return (f"{manifest_path.name} is not a version-{SEAL_VERSION} {SEAL_FORMAT} manifest "
                "with files")
    for name, meta in files.items():
        if (not isinstance(meta, dict) or not isinstance(meta.get("bytes"), int)
                or not isinstance(meta.get("sha256"), str)):
            return f"{manifest_path.name} has no valid entry for {name}"
        try:
            _check_file(root / name, meta)
        except Corrupt as bad:
            return bad.reason
    return None
