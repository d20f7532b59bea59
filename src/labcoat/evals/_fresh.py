"""Fresh eval items from templates: re-instantiated numbers and names, irrelevant clauses,
shuffled options, and the answer recomputed by code.

A static item can be memorized; a template of it cannot (GSM-Symbolic, Mirzadeh et al.
2024; DyVal, Zhu et al. ICLR 2024). A template is one item with slots::

    templates:
      - id: apples
        text: "{name} has {a} apples and buys {b} more. How many apples does {name} have?"
        slots:
          name: [Ann, Bob, Carla, Dev]       # one of these
          a: {min: 2, max: 20}               # an integer in [min, max]
          b: {min: 2, max: 20}
          other: [Eve, Finn]
          c: {min: 2, max: 9}
        answer: "a + b"                      # an expression of the slots, computed by code
        constraints: ["a != b"]              # drawn again until all hold
        original: {name: Ann, a: 5, b: 3}    # the published item's values (optional)
        distractors: ["{other} has {c} pears."]   # irrelevant clauses: never change the answer
        choices: ["a + b", "a + b + 1", "a * b", "a - b"]   # multiple choice (optional)

Text holds ``{expression}`` fields (``{a + b}`` works; ``{{`` is a brace). Expressions are
evaluated by a small interpreter of Python's expression syntax (numbers, strings, slot
names, arithmetic, comparisons, ``and``/``or``/``not``, ``x if c else y`` and
min, max, abs, round, int, float, str, len, sum, sorted), never by `eval`.

Difficulty knobs (`Difficulty`): ``distractors`` irrelevant clauses inserted at random
sentence boundaries before the question, ``magnitude`` stretching every integer range
(numbers get larger), ``shuffle`` the options. Every generated item records its seed, slot
values, knobs and template; `instantiate(template, seed, difficulty)` gives it back.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import operator
import os
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcoat.errors import LabcoatError
from labcoat.evals._eval_items import EvalItem

TEMPLATE_FORMAT = "labcoat.eval_templates"
ATTEMPTS = 1000  # draws before a template's constraints count as unsatisfiable
FIELD = re.compile(r"\{\{|\}\}|\{([^{}]+)\}")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class TemplateError(LabcoatError):
    """A template file or template that cannot generate items."""


# --- expressions ----------------------------------------------------------------------------

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "round": round, "int": int, "float": float,
    "str": str, "len": len, "sum": sum, "sorted": sorted,
}


def evaluate(expression: str, values: Mapping[str, Any]) -> Any:
    """The value of `expression` with slot `values` (see the module docstring for what is
    allowed). Raises TemplateError naming the expression for anything else."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise TemplateError(f"expression {expression!r} is not valid ({e.msg})") from None
    try:
        return _eval(tree.body, values, expression)
    except TemplateError:
        raise
    except (ArithmeticError, TypeError, ValueError) as e:
        raise TemplateError(f"expression {expression!r} failed on {dict(values)}: {e}") from None


def _eval(node: ast.AST, values: Mapping[str, Any], source: str) -> Any:
    match node:
        case ast.Constant(value=v) if isinstance(v, int | float | str) and not isinstance(v, bool):
            return v
        case ast.Name(id=name):
            if name in values:
                return values[name]
            if name in ("True", "False"):
                return name == "True"
            raise TemplateError(f"expression {source!r} names {name!r}, which is no slot; "
                                f"slots: {', '.join(values) or 'none'}")
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            a, b = _eval(left, values, source), _eval(right, values, source)
            if isinstance(op, ast.Pow) and isinstance(b, int | float) and abs(b) > 64:
                raise TemplateError(f"expression {source!r}: exponent {b} is too large")
            return _BINARY[type(op)](a, b)
        case ast.UnaryOp(op=ast.USub(), operand=x):
            return -_eval(x, values, source)
        case ast.UnaryOp(op=ast.UAdd(), operand=x):
            return +_eval(x, values, source)
        case ast.UnaryOp(op=ast.Not(), operand=x):
            return not _eval(x, values, source)
        case ast.BoolOp(op=op, values=operands):
            results = (_eval(x, values, source) for x in operands)
            return all(results) if isinstance(op, ast.And) else any(results)
        case ast.Compare(left=left, ops=ops, comparators=rights) if all(
                type(o) in _COMPARE for o in ops):
            a = _eval(left, values, source)
            for op, right in zip(ops, rights, strict=True):
                b = _eval(right, values, source)
                if not _COMPARE[type(op)](a, b):
                    return False
                a = b
            return True
        case ast.IfExp(test=test, body=body, orelse=orelse):
            return _eval(body if _eval(test, values, source) else orelse, values, source)
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in FUNCTIONS:
            return FUNCTIONS[name](*(_eval(a, values, source) for a in args))
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            return [_eval(x, values, source) for x in elts]
    raise TemplateError(f"expression {source!r}: {ast.unparse(node)!r} is not allowed (use "
                        "numbers, strings, slot names, arithmetic, comparisons, and/or/not, "
                        f"x if c else y, and {', '.join(FUNCTIONS)})")


def render_value(value: Any) -> str:
    """How a computed value is written: whole floats as integers, others to 6 significant
    digits (so 7/2 is 3.5 and 10/4*2 is 5)."""
    if isinstance(value, float):
        if math.isfinite(value) and value == round(value):
            return str(int(round(value)))
        return f"{value:.6g}"
    return str(value)


def render(text: str, values: Mapping[str, Any]) -> str:
    """`text` with every ``{expression}`` replaced by its rendered value."""
    def field_value(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        return render_value(evaluate(match.group(1), values))

    return FIELD.sub(field_value, text)


# --- templates ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Slot:
    """A slot's values: `choices` (names, words) or integers in [low, high]."""

    name: str
    choices: tuple[Any, ...] | None = None
    low: int = 0
    high: int = 0

    def draw(self, rng: random.Random, magnitude: float) -> Any:
        if self.choices is not None:
            return rng.choice(self.choices)
        # magnitude stretches the range upwards: [low, low + (high - low) * magnitude].
        return rng.randint(self.low, self.low + round((self.high - self.low) * magnitude))


@dataclass(frozen=True, kw_only=True)
class Difficulty:
    """Difficulty knobs of generated items.

    distractors: irrelevant clauses to insert (a template with fewer gets all it has; its
    items record the number used). magnitude: >= 1 stretches every integer slot's range
    upwards by this factor (larger numbers). shuffle: shuffle multiple-choice options.
    """

    distractors: int = 0
    magnitude: float = 1.0
    shuffle: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.distractors, bool) or not isinstance(self.distractors, int) \
                or self.distractors < 0:
            raise LabcoatError(f"distractors={self.distractors!r} must be an integer >= 0")
        if not (isinstance(self.magnitude, int | float) and self.magnitude >= 1
                and math.isfinite(self.magnitude)):
            raise LabcoatError(f"magnitude={self.magnitude!r} must be a number >= 1 (1: the "
                               "template's own ranges)")

    def as_dict(self) -> dict[str, Any]:
        return {"distractors": self.distractors, "magnitude": self.magnitude,
                "shuffle": self.shuffle}


@dataclass(frozen=True, kw_only=True)
class Template:
    """One templated item (see the module docstring for the fields)."""

    id: str
    task: str
    text: str
    slots: tuple[Slot, ...]
    answer: str
    constraints: tuple[str, ...] = ()
    distractors: tuple[str, ...] = ()
    choices: tuple[str, ...] | None = None
    original: dict[str, Any] | None = None
    where: str = ""  # file and template, for messages

    @property
    def slot_names(self) -> list[str]:
        return [s.name for s in self.slots]


@dataclass(frozen=True)
class TemplateSuite:
    """The templates of one file, in order."""

    name: str
    templates: tuple[Template, ...]


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from `parts` (SHA-256): the same in every process and platform."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def instantiate(template: Template, seed: int, difficulty: Difficulty = Difficulty(), *,
                values: Mapping[str, Any] | None = None, item_id: str | None = None,
                parent: str | None = None) -> EvalItem:
    """The item `seed` draws from `template` (pure: same arguments, same item).

    values: fixed slot values (e.g. the original's) instead of drawn ones; the
    constraints must hold. The target is the answer expression's value (multiple choice:
    the option whose value equals it, exactly one). Metadata records seed, slot values,
    knobs, template and parent.
    """
    rng = random.Random(seed)
    drawn = dict(values) if values is not None else {
        s.name: s.draw(rng, difficulty.magnitude) for s in template.slots}
    problem = _problem(template, drawn)
    if problem:
        raise TemplateError(f"{template.where}: {problem}")
    text = render(template.text, drawn)
    # A template with fewer distractors than asked gets all it has (recorded in its knobs).
    used = min(difficulty.distractors, len(template.distractors))
    difficulty = Difficulty(distractors=used, magnitude=difficulty.magnitude,
                            shuffle=difficulty.shuffle)
    if used:
        clauses = [render(d, drawn) for d in rng.sample(template.distractors, used)]
        text = _insert_clauses(text, clauses, rng)
    answer = evaluate(template.answer, drawn)
    choices: tuple[str, ...] | None = None
    target = render_value(answer)
    if template.choices is not None:
        options = [render_value(evaluate(c, drawn)) for c in template.choices]
        if difficulty.shuffle:
            rng.shuffle(options)
        choices = tuple(options)
    return EvalItem(task=template.task, id=item_id or template.id, input=text, target=target,
                    choices=choices,
                    metadata={"template": template.id, "seed": seed, "parent": parent,
                              "slots": drawn, "knobs": difficulty.as_dict(),
                              "generator": "template"})


def _problem(template: Template, values: Mapping[str, Any]) -> str | None:
    """Why these slot values make no valid item (None: they do)."""
    missing = [s for s in template.slot_names if s not in values]
    if missing:
        return f"slot values miss {', '.join(missing)}"
    for constraint in template.constraints:
        if not evaluate(constraint, values):
            return f"constraint {constraint!r} fails for {dict(values)}"
    if template.choices is not None:
        answer = evaluate(template.answer, values)
        matches = [c for c in template.choices
                   if render_value(evaluate(c, values)) == render_value(answer)]
        if len(matches) != 1:
            return (f"{len(matches)} options equal the answer {render_value(answer)} for "
                    f"{dict(values)}; options must differ and one must be right (add a "
                    "constraint)")
    return None


def twins(template: Template, k: int, seed: int = 0, difficulty: Difficulty = Difficulty()
          ) -> list[EvalItem]:
    """k fresh items of `template`, ids ``<id>~0``..``<id>~k-1``, each from the first seed
    ``derive_seed(seed, id, j, attempt)`` whose slot values satisfy the constraints and
    differ from the original's."""
    out = []
    for j in range(k):
        for attempt in range(ATTEMPTS):
            item_seed = derive_seed(seed, template.id, j, attempt)
            rng = random.Random(item_seed)
            drawn = {s.name: s.draw(rng, difficulty.magnitude) for s in template.slots}
            if drawn == template.original or _problem(template, drawn):
                continue
            out.append(instantiate(template, item_seed, difficulty,
                                   item_id=f"{template.id}~{j}", parent=template.id))
            break
        else:
            raise TemplateError(f"{template.where}: no slot values satisfy the constraints in "
                                f"{ATTEMPTS} draws; widen the slots or relax the constraints")
    return out


def original_item(template: Template, seed: int = 0) -> EvalItem:
    """The template's original item (its `original` slot values, choices in the template's
    order); a template without them gets a draw, as twin ``original``."""
    if template.original is not None:
        return instantiate(template, seed, Difficulty(shuffle=False), values=template.original)
    return twins(template, 1, derive_seed(seed, "original"), Difficulty(shuffle=False))[0]


def fresh_items(suite: TemplateSuite, k: int = 1, seed: int = 0,
                difficulty: Difficulty = Difficulty(), *, originals: bool = True
                ) -> list[EvalItem]:
    """Every template's original item (if `originals`) followed by its k twins."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0 or (k == 0 and not originals):
        raise LabcoatError(f"twins per template must be an integer >= 1, got {k!r}")
    out: list[EvalItem] = []
    for template in suite.templates:
        if originals:
            out.append(original_item(template, seed))
        out.extend(twins(template, k, seed, difficulty))
    return out


def _insert_clauses(text: str, clauses: Sequence[str], rng: random.Random) -> str:
    """Clauses at random sentence boundaries before the last sentence (the question)."""
    sentences = SENTENCE_END.split(text.strip())
    for clause in clauses:
        sentences.insert(rng.randint(0, max(len(sentences) - 1, 0)), clause.strip())
    return " ".join(sentences)


# --- files ----------------------------------------------------------------------------------


def load_templates(path: str | Path) -> TemplateSuite:
    """Templates from a YAML or JSON file: ``{templates: [...]}`` (or the list itself);
    every problem names the file, the template and the fix."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TemplateError(f"{path}: no such template file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TemplateError(f"{path}: cannot read ({e})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise TemplateError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}"
                            f" ({e})") from None
    records = data.get("templates") if isinstance(data, dict) else data
    if not isinstance(records, list) or not records:
        raise TemplateError(f"{path}: expected 'templates:' with a list of templates (id, "
                            "text, slots, answer)")
    default_task = (data.get("task") if isinstance(data, dict) else None) or path.stem
    templates = [_template(r, f"{path}: template {i + 1}", str(default_task))
                 for i, r in enumerate(records)]
    ids = [(t.task, t.id) for t in templates]
    dup = next((k for k in ids if ids.count(k) > 1), None)
    if dup:
        raise TemplateError(f"{path}: template id {dup[1]!r} appears twice in task {dup[0]!r}")
    name = (data.get("name") if isinstance(data, dict) else None) or path.stem
    return TemplateSuite(str(name), tuple(templates))


def _template(record: Any, where: str, default_task: str) -> Template:
    if not isinstance(record, dict):
        raise TemplateError(f"{where}: a template is a mapping with id, text, slots, answer")
    for key in ("id", "text", "answer"):
        if not isinstance(record.get(key), str) or not record[key].strip():
            raise TemplateError(f"{where}: needs {key!r} as text")
    where = f"{where} ({record['id']})"
    known = {"id", "task", "text", "slots", "answer", "constraints", "distractors", "choices",
             "original"}
    unknown = sorted(set(record) - known)
    if unknown:
        raise TemplateError(f"{where}: unknown field {unknown[0]!r}; fields: "
                            f"{', '.join(sorted(known))}")
    slots = tuple(_slot(name, spec, where) for name, spec in (record.get("slots") or {}).items())
    lists = {k: record.get(k) or [] for k in ("constraints", "distractors")}
    for key, value in lists.items():
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TemplateError(f"{where}: {key} must be a list of strings")
    choices = record.get("choices")
    if choices is not None and (not isinstance(choices, list) or len(choices) < 2
                                or not all(isinstance(c, str) for c in choices)):
        raise TemplateError(f"{where}: choices must list at least two expressions")
    original = record.get("original")
    if original is not None and not isinstance(original, dict):
        raise TemplateError(f"{where}: original must map slot names to values")
    template = Template(id=str(record["id"]), task=str(record.get("task") or default_task),
                        text=record["text"], slots=slots, answer=record["answer"],
                        constraints=tuple(lists["constraints"]),
                        distractors=tuple(lists["distractors"]),
                        choices=None if choices is None else tuple(choices),
                        original=original, where=where)
    # Check every expression once, on a draw, so a typo fails at load, not mid-generation.
    names = set(template.slot_names)
    texts = (template.text, *template.distractors)
    for source in (*texts, template.answer, *template.constraints, *(template.choices or ())):
        for name in sorted(_names(source, text=source in texts) - names):
            if name not in FUNCTIONS and name not in ("True", "False"):
                raise TemplateError(f"{where}: {source!r} uses {name!r}, which is no slot; "
                                    f"slots: {', '.join(sorted(names)) or 'none'}")
    if original is not None:
        problem = _problem(template, original)
        if problem:
            raise TemplateError(f"{where}: original values: {problem}")
    return template


def _names(source: str, *, text: bool) -> set[str]:
    """Slot names an expression (or a text's ``{fields}``) uses."""
    expressions = [m.group(1) for m in FIELD.finditer(source) if m.group(1)] if text \
        else [source]
    names: set[str] = set()
    for expression in expressions:
        try:
            tree = ast.parse(expression.strip(), mode="eval")
        except SyntaxError as e:
            raise TemplateError(f"{expression!r} is not a valid expression ({e.msg})") from None
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return names


def _slot(name: Any, spec: Any, where: str) -> Slot:
    if not isinstance(name, str) or not name.isidentifier():
        raise TemplateError(f"{where}: slot name {name!r} must be an identifier (letters, "
                            "digits, _)")
    if isinstance(spec, list) and spec:
        return Slot(name=name, choices=tuple(spec))
    if isinstance(spec, dict) and set(spec) == {"min", "max"} and all(
            isinstance(spec[k], int) and not isinstance(spec[k], bool) for k in spec):
        if spec["min"] > spec["max"]:
            raise TemplateError(f"{where}: slot {name}: min {spec['min']} > max {spec['max']}")
        return Slot(name=name, low=spec["min"], high=spec["max"])
    raise TemplateError(f"{where}: slot {name} must be a list of values or {{min: INT, "
                        f"max: INT}}, got {spec!r}")


def write_items(items: Iterable[EvalItem], path: str | Path) -> int:
    """Items as a labcoat eval suite file (JSON lines: task, id, input, target, choices and
    the generator's record: template, seed, parent, slots, knobs), written atomically.
    Returns the number written."""
    path = Path(path)
    lines = []
    for item in items:
        record: dict[str, Any] = {"task": item.task, "id": item.id, "input": item.input,
                                  "target": item.target}
        if item.choices is not None:
            record["choices"] = list(item.choices)
        record.update(item.metadata)
        lines.append(json.dumps(record, default=str))
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise LabcoatError(f"{path}: cannot write ({e.strerror})") from None
    return len(lines)
