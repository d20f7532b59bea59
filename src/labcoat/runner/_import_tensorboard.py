"""TensorBoard runs: every directory holding `events.out.tfevents.*` files is one run, its
scalars the `simple_value` summaries TensorBoard's `EventAccumulator.Scalars` returns
(float32, kept exactly), its files read in name order as TensorBoard reads them.

The files are TFRecord frames (length, masked CRC32C, Event proto, masked CRC32C) read
here directly, every checksum checked: the accumulator stops silently at a damaged
record; an import names the file and the byte offset and imports nothing.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from labcoat.errors import LabcoatError
from labcoat.runner._external import ExternalRun

_HEADER = struct.Struct("<QI")
_MASK = 0xA282EAD8


def read_tensorboard(path: Path) -> list[ExternalRun]:
    """One run per directory under `path` (or `path` itself) with event files."""
    try:
        from tensorboard.compat.proto.event_pb2 import Event
    except ImportError:
        raise LabcoatError("reading TensorBoard event files needs the tensorboard package: "
                           "pip install 'labcoat[tensorboard]'") from None
    if not path.exists():
        raise LabcoatError(f"{path}: no such TensorBoard log directory")
    files = [path] if path.is_file() else sorted(path.rglob("*tfevents*"))
    files = [f for f in files if f.is_file()]
    if not files:
        raise LabcoatError(f"{path}: no TensorBoard event files (events.out.tfevents.*) here")
    by_dir: dict[Path, list[Path]] = {}
    for file in files:
        by_dir.setdefault(file.parent, []).append(file)
    crc = _crc32c()
    runs = []
    root = path if path.is_dir() else path.parent
    for folder, in_folder in sorted(by_dir.items()):
        name = folder.relative_to(root).as_posix() if folder != root else "."
        run = ExternalRun("tensorboard", name, str(folder))
        run.keys.update(_path_keys(name))
        for file in sorted(in_folder, key=lambda f: f.name):
            _read_file(run, file, Event, crc)
        runs.append(run)
    return runs


def _path_keys(name: str) -> dict[str, str]:
    """`run` (the directory relative to the log dir), `path.0`, `path.1`, ... (its parts),
    and `key=value` pairs written into a part (`lr=0.1,seed=3`) as `path.key`."""
    keys = {"run": name}
    parts = [] if name == "." else name.split("/")
    for i, part in enumerate(parts):
        keys[f"path.{i}"] = part
        for pair in re.split(r"[,;&]", part):
            key, sep, value = pair.partition("=")
            if sep and key.strip() and not key.strip().isdigit():
                keys[f"path.{key.strip()}"] = value.strip()
    return keys


def _read_file(run: ExternalRun, file: Path, event_type: type, crc) -> None:
    data = file.read_bytes()
    offset, end = 0, len(data)
    parse = event_type.FromString
    while offset < end:
        if offset + 12 > end:
            _damaged(file, offset, "a record header is cut short")
        length, length_crc = _HEADER.unpack_from(data, offset)
        if _masked(crc(data[offset:offset + 8])) != length_crc:
            _damaged(file, offset, "a record length fails its checksum")
        start, stop = offset + 12, offset + 12 + length
        if stop + 4 > end:
            _damaged(file, offset, "the last record is cut short")
        body = data[start:stop]
        if _masked(crc(body)) != struct.unpack_from("<I", data, stop)[0]:
            _damaged(file, offset, "a record fails its checksum")
        offset = stop + 4
        try:
            event = parse(body)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError, whatever the backend
            _damaged(file, start, "a record is not a TensorBoard event")
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            if value.HasField("simple_value"):
                run.add(value.tag, event.step, value.simple_value, event.wall_time)


def _damaged(file: Path, offset: int, what: str) -> None:
    raise LabcoatError(f"{file}: damaged TensorBoard event file at byte {offset} ({what}); "
                       "nothing was imported. Move the file aside (TensorBoard itself would "
                       "silently stop reading there) and import again")


def _masked(crc: int) -> int:
    """TFRecord's masked CRC32C (tensorflow/core/lib/hash/crc32c.h)."""
    return (((crc >> 15) | (crc << 17)) + _MASK) & 0xFFFFFFFF


def _crc32c():
    try:
        import google_crc32c
        return google_crc32c.value
    except ImportError:  # TensorBoard's own pure-Python CRC: correct, slower
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c as slow
        return slow
