"""Design file -> validated Design, with every problem reported as file:line and a fix."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from labcoat.errors import LabcoatError
from labcoat.spec._checks import design_problems
from labcoat.spec._schema import Design
from labcoat.spec._yaml import line_of, load_yaml, parse_yaml


@dataclass(frozen=True)
class LocatedProblem:
    """A problem at a place in the design file."""

    rule: str
    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


@dataclass
class DesignCheck:
    """A design file read leniently: the design if its structure is valid, and every problem."""

    design: Design | None
    problems: list[LocatedProblem] = field(default_factory=list)
    lines: dict = field(default_factory=dict)

    def raise_if_wrong(self, name: str) -> Design:
        if self.design is not None and not self.problems:
            return self.design
        texts = list(dict.fromkeys(str(p) for p in self.problems))
        header = f"{name}: the design has {len(texts)} problem(s):" if len(texts) > 1 else ""
        raise LabcoatError("\n".join([header, *texts]).strip())


def load_design(path: str | Path) -> Design:
    """Read and validate a design file; raise LabcoatError naming file:line otherwise."""
    return check_design_file(path).raise_if_wrong(str(path))


def parse_design(text: str, name: str = "<design>") -> Design:
    """Validate design YAML given as text (e.g. stored in the database)."""
    data, lines = parse_yaml(text, name)
    return _check(data, lines, name).raise_if_wrong(name)


def check_design_file(path: str | Path) -> DesignCheck:
    """Read a design file without raising for its problems (YAML errors still raise)."""
    data, lines = load_yaml(Path(path))
    return _check(data, lines, str(path))


def _check(data: Any, lines: dict, name: str) -> DesignCheck:
    if not isinstance(data, dict):
        problem = LocatedProblem("not-a-mapping", name, None,
                                 "a design file is a YAML mapping (name:, hypothesis:, command:, "
                                 "arms:, seeds:); `labcoat init DIR` writes an example")
        return DesignCheck(None, [problem], lines)
    try:
        design = Design.model_validate(data)
    except ValidationError as e:
        problems = [_describe(err, lines, name) for err in _merge_unions(e)]
        return DesignCheck(None, problems, lines)
    problems = [LocatedProblem(p.rule, name, line_of(lines, p.path), p.message)
                for p in design_problems(design)]
    return DesignCheck(design, problems, lines)


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


def _describe(err: dict[str, Any], lines: dict, name: str) -> LocatedProblem:
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        rule, message = "unknown-key", f"unknown key {loc[-1]!r}{_suggest(loc)}"
    elif err["type"] == "missing":
        rule, message = "missing-key", f"missing required key {loc[-1]!r}" + _field_help(loc)
    else:
        text = err["msg"].removeprefix("Value error, ")
        rule = "bad-value"
        message = (f"{'.'.join(map(str, loc))}: {text} (got {err.get('input')!r})"
                   + _field_help(loc))
    return LocatedProblem(rule, name, line_of(lines, loc), message)


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that owns the key at `loc` (for suggestions)."""
    model: type[BaseModel] | None = Design
    for part in loc[:-1]:
        if model is None:
            return None
        field_info = model.model_fields.get(str(part))
        if field_info is None:
            # a dict entry such as arms.<name>, or a list index: keep the value model
            continue
        annotation = field_info.annotation
        model = _model_in(annotation)
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel inside an annotation such as `Hypothesis | None` or `dict[str, Arm]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


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
    field_info = model.model_fields.get(str(loc[-1])) if model else None
    if field_info is not None and field_info.description:
        return f"; expected {field_info.description}"
    return ""
