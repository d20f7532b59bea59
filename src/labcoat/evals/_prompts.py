"""Prompt formats: the same eval items rendered under several templates and scored, so a
score's dependence on formatting can be measured (Sclar et al. 2024, "Quantifying
Language Models' Sensitivity to Spurious Features in Prompt Design": accuracy moves
by tens of points with formatting alone).

Built-in templates: plain, markdown, json, yaml. A user template is a Python
format string over the fields `input`, `input_json` (the input as a JSON string
literal, which is also a valid YAML double-quoted scalar), `id`, `task` and
`cluster`; `target` is deliberately not a field (it would leak the answer).
Each template's results are logged with `variant` = the template's name, so the
store, `labcoat export --items` and `labcoat report` keep them apart from the
plain eval.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from labcoat.errors import LabcoatError
from labcoat.evals._eval_items import EvalItem

TEMPLATES: dict[str, str] = {
    "plain": "{input}\nAnswer:",
    "markdown": "### Question\n\n{input}\n\n### Answer\n",
    "json": '{{"question": {input_json}, "answer": "',
    "yaml": "question: {input_json}\nanswer:",
}
FIELDS = ("input", "input_json", "id", "task", "cluster")

Model = Callable[[str, EvalItem], float]  # (rendered prompt, item) -> score
BatchModel = Callable[[list[str], list[EvalItem]], Sequence[float]]  # prompts -> scores


@dataclass(frozen=True)
class TemplateScores:
    """Scores of one model on the same items under each template.

    templates: (k,) names; tasks, items: (n,) identity of each row; scores: (n, k).
    """

    templates: list[str]
    tasks: list[str]
    items: list[str]
    scores: np.ndarray


def prompt_templates(extra: Mapping[str, str] | Iterable[str] | None = None, *,
              builtin: Sequence[str] = tuple(TEMPLATES)) -> dict[str, str]:
    """Built-in templates (those named in `builtin`) plus user ones, validated.

    extra: {name: format string}, or "name=format string" texts (the CLI form).
    """
    chosen: dict[str, str] = {}
    for name in builtin:
        if name not in TEMPLATES:
            raise LabcoatError(f"unknown template {name!r}; choose from "
                               f"{', '.join(TEMPLATES)} or give your own as name=TEMPLATE")
        chosen[name] = TEMPLATES[name]
    pairs = extra.items() if isinstance(extra, Mapping) else (
        _split(text) for text in (extra or []))
    for name, text in pairs:
        _check(name, text)
        if name in chosen:
            raise LabcoatError(f"template {name!r} is given twice; give each template its "
                               "own name")
        chosen[name] = text
    if not chosen:
        raise LabcoatError("no templates: name at least one")
    return chosen


def render(item: EvalItem, template: str) -> str:
    """The prompt for `item` under `template` (a format string over FIELDS)."""
    return template.format(input=item.input, input_json=json.dumps(item.input),
                           id=item.id, task=item.task, cluster=item.cluster or "")


def evaluate_templates(items: Sequence[EvalItem], model: Model | BatchModel,
                       chosen: Mapping[str, str] | None = None, *,
                       run: Any = None, step: int = 0, batched: bool = False
                       ) -> TemplateScores:
    """Score every item under every template with `model(prompt, item) -> score`, or,
    batched, `model(prompts, items) -> scores` once per template (one batch for a
    model that pads and runs many prompts at once).

    run, step: a labcoat run (labcoat.init()) to log the item results to, one
    log_items call per task and template with variant = the template's name.
    """
    chosen = dict(chosen or TEMPLATES)
    if not items:
        raise LabcoatError("no eval items to render")
    names = list(chosen)
    scores = np.empty((len(items), len(names)))
    for j, name in enumerate(names):
        prompts = [render(item, chosen[name]) for item in items]
        values = (list(model(prompts, list(items))) if batched  # type: ignore[call-arg]
                  else [model(p, item) for p, item in zip(prompts, items, strict=True)])
        if len(values) != len(items):
            raise LabcoatError(f"the model returned {len(values)} scores for {len(items)} "
                               f"prompts under template {name!r}; return one per prompt")
        for i, (item, value) in enumerate(zip(items, values, strict=True)):
            try:
                scores[i, j] = float(value)
            except (TypeError, ValueError):
                raise LabcoatError(f"the model returned {value!r} for item {item.id!r} under "
                                   f"template {name!r}; it must return a number (the score)"
                                   ) from None
    result = TemplateScores(names, [it.task for it in items], [it.id for it in items], scores)
    if run is not None:
        _log(run, step, result)
    return result


def _log(run: Any, step: int, result: TemplateScores) -> None:
    for task in dict.fromkeys(result.tasks):
        rows = [i for i, t in enumerate(result.tasks) if t == task]
        for j, name in enumerate(result.templates):
            run.log_items(step, task, [result.items[i] for i in rows],
                          result.scores[rows, j].tolist(), variant=name)


def _split(text: str) -> tuple[str, str]:
    name, sep, template = text.partition("=")
    if not sep or not name.strip():
        raise LabcoatError(f"template {text!r} has no name; write it as NAME=TEMPLATE, e.g. "
                           "'qa=Q: {input}\\nA:'")
    return name.strip(), template.replace("\\n", "\n")


def _check(name: str, text: str) -> None:
    if not name or "=" in name:
        raise LabcoatError(f"template name {name!r} must be non-empty and without '='")
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as e:
        raise LabcoatError(f"template {name!r} is not a valid format string ({e}); write "
                           "literal braces as {{ and }}") from None
    unknown = [f for f in fields if f.split(".")[0].split("[")[0] not in FIELDS]
    if unknown:
        raise LabcoatError(f"template {name!r} uses unknown field {{{unknown[0]}}}; fields: "
                           f"{', '.join('{' + f + '}' for f in FIELDS)}")
    if "input" not in fields and "input_json" not in fields:
        raise LabcoatError(f"template {name!r} never shows the item: add {{input}} or "
                           "{input_json}")
