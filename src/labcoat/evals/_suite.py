"""An eval suite as data: items plus the scorer that judges them.

`load_suite` reads a .jsonl/.csv file (or a directory of them, one task per
file; see `_eval_items`) or an lm-eval-harness task YAML (see
`_lm_eval_task`). The scorer defaults to multiple choice when every item has
choices, else exact match. `stratified_order` is the seeded order in which
subsets are taken, so a subset of any size is stratified and the same one
every time (paired across evaluations).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from labcoat.errors import LabcoatError
from labcoat.evals._eval_items import EvalItem, load_eval_items
from labcoat.evals._scorers import Scorer, first_number, gold_index, parse_scorer

YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class EvalSuite:
    """Items and their scorer.

    items: every item, (task, id) unique. delimiter: text between an input and
    its target or choice when they are tokenized (lm-eval-harness's
    ``target_delimiter``; default one space).
    """

    name: str
    items: tuple[EvalItem, ...]
    scorer: Scorer
    delimiter: str = " "

    def __post_init__(self) -> None:
        if not self.items:
            raise LabcoatError(f"eval suite {self.name!r} has no items")
        keys = [(item.task, item.id) for item in self.items]
        if len(set(keys)) != len(keys):
            raise LabcoatError(f"eval suite {self.name!r} repeats an item (task, id); "
                               "give each item a unique id within its task")
        if self.scorer.kind == "multiple_choice":
            for item in self.items:
                gold_index(item)  # raises, naming the item, without choices or a valid target
        if self.scorer.kind == "numeric":
            bad = next((i for i in self.items if first_number(i.target) is None), None)
            if bad is not None:
                raise LabcoatError(f"eval suite {self.name!r}: item {bad.id!r} of task "
                                   f"{bad.task!r} has target {bad.target!r}, which holds no "
                                   "number for the numeric scorer")

    def __len__(self) -> int:
        return len(self.items)

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(item.task for item in self.items))

    def stratified_order(self, seed: int = 0) -> np.ndarray:
        """Item indices in the order subsets take them: (n_items,) int.

        Tasks take turns (equal items per task while a task has items left, as
        a macro average weights tasks equally); within a task, clusters take
        turns in a seeded order and items within a cluster come in a seeded
        order. So the first k indices are a stratified sample for every k,
        and a larger subset extends a smaller one.
        """
        rng = np.random.default_rng(seed)
        per_task = []
        for task in self.tasks:
            groups: dict[str | None, list[int]] = {}
            for i, item in enumerate(self.items):
                if item.task == task:
                    groups.setdefault(item.cluster, []).append(i)
            lists = [list(rng.permutation(g)) for g in groups.values()]
            lists = [lists[j] for j in rng.permutation(len(lists))]
            per_task.append(_round_robin(lists))
        return np.asarray(_round_robin(per_task), dtype=np.int64)

    def subset(self, indices: Sequence[int]) -> EvalSuite:
        return EvalSuite(self.name, tuple(self.items[i] for i in indices), self.scorer,
                         self.delimiter)


def _round_robin(lists: list[list[int]]) -> list[int]:
    out: list[int] = []
    for depth in range(max(map(len, lists), default=0)):
        out.extend(int(xs[depth]) for xs in lists if depth < len(xs))
    return out


def load_suite(path: str | Path, scorer: Scorer | str | None = None) -> EvalSuite:
    """A suite from items (.jsonl/.csv, or a directory of them) or an lm-eval-harness task YAML.

    scorer: a Scorer or its string form (`parse_scorer`); None: the YAML's
    output type, else multiple choice when every item has choices, else exact match.
    """
    path = Path(path)
    if isinstance(scorer, str):
        scorer = parse_scorer(scorer)
    if path.suffix in YAML_SUFFIXES:
        from labcoat.evals._lm_eval_task import load_lm_eval_task

        suite = load_lm_eval_task(path)
        return suite if scorer is None else EvalSuite(suite.name, suite.items, scorer,
                                                      suite.delimiter)
    items = load_eval_items(path)
    if scorer is None:
        mc = all(item.choices for item in items)
        scorer = Scorer(kind="multiple_choice" if mc else "exact_match")
    return EvalSuite(path.stem if path.is_file() else path.name, tuple(items), scorer)
