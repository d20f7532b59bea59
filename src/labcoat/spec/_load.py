"""Design file -> validated Design, with every problem reported as file:line and a fix."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from labcoat.errors import LabcoatError
from labcoat.spec._schema import Design, LocatedError
from labcoat.spec._yaml import line_of, load_yaml, parse_yaml


def load_design(path: str | Path) -> Design:
    """Read and validate a design file; raise LabcoatError naming file:line otherwise."""
    path = Path(path)
    data, lines = load_yaml(path)
    return _validate(data, lines, str(path))


def parse_design(text: str, name: str = "<design>") -> Design:
    """Validate design YAML given as text (e.g. stored in the database)."""
    data, lines = parse_yaml(text, name)
    return _validate(data, lines, name)


def _validate(data: Any, lines: dict, name: str) -> Design:
    if not isinstance(data, dict):
        raise LabcoatError(
            f"{name}: a design file is a YAML mapping (name:, hypothesis:, command:, arms:, "
            "seeds:); `labcoat init DIR` writes an example"
        )
    try:
        return Design.model_validate(data)
    except ValidationError as e:
        problems = list(dict.fromkeys(_describe(err, lines, name) for err in _merge_unions(e)))
        header = f"{name}: the design has {len(problems)} problem(s):" if len(problems) > 1 else ""
        raise LabcoatError("\n".join([header, *problems]).strip()) from None


_SCALAR_TAGS = {"str", "int", "float", "bool"}


def _merge_unions(e: ValidationError) -> list[dict[str, Any]]:
    """One error per key for values that match no member of a str|int|float|bool union."""
    merged = []
    for err in e.errors():
        loc = tuple(err["loc"])
        if loc and loc[-1] in _SCALAR_TAGS:
            err = {**err, "loc": loc[:-1], "type": "scalar",
                   "msg": "expected a single value (text, number or true/false)"}
        merged.append(err)
    return merged


def _describe(err: dict[str, Any], lines: dict, name: str) -> str:
    loc = tuple(err["loc"])
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, LocatedError):
        loc, message = cause.path, str(cause)
    elif err["type"] == "extra_forbidden":
        message = f"unknown key {loc[-1]!r}{_suggest(loc)}"
    elif err["type"] == "missing":
        message = f"missing required key {loc[-1]!r}" + _field_help(loc)
    else:
        text = err["msg"].removeprefix("Value error, ")
        message = f"{'.'.join(map(str, loc))}: {text} (got {err.get('input')!r})" + _field_help(loc)
    line = line_of(lines, loc)
    where = f"{name}:{line}" if line else name
    return f"{where}: {message}"


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that owns the key at `loc` (for suggestions)."""
    model: type[BaseModel] | None = Design
    for part in loc[:-1]:
        if model is None:
            return None
        field = model.model_fields.get(str(part))
        if field is None:
            # a dict entry such as arms.<name>: its values are the dict's value model
            continue
        annotation = field.annotation
        args = getattr(annotation, "__args__", ())
        candidates = [a for a in (annotation, *args) if isinstance(a, type)]
        model = next((c for c in candidates if issubclass(c, BaseModel)), None)
    return model


def _suggest(loc: tuple) -> str:
    model = _model_at(loc)
    if model is None:
        return "; remove it"
    valid = list(model.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} Valid keys here: {', '.join(valid)}"


def _field_help(loc: tuple) -> str:
    model = _model_at(loc)
    field = model.model_fields.get(str(loc[-1])) if model else None
    return f"; expected {field.description}" if field is not None and field.description else ""
