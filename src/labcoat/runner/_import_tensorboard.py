"""TensorBoard runs: every directory holding `events.out.tfevents.*` files is one run, its
scalars the `simple_value` summaries TensorBoard's `EventAccumulator.Scalars` returns
(float32, kept exactly) and TF2's scalar tensors (`EventAccumulator.Tensors` of the
scalars plugin), its files read in name order as TensorBoard reads them.

The files are TFRecord frames (length, masked CRC32C, Event proto, masked CRC32C) read
here directly, every checksum checked: the accumulator stops silently at a damaged
record; an import names the file and the byte offset and imports nothing. A last record
cut short (a run still writing, or killed) ends the file, as it does for TensorBoard,
and the import says so.
"""

from __future__ import annotations

import functools
import re
import struct
from pathlib import Path

import numpy as np

from labcoat.errors import LabcoatError
from labcoat.runner._external import ExternalRun

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I").unpack_from
_LENGTH = struct.Struct("<Q").unpack_from
_MASK = 0xA282EAD8


def read_tensorboard(path: Path, notes: list[str] | None = None) -> list[ExternalRun]:
    """One run per directory under `path` (or `path` itself) with event files. Files
    whose last record is cut short are named in `notes`."""
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
        scalar_tags: set[str] = set()  # TF2's tensor scalars, named once per tag
        for file in sorted(in_folder, key=lambda f: f.name):
            _read_file(run, file, Event, crc, scalar_tags, [] if notes is None else notes)
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


def _read_file(run: ExternalRun, file: Path, event_type: type, crc, scalar_tags: set[str],
               notes: list[str]) -> None:
    """Every scalar of the file, in record order (a later point at a step wins). A file
    whose last record is cut short (a run still writing, or killed) is read up to it, as
    TensorBoard reads it, and `notes` says so."""
    data = file.read_bytes()
    starts, lengths, cut = _frames(file, data, crc)
    if cut is not None:
        notes.append(f"{file}: the last record is cut short at byte {cut} (a run still "
                     f"writing, or killed); the records before it were imported")
    groups = _scalars(data, starts, lengths)
    done = np.zeros(len(starts), dtype=bool)
    for index, *_ in groups:
        done[index] = True
    for i in np.flatnonzero(~done).tolist():  # records of any other layout: protobuf
        start = int(starts[i])
        for tag, step, value, wall in _decoded(file, data, start, start + int(lengths[i]),
                                               event_type, scalar_tags):
            groups.append((np.array([i]), tag, np.array([step]), np.array([value]),
                           np.array([wall])))
    by_tag: dict[str, list[tuple]] = {}
    for group in groups:
        by_tag.setdefault(group[1], []).append(group)
    for tag, parts in by_tag.items():
        order = np.argsort(np.concatenate([p[0] for p in parts]), kind="stable")
        steps, values, walls = (np.concatenate([p[k] for p in parts])[order].tolist()
                                for k in (2, 3, 4))
        series = dict(zip(steps, zip(values, walls, strict=True), strict=True))
        before = run.metrics.get(tag)
        repeated = len(steps) - len(series) + (len(before.keys() & series.keys())
                                               if before else 0)
        if repeated:
            run.repeated[tag] = run.repeated.get(tag, 0) + repeated
        run.metrics[tag] = {**before, **series} if before else series


def _frames(file: Path, data: bytes, crc) -> tuple[np.ndarray, np.ndarray, int | None]:
    """Where each record's Event starts and its length, both checksums of every record
    checked (TFRecord: length u64, masked CRC32C of it, data, masked CRC32C of the data),
    and the offset of a last record cut short (None if the records end with the file).
    The walk reads only the lengths; the checksums are computed for all records of one
    length at once (numpy), a byte column at a time."""
    offsets = []
    offset, end = 0, len(data)
    header, keep = _LENGTH, offsets.append
    try:
        while offset < end:
            keep(offset)
            offset += header(data, offset)[0] + 16
    except struct.error:
        offset = end + 1
    cut = None
    if offset != end:  # cut short, or a damaged length sent the walk astray: say where
        cut = end = _check_each(file, data, crc)
        offsets = [o for o in offsets if o < cut]
    raw = np.frombuffer(data, dtype=np.uint8)
    first = np.asarray(offsets, dtype=np.int64) + 12
    size = np.diff(np.append(first, end + 12)) - 16
    bad = []
    for length in np.unique(size).tolist():
        at = first[size == length]
        if len(at) < 2 * length:  # few long records (images, graphs): numpy's loop runs
            bad += [int(a) - 12 for a in at.tolist()  # once per byte column; C per record
                    if not _record_ok(data, int(a) - 12, length, crc)]
            continue
        heads = raw[(at - 12)[:, None] + np.arange(8)]
        bodies = raw[at[:, None] + np.arange(length)]
        stored = raw[(at - 4)[:, None] + np.arange(4)].copy().view("<u4")[:, 0]
        footers = raw[(at + length)[:, None] + np.arange(4)].copy().view("<u4")[:, 0]
        wrong = (_masked_crc(heads) != stored) | (_masked_crc(bodies) != footers)
        bad += (at[wrong] - 12).tolist()
    if bad:  # whole records only: the record by record check raises
        _check_each(file, data[:min(bad) + 12 + header(data, min(bad))[0] + 4], crc)
    return first, size, cut


def _record_ok(data: bytes, offset: int, length: int, crc) -> bool:
    """Both checksums of the record at `offset`, with the C CRC32C."""
    body = offset + 12
    return _masked(crc(data[offset:offset + 8])) == _HEADER.unpack_from(data, offset)[1] \
        and _masked(crc(data[body:body + length])) == _FOOTER(data, body + length)[0]


def _masked(c: int) -> int:
    """A CRC32C masked as TFRecord stores it."""
    return (((c >> 15) | (c << 17)) + _MASK) & 0xFFFFFFFF


def _masked_crc(rows: np.ndarray) -> np.ndarray:
    """CRC32C (Castagnoli) of each row of bytes, masked as TFRecord stores it."""
    crc = np.full(len(rows), 0xFFFFFFFF, dtype=np.uint32)
    table = _crc_table()
    for column in rows.T:
        crc = table[(crc ^ column) & 0xFF] ^ (crc >> np.uint32(8))
    crc ^= np.uint32(0xFFFFFFFF)
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK)


@functools.cache
def _crc_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):  # reflected polynomial 0x82F63B78 (RFC 3720, B.4)
        table = np.where(table & 1, (table >> np.uint32(1)) ^ np.uint32(0x82F63B78),
                         table >> np.uint32(1))
    return table.astype(np.uint32)


def _check_each(file: Path, data: bytes, crc) -> int:
    """Record by record: the offset of a last record cut short (its length passes its
    checksum, or not all of its header was written, and the file ends before the record
    does: a run still writing, or killed), every record before it checked; any other
    damage raises, naming the first damaged record's offset and what is wrong with it."""
    offset, end = 0, len(data)
    while offset < end:
        if offset + 12 > end:
            return offset
        length, length_crc = _HEADER.unpack_from(data, offset)
        if _masked(crc(data[offset:offset + 8])) != length_crc:
            _damaged(file, offset, "a record length fails its checksum")
        start, stop = offset + 12, offset + 12 + length
        if stop + 4 > end:
            return offset
        if _masked(crc(data[start:stop])) != _FOOTER(data, stop)[0]:
            _damaged(file, offset, "a record fails its checksum")
        offset = stop + 4
    _damaged(file, 0, "the records do not add up")  # pragma: no cover - a walk disagreed


def _scalars(data: bytes, first: np.ndarray, size: np.ndarray) -> list[tuple]:
    """The records that are one `simple_value` scalar laid out as torch's SummaryWriter
    writes it (wall_time, step, summary { value { tag, simple_value } }), decoded together
    with numpy: records of one length whose bytes match the first one's everywhere but in
    the wall time, step and value. Returns (record indices, tag, steps, values, wall
    times) per group; any other record is left to protobuf, so both give the same points."""
    groups: list[tuple] = []
    raw = np.frombuffer(data, dtype=np.uint8)
    for length in np.unique(size).tolist():
        index = np.flatnonzero(size == length)
        layout = _layout(data, int(first[index[0]]), length)
        if layout is None:
            continue
        tag, step_at, step_len, value_at = layout
        rows = raw[first[index, None] + np.arange(length)]
        fixed = np.ones(length, dtype=bool)
        fixed[1:9] = False
        fixed[step_at:step_at + step_len] = False
        fixed[value_at:value_at + 4] = False
        same = (rows[:, fixed] == rows[0, fixed]).all(axis=1)
        if step_len:  # a varint of exactly step_len bytes: continuation bits 1...1 0
            cont = rows[:, step_at:step_at + step_len] >= 0x80
            same &= cont[:, :-1].all(axis=1) & ~cont[:, -1]
        rows, index = rows[same], index[same]
        if not len(index):
            continue
        step = np.zeros(len(index), dtype=np.uint64)
        for k in range(step_len):
            step |= (rows[:, step_at + k].astype(np.uint64) & 0x7F) << np.uint64(7 * k)
        groups.append((index, tag, step.astype(np.int64),  # a negative step wraps, as int64
                       rows[:, value_at:value_at + 4].copy().view("<f4")[:, 0].astype(
                           np.float64),
                       rows[:, 1:9].copy().view("<f8")[:, 0]))
    return groups


def _layout(data: bytes, i: int, length: int) -> tuple[str, int, int, int] | None:
    """(tag, step offset, step bytes, value offset) of a one-scalar Event at data[i:], or
    None for any other layout."""
    end = i + length
    if length < 20 or data[i] != 0x09:
        return None
    at = i + 9
    step_at, step_len = 9, 0
    if data[at] == 0x10:  # proto3 leaves out a zero step
        after = _varint_end(data, at + 1)
        step_at, step_len, at = at + 1 - i, after - at - 1, after
    if data[at] != 0x2A:
        return None
    for _ in range(2):  # summary { value { ...
        at, size = _varint(data, at + 1)
        if at + size != end or data[at] != 0x0A:
            return None
    at, size = _varint(data, at + 1)
    tag_end = at + size
    if tag_end + 5 != end or data[tag_end] != 0x15:
        return None
    try:
        tag = data[at:tag_end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return tag, step_at, step_len, tag_end + 1 - i


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            return i, value
        shift += 7


def _varint_end(data: bytes, i: int) -> int:
    while data[i] >= 0x80:
        i += 1
    return i + 1


def _decoded(file: Path, data: bytes, start: int, stop: int, event_type: type,
             scalar_tags: set[str]) -> list[tuple[str, int, float, float]]:
    """Every scalar of any Event, through TensorBoard's protobuf classes: a simple_value
    (TF1, torch), or a one-element tensor of a tag whose metadata names the scalars plugin
    (TF2's `tf.summary.scalar`, Keras; the metadata comes with a tag's first value only,
    so `scalar_tags` carries it across records and files, as TensorBoard does)."""
    try:
        event = event_type.FromString(data[start:stop])
    except Exception:  # noqa: BLE001 - protobuf's DecodeError, whatever the backend
        _damaged(file, start, "a record is not a TensorBoard event")
    if not event.HasField("summary"):
        return []
    out = []
    for v in event.summary.value:
        if v.HasField("simple_value"):
            out.append((v.tag, event.step, v.simple_value, event.wall_time))
            continue
        if v.metadata.plugin_data.plugin_name == "scalars":
            scalar_tags.add(v.tag)
        if v.HasField("tensor") and v.tag in scalar_tags:
            value = _tensor_scalar(v.tensor)
            if value is not None:
                out.append((v.tag, event.step, value, event.wall_time))
    return out


def _tensor_scalar(tensor) -> float | None:
    """A one-element numeric TensorProto's value, as `tensor_util.make_ndarray` reads it
    (float32 widened exactly); None for anything else."""
    from tensorboard.util.tensor_util import make_ndarray

    try:
        array = make_ndarray(tensor)
    except Exception:  # noqa: BLE001 - an unsupported dtype: not a scalar we can read
        return None
    if array.size != 1 or array.dtype.kind not in "fiu":
        return None
    return float(array.reshape(-1)[0])


def _damaged(file: Path, offset: int, what: str) -> None:
    raise LabcoatError(f"{file}: damaged TensorBoard event file at byte {offset} ({what}); "
                       "nothing was imported. Move the file aside (TensorBoard itself would "
                       "silently stop reading there) and import again")


def _crc32c():
    try:
        import google_crc32c
        return google_crc32c.value
    except ImportError:  # TensorBoard's own pure-Python CRC: correct, slower
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c as slow
        return slow
