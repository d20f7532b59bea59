"""How an eval item is scored: exact match, multiple choice, numeric tolerance, or a user function.

A scorer is a small frozen value, so a suite (items + scorer) can be built
from a file, a design or a string such as ``"numeric:0.01"`` or
``"mypkg.scoring:judge"`` (`parse_scorer`). The engine computes exact match and
multiple choice from the model's logits with torch ops (no text in the hot
path); `score_text` is the same rule on a generated string, used for
numeric and user scorers and by the naive reference loop.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from labcoat.errors import LabcoatError

if TYPE_CHECKING:
    from labcoat.evals._eval_items import EvalItem

Kind = Literal["exact_match", "multiple_choice", "numeric", "function"]
KINDS: tuple[Kind, ...] = ("exact_match", "multiple_choice", "numeric", "function")
# The first number in a generation: optional sign, digits with optional thousands commas,
# optional decimals and exponent (as GSM8K-style answers are written).
NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Scorer:
    """A scoring rule; build one with the functions below or `parse_scorer`.

    kind: exact_match (greedy continuation equals the target, then EOS),
        multiple_choice (the choice with the highest summed log-likelihood is
        the target; lm-eval-harness's ``acc``), numeric (the first number in
        the greedy continuation is within tolerance of the target number) or
        function (a user function ``fn(item, generated_text) -> float``).
    abs_tol, rel_tol: numeric only; |x - y| <= max(abs_tol, rel_tol * |y|)
        (math.isclose's rule).
    function: "module:function" path of the user function (function only).
    """

    kind: Kind = "exact_match"
    abs_tol: float = 0.0
    rel_tol: float = 1e-9
    function: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise LabcoatError(f"scorer {self.kind!r} is unknown; choose between "
                               f"{', '.join(KINDS)} (or give a user function as module:function)")
        if self.abs_tol < 0 or self.rel_tol < 0:
            raise LabcoatError(f"numeric tolerances must be >= 0, got abs_tol={self.abs_tol}, "
                               f"rel_tol={self.rel_tol}")
        if (self.kind == "function") != (self.function is not None):
            raise LabcoatError("a function scorer needs function='module:function' "
                               "(and only a function scorer takes one)")

    @property
    def metric(self) -> str:
        """The metric name results are logged under."""
        return {"exact_match": "exact_match", "multiple_choice": "acc", "numeric": "numeric_match",
                "function": "score"}[self.kind]

    @property
    def generates(self) -> bool:
        """True when scoring needs generated text (numeric, function)."""
        return self.kind in ("numeric", "function")

    def resolve(self) -> Callable[[EvalItem, str], float]:
        """The text rule as a callable (imports the user function once)."""
        if self.kind != "function":
            return lambda item, text: score_text(self, item, text)
        return load_function(self.function or "")


def exact_match() -> Scorer:
    return Scorer(kind="exact_match")


def multiple_choice() -> Scorer:
    return Scorer(kind="multiple_choice")


def numeric(abs_tol: float = 0.0, rel_tol: float = 1e-9) -> Scorer:
    return Scorer(kind="numeric", abs_tol=abs_tol, rel_tol=rel_tol)


def function(path: str) -> Scorer:
    load_function(path)  # fail now, with the path in the message, not in the middle of a run
    return Scorer(kind="function", function=path)


def parse_scorer(text: str) -> Scorer:
    """``exact_match``, ``multiple_choice``, ``numeric`` or ``numeric:TOL`` (absolute
    tolerance), or a user function ``module:function``."""
    text = text.strip()
    name, _, arg = text.partition(":")
    if name == "numeric":
        try:
            return numeric(abs_tol=float(arg)) if arg else numeric()
        except ValueError:
            raise LabcoatError(f"scorer {text!r}: the tolerance {arg!r} is not a number; "
                               "write numeric:0.01") from None
    if name in ("exact_match", "multiple_choice") and not arg:
        return Scorer(kind=name)  # type: ignore[arg-type]
    if arg:
        return function(text)
    raise LabcoatError(f"scorer {text!r} is unknown; choose between exact_match, "
                       "multiple_choice, numeric[:TOL] or a user function module:function")


def load_function(path: str) -> Callable[[EvalItem, str], float]:
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise LabcoatError(f"scorer function {path!r}: write it as module:function "
                           "(e.g. mypkg.scoring:judge)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise LabcoatError(f"scorer function {path!r}: cannot import {module_name!r} ({e}); "
                           "check the module is on PYTHONPATH") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise LabcoatError(f"scorer function {path!r}: {module_name} has no function {attr!r}")
    return fn


def score_text(scorer: Scorer, item: EvalItem, text: str) -> float:
    """The score of one generated text (free-form scorers; also the reference for exact match).

    exact_match compares whitespace-stripped strings; numeric parses the first
    number of `text` and of the target (thousands commas allowed).
    """
    if scorer.kind == "exact_match":
        return float(text.strip() == item.target.strip())
    if scorer.kind == "numeric":
        got, want = first_number(text), first_number(item.target)
        if want is None:
            raise LabcoatError(f"item {item.id!r} of task {item.task!r}: target "
                               f"{item.target!r} holds no number for the numeric scorer")
        return float(got is not None and math.isclose(got, want, rel_tol=scorer.rel_tol,
                                                      abs_tol=scorer.abs_tol))
    if scorer.kind == "function":
        return float(scorer.resolve()(item, text))
    raise ValueError("multiple_choice items are scored from log-likelihoods, not text")


def first_number(text: str) -> float | None:
    for match in NUMBER.finditer(text):
        token = match.group().replace(",", "")
        if any(c.isdigit() for c in token):
            return float(token)
    return None


def gold_index(item: EvalItem) -> int:
    """The index of a multiple-choice item's answer: its target is a choice or an index."""
    if not item.choices:
        raise LabcoatError(f"item {item.id!r} of task {item.task!r} has no choices; the "
                           "multiple_choice scorer needs `choices` on every item")
    target = item.target.strip()
    stripped = [c.strip() for c in item.choices]
    if target in stripped:
        return stripped.index(target)
    if target.lstrip("-").isdigit() and 0 <= int(target) < len(item.choices):
        return int(target)
    raise LabcoatError(f"item {item.id!r} of task {item.task!r}: target {item.target!r} is "
                       f"neither one of its {len(item.choices)} choices nor a 0-based index")
