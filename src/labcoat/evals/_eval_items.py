"""Eval items from files: JSONL or CSV, or a directory of them (one task per file).

Each record has `id`, `input`, optional `target`, `task`, `cluster` and
`choices` (multiple choice: a JSON list, or in CSV a JSON list or
``a|b|c``); every other field is kept as the item's metadata. A record
without `task` belongs to the task named after its file (the file name
without extension), so a directory `suite/` with `arc.jsonl` and `gsm8k.csv`
is two tasks. Every problem names the file and line and says the fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labcoat.errors import LabcoatError
from labcoat.evals._importers import _csv_rows, _jsonl_rows

SUFFIXES = (".jsonl", ".csv")
KNOWN_FIELDS = ("id", "input", "target", "task", "cluster", "choices")


@dataclass(frozen=True)
class EvalItem:
    """One eval item: identity (task, id), its text (input, target), optional cluster.

    choices: the options of a multiple-choice item (the target is one of them, or
    its 0-based index); None for free-form items. metadata: the record's other
    fields, kept for user scorers and reports (not compared, not hashed).
    """

    task: str
    id: str
    input: str
    target: str = ""
    cluster: str | None = None
    choices: tuple[str, ...] | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def load_eval_items(path: str | Path) -> list[EvalItem]:
    """Items of a suite: a .jsonl/.csv file, or a directory of them (sorted by name)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
        if not files:
            raise LabcoatError(f"{path}: no .jsonl or .csv files; an eval suite directory "
                               "holds one file per task")
    elif path.exists():
        files = [path]
    else:
        raise LabcoatError(f"{path}: no such file or directory; give an eval suite file "
                           "(.jsonl or .csv) or a directory of them")
    items: list[EvalItem] = []
    seen: dict[tuple[str, str], str] = {}
    for file in files:
        for where, record in _records(file):
            item = _item(record, where, file.stem)
            key = (item.task, item.id)
            if key in seen:
                raise LabcoatError(f"{where}: item {item.id!r} of task {item.task!r} appears "
                                   f"twice (first at {seen[key]}); give each item a unique id")
            seen[key] = where
            items.append(item)
    if not items:
        raise LabcoatError(f"{path}: no eval items")
    return items


def _records(file: Path) -> list[tuple[str, dict[str, Any]]]:
    if file.suffix not in SUFFIXES:
        raise LabcoatError(f"{file}: unknown eval suite format; use .jsonl or .csv")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise LabcoatError(f"{file}: not UTF-8 text ({e})") from None
    except OSError as e:
        raise LabcoatError(f"{file}: cannot read ({e.strerror})") from None
    if file.suffix == ".csv":
        return _csv_rows(text, file, header="id,input,target")
    return _jsonl_rows(text, file, example='{"id": "q1", "input": "...", "target": "..."}')


def _item(record: dict[str, Any], where: str, default_task: str) -> EvalItem:
    for key in ("id", "input"):
        if record.get(key) in (None, ""):
            raise LabcoatError(f"{where}: missing {key!r}; each item needs id and input "
                               f"(found: {', '.join(map(str, record)) or 'nothing'})")
    cluster = record.get("cluster")
    target = record.get("target")
    return EvalItem(
        task=str(record.get("task") or default_task),
        id=str(record["id"]),
        input=_string(record["input"]),
        target="" if target is None else _string(target),
        cluster=None if cluster in (None, "") else str(cluster),
        choices=_choices(record.get("choices"), where),
        metadata={k: v for k, v in record.items() if k not in KNOWN_FIELDS},
    )


def _choices(value: Any, where: str) -> tuple[str, ...] | None:
    """A multiple-choice item's options: a JSON list, or in CSV a JSON list or a|b|c."""
    if value in (None, ""):
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as e:
                raise LabcoatError(f"{where}: choices {text!r} is not a valid JSON list "
                                   f"({e.msg}); write them as [\"a\", \"b\"] or a|b") from None
        else:
            value = text.split("|")
    if not isinstance(value, list) or len(value) < 2:
        raise LabcoatError(f"{where}: choices must list at least two options, got {value!r}")
    return tuple(str(v) for v in value)


def _string(value: Any) -> str:
    if isinstance(value, list):  # multiple-choice options: scan them all
        return "\n".join(map(str, value))
    return str(value)
