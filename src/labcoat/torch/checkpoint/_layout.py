"""The on-disk checkpoint format (version 1): one directory per step, manifest last.

    <directory>/
      step-00000040/
        state.pt        torch.save of the state (plain data only; see _snapshot)
        manifest.json   written last: the completion marker, with sizes and SHA-256s
      step-00000050/
        .state.pt.tmp-1234-9f3a01bc   a write in progress, or one a crash cut short
      corrupt/
        step-00000030/   a checkpoint that failed verification, moved aside by restore()

A checkpoint counts only if its manifest exists, parses, has a known format
and version, and every file it lists has the listed size and SHA-256; then
``state.pt`` is loaded with ``torch.load(weights_only=True)`` (it is never
unpickled otherwise). Temporary files are ignored.

manifest.json::

    {"format": "labcoat.checkpoint", "version": 1, "step": 40, "time": <unix>,
     "files": {"state.pt": {"bytes": 1234, "sha256": "<hex>"}},
     "tracked": {"model": "state_dict", "data_rng": "random.Random", ...},
     "torch": "2.13.0", "policy": {"cost_s": ..., "write_s": ..., "step_s": ...}}

state.pt: {"format", "version", "step", "tracked": {name: {"kind", "state"}},
"rng": {"python", "numpy", "torch", "cuda"}}.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from labcoat.torch.checkpoint._errors import CheckpointError
from labcoat.torch.checkpoint._files import (
    Digest,
    HashingWriter,
    drop_cached,
    file_digest,
    fsync_dir,
    write_atomic,
)

FORMAT = "labcoat.checkpoint"
VERSION = 1
STATE = "state.pt"
MANIFEST = "manifest.json"
CORRUPT_DIR = "corrupt"  # restore() moves checkpoints that fail verification here
_STEP_DIR = re.compile(r"^step-(\d{8,})$")


class Corrupt(Exception):
    """A checkpoint that must not be loaded; `reason` says why.

    deletable: False for a checkpoint in a format newer than this code reads,
    which a newer labcoat may still load (so retention must leave it alone).
    incomplete: no manifest, the residue of a write a crash cut short (never a
    checkpoint, so nothing to keep); any other reason is damage worth keeping.
    """

    def __init__(self, reason: str, *, deletable: bool = True, incomplete: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.deletable = deletable
        self.incomplete = incomplete


@dataclass(frozen=True)
class Written:
    """A checkpoint just written and read back: its directory and its state file's digest."""

    path: Path
    step: int
    digest: Digest


def step_dir(directory: Path, step: int) -> Path:
    return directory / f"step-{step:08d}"


def list_steps(directory: Path) -> list[tuple[int, Path]]:
    """Checkpoint directories in `directory` (complete or not), oldest step first."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        match = _STEP_DIR.match(entry.name)
        if match and entry.is_dir(follow_symlinks=False):
            found.append((int(match.group(1)), Path(entry.path)))
    return sorted(found)


def has_manifest(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def read_verified(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(manifest, state) of the checkpoint at `path`, or Corrupt(reason) if it fails a check."""
    manifest = _read_manifest(path)
    for name, meta in manifest["files"].items():
        if name != STATE:
            _check_file(path / name, meta)
    expected = manifest["files"][STATE]
    try:
        data = (path / STATE).read_bytes()
    except FileNotFoundError:
        raise Corrupt(f"{STATE} is missing although the manifest lists it") from None
    _check_bytes(data, expected, STATE)
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means: do not use it
        raise Corrupt(f"{STATE} does not load with weights_only=True "
                      f"({type(e).__name__}: {e})") from None
    if (not isinstance(state, dict) or state.get("format") != FORMAT
            or state.get("step") != manifest["step"] or not isinstance(state.get("tracked"), dict)
            or not isinstance(state.get("rng"), dict)):
        raise Corrupt(f"{STATE} is not a labcoat checkpoint of step {manifest['step']}")
    return manifest, state


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        raw = (path / MANIFEST).read_bytes()
    except FileNotFoundError:
        raise Corrupt("no manifest: the write did not complete (crash or error mid-save)",
                      incomplete=True) from None
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Corrupt(f"manifest is not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise Corrupt(f"manifest is not a {FORMAT} manifest")
    if manifest.get("version") != VERSION:
        raise Corrupt(f"manifest version {manifest.get('version')!r} is not {VERSION}, the one "
                      "this labcoat reads (upgrade labcoat to read newer checkpoints)",
                      deletable=False)
    match = _STEP_DIR.match(path.name)
    if match is None or manifest.get("step") != int(match.group(1)):
        raise Corrupt(f"manifest step {manifest.get('step')!r} does not match the directory name")
    files = manifest.get("files")
    if not isinstance(files, dict) or STATE not in files or not all(
            isinstance(m, dict) and isinstance(m.get("bytes"), int)
            and isinstance(m.get("sha256"), str) for m in files.values()):
        raise Corrupt("manifest has no valid 'files' entry for state.pt")
    return manifest


def _check_file(file: Path, meta: dict[str, Any]) -> None:
    try:
        digest = file_digest(file)
    except FileNotFoundError:
        raise Corrupt(f"{file.name} is missing although the manifest lists it") from None
    _check_digest(digest, meta, file.name)


def _check_bytes(data: bytes, meta: dict[str, Any], name: str) -> None:
    _check_digest(Digest(len(data), hashlib.sha256(data).hexdigest()), meta, name)


def _check_digest(digest: Digest, meta: dict[str, Any], name: str) -> None:
    if digest.bytes != meta["bytes"]:
        raise Corrupt(f"{name} has {digest.bytes} bytes, the manifest says {meta['bytes']} "
                      "(truncated or overwritten)")
    if digest.sha256 != meta["sha256"]:
        raise Corrupt(f"{name} SHA-256 {digest.sha256[:12]}... does not match the manifest's "
                      f"{meta['sha256'][:12]}... (the file changed after it was written)")


def write(directory: Path, step: int, state: dict[str, Any], manifest_extra: dict[str, Any],
          writer: Callable[[HashingWriter], HashingWriter] = lambda w: w) -> Written:
    """Write the checkpoint of `step` durably and verify it; the manifest goes last.

    An existing directory for `step` (e.g. left by a crashed attempt) is first
    invalidated by removing its manifest. `writer` may wrap the stream the
    state is serialized to (fault injection). Verification reads the state
    file back from the device (its cached pages are dropped first, where the
    OS supports it) and compares its SHA-256 with that of the bytes serialized.
    """
    path = step_dir(directory, step)
    directory.mkdir(parents=True, exist_ok=True)
    if path.exists():
        (path / MANIFEST).unlink(missing_ok=True)
        fsync_dir(path)
    else:
        path.mkdir()
        fsync_dir(directory)
    digest = write_atomic(path / STATE, lambda w: torch.save(state, writer(w)))
    drop_cached(path / STATE)  # so the read-back below comes from the device, not from memory
    on_disk = file_digest(path / STATE)
    if on_disk != digest:
        raise CheckpointError(f"{path / STATE} reads back as {on_disk} but {digest} was written; "
                              "the storage is not keeping what it is given")
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "step": step,
        "time": time.time(),
        "files": {STATE: {"bytes": digest.bytes, "sha256": digest.sha256}},
        "torch": torch.__version__,
        **manifest_extra,
    }
    text = json.dumps(manifest, indent=1, sort_keys=True).encode()
    write_atomic(path / MANIFEST, lambda w: w.write(text))
    return Written(path, step, digest)


def set_aside_dir(directory: Path) -> Path:
    """Where restore() moves corrupt checkpoints: kept as evidence, never loaded."""
    return directory / CORRUPT_DIR


def set_aside(path: Path) -> Path:
    """Move the checkpoint at `path` into ``corrupt/`` beside it, named by its step (a second
    one of the same step gets ``.2``, ``.3``...); the new path. OSError if it cannot move."""
    aside = set_aside_dir(path.parent)
    aside.mkdir(exist_ok=True)
    target, n = aside / path.name, 1
    while target.exists():
        n += 1
        target = aside / f"{path.name}.{n}"
    os.rename(path, target)
    fsync_dir(path.parent)
    return target


def delete(path: Path) -> None:
    """Remove a checkpoint: first its manifest (so a half-deleted one is never loadable)."""
    (path / MANIFEST).unlink(missing_ok=True)
    fsync_dir(path)
    shutil.rmtree(path)
