"""Eval items from files: JSONL or CSV, or a directory of them (one task per file).

Each record has `id`, `input`, optional `target`, `task` and `cluster`. A
record without `task` belongs to the task named after its file (the file name
without extension), so a directory `suite/` with `arc.jsonl` and `gsm8k.csv`
is two tasks. Every problem names the file and line and says the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcoat.errors import LabcoatError
from labcoat.evals._importers import _csv_rows, _jsonl_rows

SUFFIXES = (".jsonl", ".csv")


@dataclass(frozen=True)
class EvalItem:
    """One eval item: identity (task, id), its text (input, target), optional cluster."""

    task: str
    id: str
    input: str
    target: str = ""
    cluster: str | None = None


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
    return EvalItem(
        task=str(record.get("task") or default_task),
        id=str(record["id"]),
        input=_string(record["input"]),
        target=_string(record.get("target") or ""),
        cluster=None if cluster in (None, "") else str(cluster),
    )


def _string(value: Any) -> str:
    if isinstance(value, list):  # multiple-choice options: scan them all
        return "\n".join(map(str, value))
    return str(value)
