"""Inspect AI eval logs as per-item scores: `.json` logs and `.eval` (zip) logs.

Format (from inspect_ai's own reader, `inspect_ai/log/_recorders/eval.py` and
`json.py`, and the "Log Files" docs at inspect.aisi.org.uk/eval-logs.html):

- `.json`: one object {"version", "status", "eval": {"task", "model", ...},
  "results", "samples": [EvalSample, ...]};
- `.eval`: a zip with the header in `header.json` (or, in older and unfinished
  logs, `_journal/start.json` / `start.json`, whose "eval" is the same) and one
  `samples/<id>_epoch_<n>.json` per sample and epoch.

An EvalSample has `id`, `epoch` and `scores` {scorer name: {"value": ...}}. A
value maps to a number as inspect_ai's `value_to_float` does: numbers and
booleans as they are, "C" (correct) 1, "I" (incorrect) 0, "P" (partial) 0.5,
"N" (no answer) 0, yes/true 1, no/false 0. A scorer whose value is a dict
(several metrics) is chosen as `scorer.key`. Several epochs of one sample are
averaged (inspect's default "mean" reducer). Samples without a score (e.g. the
sample errored) are counted and reported, never silently dropped.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from labcoat.errors import LabcoatError

LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
HEADERS = ("header.json", "_journal/start.json", "start.json")


def is_inspect_json(record: Any) -> bool:
    """A parsed .json file that is an Inspect log (not a list of labcoat item scores)."""
    return isinstance(record, dict) and isinstance(record.get("eval"), dict) and (
        "samples" in record or "status" in record)


def read_inspect_log(path: Path, metric: str | None
                     ) -> tuple[str, str, list[str], list[float], list[str]]:
    """(task, metric, item ids, scores, notes) of one Inspect log (.json or .eval)."""
    if path.suffix == ".eval":
        header, samples = _read_zip(path)
    else:
        try:
            header = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise LabcoatError(f"{path}: not a readable Inspect JSON log ({e})") from None
        samples = [(f"{path}[sample {i}]", s) for i, s in enumerate(header.get("samples") or [])]
    task = str((header.get("eval") or {}).get("task") or path.stem)
    if not samples:
        raise LabcoatError(f"{path}: an Inspect log without samples (was it written with "
                           "--no-log-samples, or did the eval not start?); re-run with samples")
    if metric and "," in metric:  # "a,b": the first scorer this log has
        present = {k for _, s in samples for k in ((s or {}).get("scores") or {})}
        metric = next((m for m in metric.split(",") if m.partition(".")[0] in present),
                      None) or _only_scorer(path, samples)
    metric = metric or _only_scorer(path, samples)
    totals: dict[str, list[float]] = {}
    unscored = []
    for where, sample in samples:
        if not isinstance(sample, dict) or "id" not in sample:
            raise LabcoatError(f"{where}: not an Inspect sample (no 'id')")
        value = _value(sample.get("scores") or {}, metric, where)
        if value is None:
            unscored.append(str(sample["id"]))
            continue
        totals.setdefault(str(sample["id"]), []).append(value)
    if not totals:
        raise LabcoatError(f"{path}: no sample has a {metric!r} score")
    notes = []
    if unscored:
        notes.append(f"{path}: {len(unscored)} sample(s) without a {metric!r} score left out "
                     f"(e.g. {', '.join(unscored[:3])}): they errored or were not scored")
    epochs = {len(v) for v in totals.values()}
    if epochs != {1}:
        notes.append(f"{path}: {max(epochs)} epochs per sample averaged per sample")
    items = list(totals)
    return task, metric, items, [sum(totals[i]) / len(totals[i]) for i in items], notes


def _read_zip(path: Path) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            header_name = next((h for h in HEADERS if h in names), None)
            if header_name is None:
                raise LabcoatError(f"{path}: a zip without {' or '.join(HEADERS)}; not an "
                                   "Inspect .eval log")
            header = json.loads(archive.read(header_name))
            samples = [(f"{path}:{name}", json.loads(archive.read(name)))
                       for name in sorted(names)
                       if name.startswith("samples/") and name.endswith(".json")]
    except zipfile.BadZipFile:
        raise LabcoatError(f"{path}: not a zip file; an Inspect .eval log is a zip") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LabcoatError(f"{path}: a member is not valid JSON ({e})") from None
    return header, samples


def _only_scorer(path: Path, samples: list[tuple[str, Any]]) -> str:
    names: dict[str, None] = {}
    for _, sample in samples:
        for scorer, score in ((sample or {}).get("scores") or {}).items():
            value = score.get("value") if isinstance(score, dict) else None
            if isinstance(value, dict):
                names.update({f"{scorer}.{key}": None for key in value})
            else:
                names[scorer] = None
    if len(names) == 1:
        return next(iter(names))
    if not names:
        raise LabcoatError(f"{path}: no sample has a score; score the log first "
                           "(inspect score LOG)")
    raise LabcoatError(f"{path}: several scores per sample ({', '.join(names)}); choose one "
                       "with --metric")


def _value(scores: dict[str, Any], metric: str, where: str) -> float | None:
    scorer, _, key = metric.partition(".")
    score = scores.get(metric) or scores.get(scorer)
    if not isinstance(score, dict) or "value" not in score:
        return None
    value = score["value"]
    if isinstance(value, dict):
        if not key or key not in value:
            raise LabcoatError(f"{where}: scorer {scorer!r} has several values "
                               f"({', '.join(value)}); choose one with --metric "
                               f"{scorer}.{next(iter(value), 'KEY')}")
        value = value[key]
    return to_float(value, where, metric)


def to_float(value: Any, where: str, metric: str) -> float:
    """An Inspect score value as a number (see the module docstring)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text in LETTERS:
            return LETTERS[text]
        if text.lower() in WORDS:
            return WORDS[text.lower()]
        try:
            return float(text)
        except ValueError:
            pass
    raise LabcoatError(f"{where}: {metric} value {value!r} is not a number, a boolean or one "
                       "of C, I, P, N")
