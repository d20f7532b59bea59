"""lm-eval-harness task YAML with local data files, read into an `EvalSuite`.

The supported subset of lm-eval-harness's task configuration
(docs/task_guide.md), with its semantics:

- ``task``: the task name; ``dataset_path: json`` or ``csv`` with
  ``dataset_kwargs: {data_files: ...}`` (a path, a list, or split -> path;
  relative to the YAML file). Hugging Face hub datasets are not read.
- the split: ``test_split``, else ``validation_split`` (a single data file is
  split ``train``, as in Hugging Face ``datasets``).
- ``doc_to_text``, ``doc_to_target``, ``doc_to_choice``: a column name, or a
  Jinja2 template rendered with the document's fields (sandboxed; undefined
  names are errors). A template that renders to digits is an index into the
  choices; ``doc_to_choice`` may also be a YAML list or render to one.
- ``output_type``: ``multiple_choice`` (scored by log-likelihood, ``acc``) or
  ``generate_until`` (exact match); ``metric_list`` may name ``acc`` or
  ``exact_match``; ``target_delimiter`` (default one space) between the context and
  each choice; a ``generate_until`` target follows the context directly, as
  lm-eval-harness compares the generation with the bare target.
- accepted and ignored (they do not change zero-shot scoring here): ``tag``,
  ``metadata``, ``description`` when empty, ``fewshot_delimiter``,
  ``generation_kwargs``, ``should_decontaminate``,
  ``doc_to_decontamination_query``, ``training_split``, ``fewshot_split``,
  ``num_fewshot: 0``, ``repeats: 1``.

Anything else (``!function`` hooks, ``include``, ``process_docs``,
``filter_list``, few-shot examples, ...) ends in one error that names the
keys and this subset. Item ids are document indices, as lm-eval-harness's
``doc_id``, so its ``--log_samples`` results pair with labcoat's item by item.
"""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path
from typing import Any

import yaml

from labcoat.errors import LabcoatError
from labcoat.evals._eval_items import EvalItem
from labcoat.evals._scorers import Scorer
from labcoat.evals._suite import EvalSuite

SUPPORTED = {"task", "dataset_path", "dataset_name", "dataset_kwargs", "test_split",
             "validation_split", "training_split", "fewshot_split", "doc_to_text",
             "doc_to_target", "doc_to_choice", "output_type", "target_delimiter",
             "fewshot_delimiter", "num_fewshot", "metric_list", "generation_kwargs", "metadata",
             "tag", "description", "should_decontaminate", "doc_to_decontamination_query",
             "repeats"}
OUTPUT_TYPES = {"multiple_choice": "multiple_choice", "generate_until": "exact_match"}
METRICS = {"acc": "multiple_choice", "exact_match": "exact_match"}
SUBSET_HELP = ("labcoat reads lm-eval-harness's documented subset for local data: task, "
               "dataset_path json/csv with dataset_kwargs.data_files, test_split/validation_split, "
               "doc_to_text/doc_to_target/doc_to_choice as column names or Jinja2 templates, "
               "output_type multiple_choice/generate_until, metric_list acc/exact_match, "
               "target_delimiter, zero-shot")


class _FunctionTag:
    def __init__(self, value: str) -> None:
        self.value = value


class _Loader(yaml.SafeLoader):
    """Safe YAML that keeps lm-eval's ``!function`` tags as markers (reported, never run)."""


_Loader.add_constructor("!function",
                        lambda loader, node: _FunctionTag(loader.construct_scalar(node)))


def load_lm_eval_task(path: str | Path) -> EvalSuite:
    """The suite an lm-eval-harness task YAML describes (see the module docstring)."""
    path = Path(path)
    config = _read_config(path)
    name = str(config.get("task") or "")
    if not name:
        raise LabcoatError(f"{path}: no `task:` name; lm-eval-harness task files name their task")
    output_type = config.get("output_type", "generate_until")
    if output_type not in OUTPUT_TYPES:
        raise LabcoatError(f"{path}: output_type {output_type!r} is not supported; use "
                           f"{' or '.join(OUTPUT_TYPES)}")
    kind = _scorer_kind(path, config, OUTPUT_TYPES[output_type])
    docs = _documents(path, config)
    if not docs:
        raise LabcoatError(f"{path}: the data file holds no documents")
    renderer = _Renderer(path, columns=set(docs[0]))
    mc = kind == "multiple_choice"
    items = []
    for index, doc in enumerate(docs):
        where = f"{path} (document {index})"
        text = renderer.value(config.get("doc_to_text"), doc, "doc_to_text", where)
        choices = _choices(renderer, config, doc, where) if mc else None
        target = renderer.value(config.get("doc_to_target"), doc, "doc_to_target", where,
                                index_ok=mc)
        items.append(EvalItem(task=name, id=str(index), input=str(text),
                              target=_target(target, choices, where), choices=choices,
                              metadata=dict(doc)))
    # lm-eval-harness puts target_delimiter between context and continuation only for
    # log-likelihood requests; a zero-shot generation is compared with the bare target
    delimiter = config.get("target_delimiter", " ") if mc else ""
    return EvalSuite(name, tuple(items), Scorer(kind=kind), str(delimiter))


def _read_config(path: Path) -> dict[str, Any]:
    try:
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except FileNotFoundError:
        raise LabcoatError(f"{path}: no such file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise LabcoatError(f"{path}{line}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(config, dict):
        raise LabcoatError(f"{path}: expected an lm-eval-harness task (a YAML mapping)")
    unsupported = sorted(k for k in config if k not in SUPPORTED)
    unsupported += sorted(k for k, v in config.items() if isinstance(v, _FunctionTag))
    if config.get("num_fewshot") not in (None, 0):
        unsupported.append("num_fewshot > 0")
    if config.get("repeats") not in (None, 1):
        unsupported.append("repeats > 1")
    if config.get("description") not in (None, ""):
        unsupported.append("description")
    if config.get("dataset_name") is not None:
        unsupported.append("dataset_name")
    if unsupported:
        raise LabcoatError(f"{path}: unsupported lm-eval-harness keys: "
                           f"{', '.join(dict.fromkeys(unsupported))}. {SUBSET_HELP}")
    return config


def _scorer_kind(path: Path, config: dict[str, Any], default: str) -> str:
    metrics = config.get("metric_list") or []
    names = [m.get("metric") if isinstance(m, dict) else m for m in metrics]
    known = [METRICS[n] for n in names if n in METRICS]
    if names and not known:
        raise LabcoatError(f"{path}: metric_list names {', '.join(map(str, names))}; labcoat "
                           f"scores {' or '.join(METRICS)} (or give a scorer explicitly)")
    kind = known[0] if known else default
    if kind != default:
        raise LabcoatError(f"{path}: metric {names[0]!r} does not fit output_type "
                           f"{config.get('output_type', 'generate_until')!r}")
    return kind


def _documents(path: Path, config: dict[str, Any]) -> list[dict[str, Any]]:
    fmt = config.get("dataset_path")
    if fmt not in ("json", "csv"):
        raise LabcoatError(f"{path}: dataset_path {fmt!r} is not a local format; labcoat "
                           "reads dataset_path: json or csv with dataset_kwargs.data_files")
    files = (config.get("dataset_kwargs") or {}).get("data_files")
    if not files:
        raise LabcoatError(f"{path}: dataset_path {fmt} needs dataset_kwargs: {{data_files: "
                           "PATH}} (or a mapping split -> path)")
    splits = files if isinstance(files, dict) else {"train": files}
    split = config.get("test_split") or config.get("validation_split") or "train"
    if split not in splits:
        raise LabcoatError(f"{path}: split {split!r} has no data file; data_files has "
                           f"{', '.join(map(str, splits))}")
    chosen = splits[split]
    docs: list[dict[str, Any]] = []
    for name in chosen if isinstance(chosen, list) else [chosen]:
        file = Path(name) if Path(name).is_absolute() else path.parent / name
        docs += _read_csv(file) if fmt == "csv" else _read_json(file)
    return docs


def _read_text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LabcoatError(f"{file}: data file not found (data_files are relative to the "
                           "task YAML)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise LabcoatError(f"{file}: cannot read ({e})") from None


def _read_json(file: Path) -> list[dict[str, Any]]:
    """JSON lines, or one JSON list of objects (what Hugging Face's json loader reads)."""
    text = _read_text(file)
    if text.lstrip().startswith("["):
        try:
            docs = json.loads(text)
        except json.JSONDecodeError as e:
            raise LabcoatError(f"{file}:{e.lineno}: not valid JSON ({e.msg})") from None
        records = [(f"{file}[{i}]", d) for i, d in enumerate(docs)]
    else:
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append((f"{file}:{number}", json.loads(line)))
                except json.JSONDecodeError as e:
                    raise LabcoatError(f"{file}:{number}: not valid JSON ({e.msg})") from None
    for where, doc in records:
        if not isinstance(doc, dict):
            raise LabcoatError(f"{where}: expected a JSON object per document")
    return [doc for _, doc in records]


def _read_csv(file: Path) -> list[dict[str, Any]]:
    """Rows as dicts; a column whose every value is an integer becomes int (as pandas infers)."""
    rows = list(csv.DictReader(io.StringIO(_read_text(file))))
    for column in rows[0] if rows else []:
        values = [row[column] for row in rows]
        if all(v is not None and v.strip().lstrip("-").isdigit() for v in values):
            for row in rows:
                row[column] = int(row[column])
    return rows


class _Renderer:
    """lm-eval-harness's doc_to_* rule: a column name, else a Jinja2 template."""

    def __init__(self, path: Path, columns: set[str]) -> None:
        from jinja2 import StrictUndefined
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self.path = path
        self.columns = columns
        self.env = ImmutableSandboxedEnvironment(undefined=StrictUndefined,
                                                 keep_trailing_newline=True)
        self.cache: dict[str, Any] = {}

    def render(self, template: str, doc: dict[str, Any], key: str, where: str) -> str:
        from jinja2 import TemplateError

        try:
            compiled = self.cache.get(template) or self.env.from_string(template)
            self.cache[template] = compiled
            return compiled.render(**doc)
        except TemplateError as e:
            raise LabcoatError(f"{where}: {key} template {template!r} failed: {e}; fields are "
                               f"{', '.join(sorted(map(str, doc)))}") from None

    def value(self, spec: Any, doc: dict[str, Any], key: str, where: str, *,
              index_ok: bool = False) -> Any:
        if spec is None:
            raise LabcoatError(f"{self.path}: no {key}; name a column or give a template")
        if isinstance(spec, int | list):
            return spec
        if not isinstance(spec, str):
            raise LabcoatError(f"{self.path}: {key} must be a column name or a template, got "
                               f"{spec!r}")
        if spec in self.columns:
            return doc[spec]
        text = self.render(spec, doc, key, where)
        return int(text) if index_ok and text.strip().isdigit() else text


def _choices(renderer: _Renderer, config: dict[str, Any], doc: dict[str, Any],
             where: str) -> tuple[str, ...]:
    spec = config.get("doc_to_choice")
    if isinstance(spec, dict):
        spec = list(spec.values())
    value = renderer.value(spec, doc, "doc_to_choice", where)
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise LabcoatError(f"{where}: doc_to_choice rendered {value!r}, not a list") from None
    if not isinstance(value, list | tuple) or len(value) < 2:
        raise LabcoatError(f"{where}: doc_to_choice must give at least two choices, got {value!r}")
    return tuple(str(v) for v in value)


def _target(target: Any, choices: tuple[str, ...] | None, where: str) -> str:
    """The target text; for multiple choice the chosen option's text (an index is resolved)."""
    if choices is None:
        return str(target)
    if isinstance(target, int):
        if not 0 <= target < len(choices):
            raise LabcoatError(f"{where}: target index {target} is outside the "
                               f"{len(choices)} choices")
        return choices[target]
    if str(target) not in choices:
        raise LabcoatError(f"{where}: target {target!r} is not one of the choices {list(choices)}")
    return str(target)
