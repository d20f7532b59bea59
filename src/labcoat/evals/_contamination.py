"""Contamination scanner: which eval items have word n-grams that occur in training text.

The rule follows GPT-3's decontamination (Brown et al. 2020, appendix C) and
lm-eval-harness's `decontamination/janitor.py`: texts are normalized
(`normalize_text`: NFKC, lowercase, punctuation and symbols deleted, whitespace
collapsed) and split into words; an item is contaminated when any of its word
n-grams occurs in the training text.

Which n: the default is 13. As in GPT-3, a task whose items are short uses a
smaller n: n_task = the task's 5th-percentile item length in words, clamped to
[min_n, n] (min_n defaults to 8). An item shorter than n_task words is matched
as a whole (its only "n-gram" is the item itself); an item with no words after
normalization has no n-grams and is never contaminated.

Speed: training text is streamed (see `_training_text`) and hashed in numpy
(`_ngrams`); membership is a searchsorted against the sorted eval n-gram hashes;
every hash hit is verified against the text, so a reported match is a real
match (no false positives from hash collisions). Once an eval n-gram has been
found, later hits of it are skipped without Python work. Each item's example is
the first of its n-grams found in scan order (files in the order given).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from labcoat.errors import LabcoatError
from labcoat.evals._eval_items import EvalItem, load_eval_items
from labcoat.evals._importers import ItemScores, load_item_scores
from labcoat.evals._ngrams import Hasher, normalize_text, text_ngram_hashes
from labcoat.evals._training_text import Block, stream_blocks, training_files

if TYPE_CHECKING:
    from labcoat import stats

DEFAULT_N = 13
DEFAULT_MIN_N = 8
TASK_PERCENTILE = 5  # GPT-3: n is the 5th-percentile item length, clamped to [8, 13]


@dataclass(frozen=True)
class Match:
    """Where an eval n-gram was first found: file, byte offset, line (JSONL) and text."""

    file: str
    offset: int
    line: int | None
    text: str


@dataclass(frozen=True)
class ItemContamination:
    """One eval item: its n (words per n-gram), distinct n-grams, how many were found."""

    task: str
    id: str
    n: int
    ngrams: int
    matched: int
    example: Match | None

    @property
    def contaminated(self) -> bool:
        return self.matched > 0

    @property
    def fraction(self) -> float:
        return self.matched / self.ngrams if self.ngrams else 0.0


@dataclass(frozen=True)
class TaskContamination:
    """Per task: items, contaminated items and their rate, and the n used."""

    task: str
    n: int
    items: int
    contaminated: int

    @property
    def rate(self) -> float:
        return self.contaminated / self.items if self.items else 0.0


@dataclass(frozen=True)
class ScoreComparison:
    """Scores of contaminated minus clean items (unpaired; Miller 2024, sec. 4.1).

    difference is None when either group has fewer than 2 scored items.
    """

    task: str  # a task name, or "all"
    clean: int
    contaminated: int
    clean_mean: float
    contaminated_mean: float
    difference: stats.Difference | None


@dataclass(frozen=True)
class ContaminationReport:
    """What `scan_contamination` found; `as_dict()` is the CLI's --json shape."""

    n: int
    min_n: int
    files: list[str]
    bytes_scanned: int
    items: list[ItemContamination]
    tasks: list[TaskContamination]
    scores: list[ScoreComparison] = field(default_factory=list)

    @property
    def contaminated(self) -> list[ItemContamination]:
        return [item for item in self.items if item.contaminated]

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n, "min_n": self.min_n, "files": self.files,
            "bytes_scanned": self.bytes_scanned,
            "tasks": [{**asdict(t), "rate": t.rate} for t in self.tasks],
            "items": [{**asdict(i), "contaminated": i.contaminated, "fraction": i.fraction}
                      for i in self.items],
            "scores": [{**asdict(s), "difference": None if s.difference is None
                        else _difference_dict(s.difference)} for s in self.scores],
        }


def _difference_dict(d: stats.Difference) -> dict[str, Any]:
    return {"estimate": d.estimate, "low": d.low, "high": d.high, "se": d.se,
            "p_value": d.p_value, "method": d.method, "ci": d.ci}


class _Index:
    """Eval n-grams by n: sorted unique hashes, and hash -> {n-gram text: item indices}."""

    def __init__(self, items: Sequence[EvalItem], n: int, min_n: int,
                 fields: Sequence[str], hasher: Hasher) -> None:
        words = [normalize_text("\n".join(getattr(item, f) for f in fields)).split()
                 for item in items]
        task_n: dict[str, int] = {}
        for task in dict.fromkeys(item.task for item in items):
            lengths = [len(w) for w, item in zip(words, items, strict=True) if item.task == task]
            percentile = int(np.percentile(lengths, TASK_PERCENTILE, method="lower"))
            task_n[task] = max(min(percentile, n), min_n)
        self.task_n = task_n
        self.item_n: list[int] = []
        self.item_ngrams: list[set[str]] = []
        by_n: dict[int, dict[int, dict[str, list[int]]]] = {}
        for index, (item, item_words) in enumerate(zip(items, words, strict=True)):
            size = min(task_n[item.task], len(item_words))
            self.item_n.append(size)
            grams: set[str] = set()
            if size:
                hashes = text_ngram_hashes(hasher, item_words, size)
                table = by_n.setdefault(size, {})
                for start, h in enumerate(hashes.tolist()):
                    text = " ".join(item_words[start:start + size])
                    if text not in grams:
                        grams.add(text)
                        table.setdefault(h, {}).setdefault(text, []).append(index)
            self.item_ngrams.append(grams)
        self.by_n = by_n
        self.keys = {k: np.array(sorted(t), dtype=np.uint64) for k, t in by_n.items()}
        # A one-byte-per-slot filter on the low hash bits answers most misses with one
        # cache-friendly gather; only its hits go to searchsorted.
        bits = int(np.clip(np.ceil(np.log2(max(1, sum(v.size for v in self.keys.values())))) + 6,
                           12, 24))
        self.mask = np.uint64((1 << bits) - 1)
        self.filter = {}
        for k, keys in self.keys.items():
            table = np.zeros(1 << bits, dtype=bool)
            table[(keys & self.mask).astype(np.int64)] = True
            self.filter[k] = table
        self.done = {k: np.zeros(v.size, dtype=bool) for k, v in self.keys.items()}
        self.found: dict[str, Match | None] = {}  # n-gram text -> first place (if located)
        self.examples: dict[int, Match] = {}  # item index -> its first match found

    @property
    def max_n(self) -> int:
        return max(self.by_n, default=1)

    def scan(self, block: Block, file: str, hasher: Hasher) -> None:
        for n, keys in self.keys.items():
            hashes = hasher.ngrams(block.hashes, n)
            if hashes.size == 0:
                continue
            candidates = np.flatnonzero(self.filter[n][(hashes & self.mask).astype(np.intp)])
            if candidates.size == 0:
                continue
            slot = np.zeros(hashes.size, dtype=np.intp)
            slot[candidates] = np.minimum(np.searchsorted(keys, hashes[candidates]),
                                          keys.size - 1)
            hit = (keys[slot[candidates]] == hashes[candidates]) & ~self.done[n][slot[candidates]]
            if block.doc is not None:  # no n-gram spans two documents
                hit &= block.doc[candidates] == block.doc[candidates + n - 1]
            positions = candidates[hit]
            if positions.size:
                self._verify(block, file, n, hashes, slot, positions)

    def _verify(self, block: Block, file: str, n: int, hashes: np.ndarray,
                slot: np.ndarray, positions: np.ndarray) -> None:
        """The rare path: check hits against the text (first hit of each hash first)."""
        _, first = np.unique(hashes[positions], return_index=True)
        for position in positions[np.sort(first)].tolist():
            if not self._check(block, file, n, position, int(slot[position])):
                # A collision came first: try every other hit of this hash in the block.
                same = positions[hashes[positions] == hashes[position]]
                for other in same.tolist():
                    if self._check(block, file, n, other, int(slot[other])):
                        break

    def _check(self, block: Block, file: str, n: int, position: int, slot: int) -> bool:
        texts = self.by_n[n][int(self.keys[n][slot])]
        raw = bytes(block.buf[block.starts[position]: block.ends[position + n - 1]])
        text = " ".join(raw.decode("utf-8").split())
        if text not in texts or text in self.found:
            return False
        owners = texts[text]
        match = None
        if any(i not in self.examples for i in owners):  # locating costs: only for examples
            offset, line = block.locate(position)
            match = Match(file, offset, line, text)
            for i in owners:
                self.examples.setdefault(i, match)
        self.found[text] = match
        if all(t in self.found for t in texts):
            self.done[n][slot] = True
        return True


def scan_contamination(
    train: str | Path | Sequence[str | Path],
    suite: str | Path | Sequence[EvalItem],
    *,
    n: int = DEFAULT_N,
    min_n: int = DEFAULT_MIN_N,
    fields: Sequence[str] = ("input",),
    text_field: str = "text",
    scores: str | Path | ItemScores | None = None,
    ci: float = 0.95,
    block_bytes: int = 1 << 18,
    progress: Callable[[int], None] | None = None,
) -> ContaminationReport:
    """Find eval items whose word n-grams occur in the training text.

    train: files or directories (plain text, or JSONL with `text_field`; `.gz` too).
    suite: an eval suite path (see `load_eval_items`) or the items themselves.
    n, min_n: n-gram length and its floor for short tasks (module docstring).
    fields: item fields scanned, joined (default the input, as lm-eval-harness's
    `doc_to_decontamination_query` does; add "target" to scan answers too).
    scores: per-item scores (any `load_item_scores` format) of one model on the
    suite; adds contaminated-minus-clean score differences with `ci` intervals.
    progress: called with the number of new training bytes after each block.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise LabcoatError(f"n={n!r}: the n-gram length must be a whole number >= 1 "
                           f"(default {DEFAULT_N})")
    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 1:
        raise LabcoatError(f"min_n={min_n!r}: the smallest n must be a whole number >= 1 "
                           f"(default {DEFAULT_MIN_N})")
    for name in fields:
        if name not in ("input", "target"):
            raise LabcoatError(f"field {name!r} cannot be scanned; choose input and/or target")
    items = load_eval_items(suite) if isinstance(suite, str | Path) else list(suite)
    if not items:
        raise LabcoatError("no eval items to scan")
    item_scores = load_item_scores(scores) if isinstance(scores, str | Path) else scores
    if isinstance(train, str | Path):
        train = [train]
    files = training_files([Path(p) for p in train])
    hasher = Hasher()
    index = _Index(items, n, min(min_n, n), fields, hasher)
    total = 0
    for file in files:
        for block in stream_blocks(file, hasher, overlap=index.max_n - 1,
                                   block_bytes=block_bytes, text_field=text_field):
            index.scan(block, str(file), hasher)
            total += block.raw_bytes
            if progress is not None:
                progress(block.raw_bytes)
    results = [_item_result(index, i, item) for i, item in enumerate(items)]
    tasks = [TaskContamination(task, index.task_n[task],
                               sum(r.task == task for r in results),
                               sum(r.task == task and r.contaminated for r in results))
             for task in index.task_n]
    comparison = [] if item_scores is None else compare_scores(items, results, item_scores, ci)
    return ContaminationReport(n, min(min_n, n), [str(f) for f in files], total, results, tasks,
                               comparison)


def _item_result(index: _Index, i: int, item: EvalItem) -> ItemContamination:
    grams = index.item_ngrams[i]
    matched = sum(g in index.found for g in grams)
    return ItemContamination(item.task, item.id, index.item_n[i], len(grams), matched,
                             index.examples.get(i))


def compare_scores(items: Sequence[EvalItem], results: Sequence[ItemContamination],
                   scores: ItemScores, ci: float = 0.95) -> list[ScoreComparison]:
    """Contaminated-minus-clean mean score, overall ("all") and per task.

    Scores are matched to items by (task, id); a score file without a task column
    matches by id alone (ids must then be unique across tasks).
    """
    by_key = {(t, i): s for t, i, s in zip(scores.tasks, scores.items, scores.scores.tolist(),
                                             strict=True)}
    by_id_only = all(t == "-" for t in scores.tasks)
    if by_id_only:
        ids = [item.id for item in items]
        if len(set(ids)) < len(ids):
            raise LabcoatError(f"{scores.path}: has no task column, but item ids repeat across "
                               "tasks; add a task column to the scores")
    rows: list[tuple[str, bool, float, str | None]] = []
    for item, result in zip(items, results, strict=True):
        score = by_key.get(("-", item.id) if by_id_only else (item.task, item.id))
        if score is not None:
            rows.append((item.task, result.contaminated, score, item.cluster))
    if not rows:
        raise LabcoatError(f"{scores.path}: no score matches an eval item (by task and id); "
                           "check that the ids (and task names) agree with the suite")
    out = [_compare(rows, "all", ci)]
    tasks = list(dict.fromkeys(task for task, *_ in rows))
    if len(tasks) > 1:
        out += [_compare([r for r in rows if r[0] == task], task, ci) for task in tasks]
    return out


def _compare(rows: list[tuple[str, bool, float, str | None]], task: str,
             ci: float) -> ScoreComparison:
    clean = [(s, c) for _, dirty, s, c in rows if not dirty]
    dirty = [(s, c) for _, flag, s, c in rows if flag]
    from labcoat import stats  # scipy: only when scores are compared

    difference = None
    if len(clean) >= 2 and len(dirty) >= 2:
        clustered = all(c is not None for _, c in clean + dirty)
        difference = stats.unpaired_difference(
            [s for s, _ in clean], [s for s, _ in dirty], ci,
            clusters_a=[c for _, c in clean] if clustered else None,
            clusters_b=[c for _, c in dirty] if clustered else None)
    return ScoreComparison(task, len(clean), len(dirty), _mean(clean), _mean(dirty), difference)


def _mean(pairs: list[tuple[float, str | None]]) -> float:
    return sum(s for s, _ in pairs) / len(pairs) if pairs else math.nan
