"""Per-item eval results from files: labcoat's JSON/CSV/JSONL and lm-eval-harness samples.

Formats, detected from the file:
- CSV with a header: an item column (`item`, `id`, `item_id` or `doc_id`), a score
  column (`score`, or the name given as `metric`), optional `task` and `cluster`.
- JSON: a list of such objects, or {"items": [...]}.
- JSON lines (optionally .gz): one such object per line, or lm-eval-harness
  ``--log_samples`` records (``samples_<task>_<timestamp>.jsonl``: `doc_id`,
  `filter`, `metrics`, and one key per metric).
- Inspect AI eval logs: `.json` logs and `.eval` zip logs (see `_inspect_logs`).
- A directory: every lm-eval-harness samples file (an `--output_path` tree, one
  file per task) and Inspect log in it, recursively, merged (one task per file).
Every problem names the file and line and says the fix.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from labcoat.errors import LabcoatError

ITEM_KEYS = ("item", "id", "item_id", "doc_id")
# lm-eval-harness sample fields that are not metrics.
LM_EVAL_BOOKKEEPING = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps",
                       "filter", "metrics", "doc_hash", "prompt_hash", "target_hash", "task"}
LM_EVAL_NAME = re.compile(r"^samples_(?P<task>.+?)_\d{4}-\d{2}-\d{2}T[\d\-.:]+$")


@dataclass(frozen=True)
class ItemScores:
    """Scores of one model, one per (task, item).

    tasks, items: (n,) identifiers; scores: (n,) floats; clusters: (n,) or None.
    """

    path: str
    format: str
    metric: str
    tasks: list[str]
    items: list[str]
    scores: np.ndarray
    clusters: list[str] | None = None
    notes: tuple[str, ...] = ()  # what the reader left out or merged, for the user

    def keys(self) -> list[tuple[str, str]]:
        return list(zip(self.tasks, self.items, strict=True))


def load_item_scores(path: str | Path, *, metric: str | None = None,
                     filter: str | None = None) -> ItemScores:  # noqa: A002 - lm-eval's word
    """Read per-item scores from `path` (format detected; see the module docstring)."""
    path = Path(path)
    if path.is_dir():
        return _directory(path, metric, filter)
    name = path.name.removesuffix(".gz")
    if name.endswith(".eval"):
        return _inspect(path, metric)
    text = _read_text(path)
    if name.endswith(".csv"):
        rows = _csv_rows(text, path)
        return _generic(path, "csv", rows, metric)
    if name.endswith(".jsonl"):
        rows = _jsonl_rows(text, path)
        if rows and "doc_id" in rows[0][1] and _looks_like_lm_eval(rows[0][1]):
            return _lm_eval(path, rows, metric, filter)
        return _generic(path, "jsonl", rows, metric)
    if name.endswith(".json"):
        if _inspect_header(text):
            return _inspect(path, metric)
        return _generic(path, "json", _json_rows(text, path), metric)
    raise LabcoatError(f"{path}: unknown result format; use .csv, .json or .jsonl, an Inspect "
                       ".eval/.json log, or a directory of lm-eval-harness samples_<task>_<time>"
                       ".jsonl files")


def _inspect_header(text: str) -> bool:
    from labcoat.evals._inspect_logs import is_inspect_json

    try:
        return is_inspect_json(json.loads(text))
    except json.JSONDecodeError:
        return False


def _inspect(path: Path, metric: str | None) -> ItemScores:
    from labcoat.evals._inspect_logs import read_inspect_log

    task, metric, items, scores, notes = read_inspect_log(path, metric)
    where = [(f"{path}[sample {i}]", {}) for i in items]
    values = [_score(v, w, metric) for v, (w, _) in zip(scores, where, strict=True)]
    found = _finish(path, "inspect", metric, [task] * len(items), items, values, None, where)
    return _with_notes(found, notes)


def _directory(path: Path, metric: str | None, filter_: str | None) -> ItemScores:
    """Every lm-eval-harness samples file and Inspect log under `path`, merged."""
    files = sorted(p for p in path.rglob("*") if p.is_file() and (
        (p.name.startswith("samples_") and p.name.removesuffix(".gz").endswith(".jsonl"))
        or p.suffix == ".eval"
        or (p.suffix == ".json" and _inspect_header(_read_text(p)))))
    if not files:
        raise LabcoatError(f"{path}: no lm-eval-harness samples_<task>_<time>.jsonl files and "
                           "no Inspect logs (.eval, .json) in this directory; run lm-eval "
                           "with --log_samples, or give the files")
    return merge_item_scores([load_item_scores(f, metric=metric, filter=filter_)
                              for f in files], str(path))


def merge_item_scores(parts: list[ItemScores], path: str | None = None) -> ItemScores:
    """Several results of one model (e.g. one file per task) as one; an item in two of
    them is an error (two runs of one task: choose one)."""
    if len(parts) == 1:
        return parts[0]
    seen: dict[tuple[str, str], str] = {}
    for part in parts:
        for key in part.keys():
            if key in seen:
                raise LabcoatError(f"task {key[0]!r} item {key[1]!r} is in both {seen[key]} "
                                   f"and {part.path} (two runs of one task?); import the "
                                   "files you mean one by one")
            seen[key] = part.path
    formats = ", ".join(dict.fromkeys(p.format for p in parts))
    metrics = ", ".join(dict.fromkeys(p.metric for p in parts))
    return ItemScores(path or " + ".join(p.path for p in parts), formats, metrics,
                      [t for p in parts for t in p.tasks], [i for p in parts for i in p.items],
                      np.concatenate([p.scores for p in parts]), None,
                      tuple(n for p in parts for n in p.notes))


def _with_notes(scores: ItemScores, notes: list[str]) -> ItemScores:
    from dataclasses import replace

    return replace(scores, notes=tuple(notes))


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LabcoatError(f"{path}: no such file") from None
    except OSError as e:
        raise LabcoatError(f"{path}: cannot read ({e.strerror})") from None
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except OSError as e:
            raise LabcoatError(f"{path}: not a valid gzip file ({e})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LabcoatError(f"{path}: not UTF-8 text ({e})") from None


Rows = list[tuple[str, dict[str, Any]]]  # (where: "file:line" or "file[entry]", record)


def _csv_rows(text: str, path: Path, header: str = "item,score") -> Rows:
    reader = csv.DictReader(io.StringIO(text), delimiter=_delimiter(text))
    if not reader.fieldnames:
        raise LabcoatError(f"{path}: empty CSV; expected a header such as {header}")
    return [(f"{path}:{i + 2}", row) for i, row in enumerate(reader)]


def _delimiter(text: str) -> str:
    """The header row's separator: ',' unless it has none and uses ';', a tab or '|' (a
    spreadsheet where the decimal mark is a comma saves CSV with ';'). Only the header is
    sniffed: decimal commas in the rows would look like separators."""
    header = text.lstrip("\ufeff").split("\n", 1)[0]
    try:
        return csv.Sniffer().sniff(header, delimiters=",;\t|").delimiter
    except csv.Error:  # one column, or nothing to go by
        return ","


def _jsonl_rows(text: str, path: Path, example: str = '{"item": "q1", "score": 1}') -> Rows:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise LabcoatError(f"{path}:{number}: not valid JSON ({e.msg}); fix or remove "
                               "the line") from None
        if not isinstance(record, dict):
            raise LabcoatError(f"{path}:{number}: expected a JSON object per line like "
                               f"{example}")
        rows.append((f"{path}:{number}", record))
    return rows


def _json_rows(text: str, path: Path) -> Rows:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise LabcoatError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise LabcoatError(f"{path}: expected a list of objects like "
                           '{"item": "q1", "score": 1} (or {"items": [...]})')
    return [(f"{path}[entry {i}]", record) for i, record in enumerate(data)]


def _looks_like_lm_eval(record: dict[str, Any]) -> bool:
    return bool({"filtered_resps", "resps", "doc", "metrics", "arguments"} & set(record))


def _generic(path: Path, fmt: str, rows: Rows, metric: str | None) -> ItemScores:
    if not rows:
        raise LabcoatError(f"{path}: no items")
    first = rows[0][1]
    item_key = next((k for k in ITEM_KEYS if k in first), None)
    score_key = metric or "score"
    if item_key is None or score_key not in first:
        raise LabcoatError(
            f"{path}: needs an item column ({' or '.join(ITEM_KEYS)}) and a score column "
            f"({score_key!r}); found {', '.join(map(str, first))}"
            + ("" if metric else "; name another score column with --metric")
        )
    tasks, items, scores, clusters = [], [], [], []
    for where, row in rows:
        tasks.append(str(row.get("task") or "-"))
        items.append(_text(row.get(item_key), where, item_key))
        scores.append(_score(row.get(score_key), where, score_key))
        clusters.append(row.get("cluster"))
    has_clusters = all(c not in (None, "") for c in clusters)
    return _finish(path, fmt, score_key, tasks, items, scores,
                   [str(c) for c in clusters] if has_clusters else None, rows)


def _lm_eval(path: Path, rows: Rows, metric: str | None, filter_: str | None) -> ItemScores:
    stem = path.name.removesuffix(".gz").removesuffix(".jsonl")
    match = LM_EVAL_NAME.match(stem)
    task = match["task"] if match else stem
    filters = sorted({str(r.get("filter", "none")) for _, r in rows})
    if filter_ is None and len(filters) > 1:
        raise LabcoatError(f"{path}: lm-eval-harness samples with several filters "
                           f"({', '.join(filters)}); choose one with --filter")
    # "a,b": the first of these the file has (one flag for a directory of tasks)
    wanted = filter_.split(",") if filter_ else [filters[0]]
    chosen = next((f for f in wanted if f in filters), None)
    if chosen is None:
        raise LabcoatError(f"{path}: no samples with filter {filter_!r}; "
                           f"this file has {', '.join(filters)} (several: --filter a,b)")
    rows = [(where, r) for where, r in rows if str(r.get("filter", "none")) == chosen]
    if metric and "," in metric:
        names = metric.split(",")
        metric = next((m for m in names if m in rows[0][1]), None)
        if metric is None:
            raise LabcoatError(f"{path}: samples have none of the metrics {', '.join(names)}")
    metric = metric or _lm_eval_metric(path, rows[0][1])
    items, scores = [], []
    for where, row in rows:
        if metric not in row:
            raise LabcoatError(f"{where}: sample has no {metric!r} value")
        items.append(_text(row.get("doc_id"), where, "doc_id"))
        scores.append(_score(row[metric], where, metric))
    return _finish(path, "lm-eval-harness", metric, [task] * len(items), items, scores, None,
                   rows)


def _lm_eval_metric(path: Path, record: dict[str, Any]) -> str:
    declared = record.get("metrics")
    candidates = (list(declared) if isinstance(declared, list) else
                  [k for k, v in record.items() if k not in LM_EVAL_BOOKKEEPING
                   and isinstance(v, int | float | bool)])
    if len(candidates) == 1:
        return str(candidates[0])
    if not candidates:
        raise LabcoatError(f"{path}: found no per-sample metric; name it with --metric")
    raise LabcoatError(f"{path}: several metrics per sample ({', '.join(map(str, candidates))}); "
                       "choose one with --metric")


def _finish(path: Path, fmt: str, metric: str, tasks: list[str], items: list[str],
            scores: list[float], clusters: list[str] | None, rows: Rows) -> ItemScores:
    seen: dict[tuple[str, str], str] = {}
    for (where, _), key in zip(rows, zip(tasks, items, strict=True), strict=True):
        if key in seen:
            raise LabcoatError(f"{where}: item {key[1]!r} of task {key[0]!r} appears twice "
                               f"(first at {seen[key]}); keep one score per item")
        seen[key] = where
    return ItemScores(str(path), fmt, metric, tasks, items, np.asarray(scores, dtype=float),
                      clusters)


def _text(value: Any, where: str, key: str) -> str:
    if value is None or value == "":
        raise LabcoatError(f"{where}: missing {key!r}")
    return str(value)


def _score(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool):
        return float(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LabcoatError(f"{where}: {key} {value!r} is not a number") from None
    if not math.isfinite(number):
        raise LabcoatError(f"{where}: {key} is {value!r}; scores must be finite")
    return number
