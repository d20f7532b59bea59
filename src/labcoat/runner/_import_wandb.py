"""W&B offline runs (`wandb/offline-run-*/run-<id>.wandb`), read from the run's
transaction log itself with wandb's own protobuf messages (`wandb.proto`).

The log is LevelDB's log format with a W&B header (what wandb <= 0.30's
`wandb/sdk/internal/datastore.py` read and wandb-core's Go writer still writes): ":W&B",
magic 0xBEE1 and version 0, then 32 KiB blocks of records, each a CRC-32 (zlib's, seeded
with the record type byte), a length, a type (FULL, or FIRST/MIDDLE/LAST for a message
split across blocks) and the bytes of a `wandb_internal.Record`. Every record's checksum is
checked; any damage names the file and imports nothing. A log cut short (a run still
writing, or killed) is read up to its last whole message, and an empty one is left out,
as `wandb leet` reads them; the import says so. `wandb leet inspect --json`
(wandb-core) reads the same log and is the tests' reference; it starts one Go process per
run, ~2 s for 10,000 steps, where this reads a run in a small fraction of that.

A run's keys: `config.<key>` (nested keys dotted), `run_id`, `name`, `group`, `job_type`,
`project`, `tags`. Its metrics: every numeric key of every history row at its step
(nested keys dotted, `_`-prefixed keys skipped).
"""

from __future__ import annotations

import functools
import json
import struct
import zlib
from itertools import chain, repeat
from pathlib import Path
from typing import Any, NoReturn

from labcoat.errors import LabcoatError
from labcoat.runner._external import ExternalRun, flat

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_FRAME = struct.Struct("<IHB")
_SEEDS = [zlib.crc32(bytes([t])) for t in range(LAST + 1)]  # the CRC covers the type byte
_HISTORY, _SUMMARY = 0x12, 0x1A  # a Record's field 2 (history) and 3 (summary) tags


def read_wandb(path: Path, notes: list[str] | None = None) -> list[ExternalRun]:
    """Every run under `path`: a `.wandb` file, a run directory, or a directory holding
    them (e.g. `wandb/`). Logs cut short or empty are named in `notes`."""
    if not path.exists():
        raise LabcoatError(f"{path}: no such W&B directory or .wandb file")
    files = [path] if path.is_file() else sorted(path.rglob("run-*.wandb"))
    # wandb's `latest-run` links to a run directory; a copy made without links holds the
    # same run twice
    named = {f.name for f in files if f.parent.name != "latest-run"}
    files = [f for f in files if f.parent.name != "latest-run" or f.name not in named]
    if not files:
        raise LabcoatError(f"{path}: no W&B run logs (run-<id>.wandb) here; give the wandb/ "
                           "directory or an offline-run-* directory")
    record = _record_type()
    notes = [] if notes is None else notes
    runs = [run for file in files if (run := _read_run(record, file, notes)) is not None]
    if not runs:
        raise LabcoatError(f"{path}: none of the {len(files)} W&B run log(s) here holds a run "
                           "(each is empty or ends before its run record)")
    return runs


def _record_type() -> type:
    try:
        from wandb.proto.wandb_internal_pb2 import Record
    except ImportError as e:
        raise LabcoatError(f"reading W&B runs needs the wandb package (0.31 or later): pip "
                           f"install 'labcoat[wandb]' ({e})") from None
    return Record


def _read_run(record: type, file: Path, notes: list[str]) -> ExternalRun | None:
    """The run of one log; None, with a note, for a log that never got to its run record
    (an empty file: a run that was starting when it was copied)."""
    config: dict[str, Any] = {}
    run = ExternalRun("wandb", file.stem.removeprefix("run-"), str(file.parent))
    saw_run, at_once = False, True
    data = file.read_bytes()
    if not data:
        notes.append(f"{file}: an empty W&B run log (the run never wrote to it); left out")
        return None
    histories, others, cut = _payloads(file, data)
    if cut is not None:
        notes.append(f"{file}: the log ends in a record cut short at byte {cut} (a run still "
                     "writing, or killed); the records before it were imported")
    for payload in others:
        message = _decode(record, file, payload)
        which = message.WhichOneof("record_type")
        if which == "history":  # not laid out as wandb writes them: row by row
            histories.append(payload)
            at_once = False
        elif which == "run":
            saw_run = True
            _run_keys(run, message.run, config)
        elif which == "config":
            _config(message.config, config)
    if not saw_run and cut is not None:
        notes.append(f"{file}: the log was cut short before its run record; left out")
        return None
    if not saw_run:
        raise LabcoatError(f"{file}: no run record in this W&B log (is it damaged?); "
                           "nothing was imported")
    rows = (at_once and _rows_at_once(record, histories)) or _rows(record, histories, file)
    _points(run, *rows)
    for key, value in config.items():
        if key != "_wandb":
            flat(f"config.{key}", value, run.keys)
    return run


def _decode(record: type, file: Path, payload: bytes) -> Any:
    try:
        return record.FromString(payload)
    except Exception as e:  # protobuf's DecodeError, whatever the backend  # noqa: BLE001
        raise LabcoatError(f"{file}: damaged W&B run log (a record that passes its checksum "
                           f"is not a wandb Record: {e}); nothing was imported. Is this a "
                           "log of another wandb version?") from None


def _payloads(file: Path, data: bytes) -> tuple[list[bytes], list[bytes], int | None]:
    """Every record's bytes, in order, each checksum checked: (history records laid out
    as wandb writes them, all other records but summaries, the offset of a last record or
    message cut short or None). A log cut short (a run still writing, or killed) is read
    up to its last whole message, as `wandb leet` reads it. A record that starts with
    its `num` (field 1) is told by the field after it without decoding it: a summary
    (two records in three; no points) is dropped, a history is decoded with the others
    (`_rows_at_once`). The loop runs once per record, ~30,000 times for a 10,000-step
    run: FULL records go first."""
    if data[:len(HEADER)] != HEADER:
        what = "an empty file" if not data else "no ':W&B' header of version 0"
        raise LabcoatError(f"{file}: not a W&B run log ({what}); nothing was imported")
    out: list[bytes] = []
    histories: list[bytes] = []
    keep, frame, crc, full = out.append, _FRAME.unpack_from, zlib.crc32, _SEEDS[FULL]
    history = histories.append
    size = _FRAME.size
    parts: list[bytes] | None = None
    parts_at = 0
    i, end, block_end = len(HEADER), len(data), BLOCK
    while i < end:
        if i > block_end - size:  # too close to the block's end for a frame: zeros
            if data[i:block_end].strip(b"\0"):
                _damaged(file, i, "a block's padding is not zeros")
            i, block_end = max(i, block_end), block_end + BLOCK
            continue
        if i + size > end:
            return histories, out, parts_at if parts is not None else i
        checksum, length, kind = frame(data, i)
        start, stop = i + size, i + size + length
        if stop > end:
            return histories, out, parts_at if parts is not None else i
        body = data[start:stop]
        if kind == FULL and parts is None:
            if crc(body, full) != checksum:
                _damaged(file, i, "a record fails its checksum")
            if length and data[start] == 0x08:  # num, a varint, then the record's kind
                k = start + 1
                while k < stop and data[k] & 0x80:
                    k += 1
                kind = data[k + 1] if k + 1 < stop else 0
                if kind == _HISTORY:
                    history(body)
                elif kind != _SUMMARY:
                    keep(body)
            else:
                keep(body)
        else:
            if not FULL <= kind <= LAST:
                _damaged(file, i, f"a record of unknown type {kind}")
            if crc(body, _SEEDS[kind]) != checksum:
                _damaged(file, i, "a record fails its checksum")
            if kind == FIRST and parts is None:
                parts, parts_at = [body], i
            elif kind in (MIDDLE, LAST) and parts is not None:
                parts.append(body)
                if kind == LAST:  # a record split across blocks: told apart the same way
                    whole = b"".join(parts)
                    whole_kind = _kind(whole)
                    if whole_kind == _HISTORY:
                        history(whole)
                    elif whole_kind != _SUMMARY:
                        keep(whole)
                    parts = None
            else:
                _damaged(file, i, "the records of a split message are out of order")
        i = stop
    return histories, out, None if parts is None else parts_at


def _kind(payload: bytes) -> int:
    """The tag after `num` when the record starts with it (0 otherwise)."""
    if payload[:1] != b"\x08":
        return 0
    k = 1
    while k < len(payload) and payload[k] & 0x80:
        k += 1
    return payload[k + 1] if k + 1 < len(payload) else 0


def _damaged(file: Path, offset: int, what: str) -> NoReturn:
    raise LabcoatError(f"{file}: damaged W&B run log ({what}, at byte {offset}); nothing was "
                       "imported. Move the run aside (or let it finish) and import again")


def _run_keys(run: ExternalRun, record: Any, config: dict[str, Any]) -> None:
    run.id = str(record.run_id or run.id)
    run.keys.update({"run_id": run.id, "name": record.display_name,
                     "group": record.run_group, "job_type": record.job_type,
                     "project": record.project, "tags": ",".join(record.tags)})
    _config(record.config, config)


def _config(record: Any, config: dict[str, Any]) -> None:
    """A config record: items to set (JSON values) and keys to remove."""
    for item in record.update:
        node, last = _node(config, item)
        node[last] = json.loads(item.value_json) if item.value_json else None
    for item in record.remove:
        node, last = _node(config, item)
        node.pop(last, None)


def _node(config: dict[str, Any], item: Any) -> tuple[dict[str, Any], str]:
    """The dict an item's key lives in (`nested_key` walks down, making dicts) and its key."""
    if item.key or not item.nested_key:
        return config, item.key
    *parents, last = item.nested_key
    for key in parents:
        child = config.get(key)
        if not isinstance(child, dict):
            child = config[key] = {}
        config = child
    return config, last


def _rows_at_once(record: type, payloads: list[bytes]) -> tuple | None:
    """The history rows as (names, value texts, items per row, steps), all rows decoded in
    one protobuf parse: the records' bytes concatenated and read as one message of
    `_views()`'s types, whose singular `history` and `item` fields merge every row's items
    into one list of names and one of values (protobuf's merge rule), and whose `step`
    is a list of each row's HistoryStep bytes. Decoding row by row through wandb's Record
    costs a Python object per item (~30x slower at a million points).

    Rows are told apart by counting `value_json` tags in each record's bytes past its
    history's length and before its step (wandb writes the step last); that count can
    only err upwards (the tag's bytes inside a name or a length), so equal totals mean
    exact counts. None when a row does not have this
    layout (a `key` instead of `nested_key`, a nested key of several parts, a typed
    value, no step): then row by row."""
    if not payloads:
        return [], [], [], []
    view, tag = _views(record)
    try:
        merged = view.FromString(b"".join(payloads)).history
    except Exception:  # noqa: BLE001 - any doubt: the row-by-row path says what is wrong
        return None
    names, texts, steps = list(merged.item.nested_key), list(merged.item.value_json), \
        list(merged.step)
    if merged.item.key or len(names) != len(texts) or len(steps) != len(payloads):
        return None
    try:
        counts = [p.count(tag, _after_length(p), _before_step(p, raw))
                  for p, raw in zip(payloads, steps, strict=True)]
    except IndexError:
        return None
    if sum(counts) != len(texts):
        return None
    try:
        return names, texts, counts, [_step(s) for s in steps]
    except ValueError:
        return None


def _after_length(payload: bytes) -> int:
    """Where a history record's items start: past `num`, the history tag and its length
    (a length of 130 is the value_json tag's own two bytes)."""
    k = 1
    while payload[k] & 0x80:  # num
        k += 1
    k += 2  # num's last byte, the history tag
    while payload[k] & 0x80:  # the length
        k += 1
    return k + 1


def _before_step(payload: bytes, raw: bytes) -> int:
    """Where a history record's step field starts when it ends the record (step 130 is
    the value_json tag's own two bytes), else its end."""
    tail = b"\x12" + bytes([len(raw)]) + raw
    return len(payload) - len(tail) if payload.endswith(tail) else len(payload)


def _step(raw: bytes) -> int:
    """HistoryStep's bytes: empty (step 0) or field 1, a varint."""
    if not raw:
        return 0
    if raw[0] != 0x08 or raw[-1] & 0x80:
        raise ValueError("not a lone varint step")
    value, shift = 0, 0
    for byte in raw[1:]:
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    return value - (1 << 64) if value >= 1 << 63 else value


@functools.cache
def _views(record: type) -> tuple[type, bytes]:
    """Message types that read wandb's Record bytes as only their history, with the field
    numbers taken from wandb's own descriptors: Records{Rows history}, Rows{Items item;
    repeated bytes step}, Items{repeated string key, nested_key, value_json}. Returns the
    Records class and the bytes of a value_json tag."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    history = record.DESCRIPTOR.fields_by_name["history"]
    item = history.message_type.fields_by_name["item"]
    step = history.message_type.fields_by_name["step"]
    fields = item.message_type.fields_by_name
    proto = descriptor_pb2.FileDescriptorProto(name="labcoat_wandb_views.proto",
                                               package="labcoat_wandb_views", syntax="proto3")
    Field = descriptor_pb2.FieldDescriptorProto
    items = proto.message_type.add(name="Items")
    for name in ("key", "nested_key", "value_json"):
        items.field.add(name=name, number=fields[name].number, type=Field.TYPE_STRING,
                        label=Field.LABEL_REPEATED)
    rows = proto.message_type.add(name="Rows")
    rows.field.add(name="item", number=item.number, type=Field.TYPE_MESSAGE,
                   type_name=".labcoat_wandb_views.Items", label=Field.LABEL_OPTIONAL)
    rows.field.add(name="step", number=step.number, type=Field.TYPE_BYTES,
                   label=Field.LABEL_REPEATED)
    records = proto.message_type.add(name="Records")
    records.field.add(name="history", number=history.number, type=Field.TYPE_MESSAGE,
                      type_name=".labcoat_wandb_views.Rows", label=Field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    view = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("labcoat_wandb_views.Records"))
    number = fields["value_json"].number << 3 | 2  # wire type 2: length-delimited
    tag = bytes([number & 0x7F | 0x80, number >> 7]) if number >= 0x80 else bytes([number])
    return view, tag


def _rows(record: type, payloads: list[bytes], file: Path) -> tuple:
    """The same as `_rows_at_once`, a record at a time through wandb's Record."""
    names: list[str] = []
    texts: list[str] = []
    counts: list[int] = []
    steps: list[int] = []
    typed: dict[int, Any] = {}  # value index -> a value held in the item's typed field
    for payload in payloads:
        history = _decode(record, file, payload).history
        for item in history.item:
            names.append(item.key or ".".join(item.nested_key))
            if not item.value_json:
                typed[len(texts)] = _typed(file, item)
            texts.append(item.value_json or "null")
        counts.append(len(history.item))
        steps.append(history.step.num)
    return names, texts, counts, steps, typed


def _points(run: ExternalRun, names: list[str], texts: list[str], counts: list[int],
            steps: list[int], typed: dict[int, Any] | None = None) -> None:
    """Every row's numeric values at its step (the row's `_step` where the step is 0),
    timed by its `_timestamp`; a column at a time (a run's JSON values decoded in one
    `json.loads`), so a million points cost few Python steps each."""
    try:
        values = json.loads("[" + ",".join(texts) + "]")
        if len(values) != len(texts):
            raise ValueError
    except ValueError:  # a value that is not one JSON value on its own: one at a time
        values = [_json(run.path, t) for t in texts]
    for at, value in (typed or {}).items():
        values[at] = value
    row = list(chain.from_iterable(map(repeat, range(len(counts)), counts)))  # item -> row
    columns: dict[str, list[int]] = {}
    for at, name in enumerate(names):
        columns.setdefault(name, []).append(at)
    step, time = list(steps), [None] * len(counts)
    for at in columns.pop("_timestamp", []):  # a name twice in a row: the later one, as
        time[row[at]] = values[at]            # a JSON object keeps it
    for at in columns.pop("_step", []):
        if not steps[row[at]]:
            step[row[at]] = values[at] or 0
    # a media object (an image, a plotly chart) is flattened into items beside its `_type`:
    # its width, height and size are not metrics
    media = tuple(name[:-len("_type")] for name in columns if name.endswith("._type"))
    for name, index in columns.items():
        if name[:1] == "_" or (media and name.startswith(media)):
            continue
        rows = [row[at] for at in index]
        column = [values[at] for at in index]
        if set(map(type, column)) == {float} and len(set(rows)) == len(rows):
            times = [time[r] for r in rows]
            series = dict(zip(map(int, [step[r] for r in rows]),
                              zip(column, times, strict=True), strict=True))
            if len(series) == len(rows) and name not in run.metrics:
                run.metrics[name] = series
                continue
        for r, value in zip(rows, column, strict=True):
            points: dict[str, float] = {}
            _numbers(name, value, points)
            for key, number in points.items():
                run.add(key, int(step[r]), number, time[r])


def _typed(file: Path, item: Any) -> Any:
    """A history value held in the item's typed field instead of `value_json`."""
    which = item.WhichOneof("value")
    if which is None or which == "none":
        return None
    value = getattr(item, which)
    return _json(file, value) if which == "json" else value


def _json(file: Path | str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise LabcoatError(f"{file}: a history value is not JSON ({text[:80]!r}); the log is "
                           "damaged, nothing was imported") from None


def _numbers(key: str, value: Any, out: dict[str, float]) -> None:
    if isinstance(value, dict) and "_type" in value:  # a media object logged unflattened
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not str(k).startswith("_"):
                _numbers(f"{key}.{k}", v, out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out[key] = float(value)
    elif value in ("NaN", "Infinity", "-Infinity"):  # non-finite floats as JSON strings
        out[key] = float(value.replace("Infinity", "inf"))
