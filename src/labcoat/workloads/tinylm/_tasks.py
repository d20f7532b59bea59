"""In-process data: ten small sequence tasks, a fixed eval set and a seeded training stream.

Every example is the token sequence ``<task> input... <sep> target... <eos>``
(at most ``MAX_LEN`` tokens). Tasks mix algorithmic skills (copy, reverse,
sort, add, parity, count, majority, key-value recall, bracket matching) with a
language-like one (subject-verb agreement under a small probabilistic grammar)
so that a macro average over tasks means something.

Generation uses ``random.Random`` streams only, never global state:
- the eval set comes from per-task streams seeded by ``EVAL_SEED``, so it is
  identical for every training seed, and a larger eval set extends a smaller
  one (item ``copy/0017`` is the same whatever ``items_per_task`` is);
- the training stream is seeded by the data seed and skips any example whose
  input is in the eval set, so eval items are held out.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

# Fixed seed of the evaluation set: independent of every training seed.
EVAL_SEED = 20_240_917
MAX_LEN = 32
IGNORE = -100  # label value ignored by F.cross_entropy (its default ignore_index)

PAD, SEP, EOS = "<pad>", "<sep>", "<eos>"
DIGITS = tuple("0123456789")
LETTERS = tuple("abcdefgh")
BRACKETS = ("(", ")", "[", "]")
SINGULAR = ("cat", "dog", "bird", "fox")
PLURAL = ("cats", "dogs", "birds", "foxes")
PREPOSITIONS = ("near", "behind", "with")
VERBS = {"sg": ("sees", "likes", "chases"), "pl": ("see", "like", "chase")}
COPULA = {"sg": "is", "pl": "are"}

Tokens = tuple[str, ...]


@dataclass(frozen=True)
class Example:
    """One task instance: ``tokens`` is ``<task> input <sep> target <eos>``."""

    task: str
    input: Tokens
    target: Tokens

    @property
    def tokens(self) -> Tokens:
        return (task_token(self.task), *self.input, SEP, *self.target, EOS)

    @property
    def prompt(self) -> Tokens:
        """What the model sees before it decodes: ``<task> input <sep>``."""
        return (task_token(self.task), *self.input, SEP)


# --- the tasks --------------------------------------------------------------------------------
# Each generator draws one (input, target) pair from `rng`; nothing else is random.


def gen_copy(rng: random.Random) -> tuple[Tokens, Tokens]:
    """Copy 3-8 letters."""
    xs = tuple(rng.choices(LETTERS, k=rng.randint(3, 8)))
    return xs, xs


def gen_reverse(rng: random.Random) -> tuple[Tokens, Tokens]:
    """Reverse 3-8 letters."""
    xs = tuple(rng.choices(LETTERS, k=rng.randint(3, 8)))
    return xs, xs[::-1]


def gen_sort(rng: random.Random) -> tuple[Tokens, Tokens]:
    """Sort 3-8 digits ascending (repeats allowed)."""
    xs = tuple(rng.choices(DIGITS, k=rng.randint(3, 8)))
    return xs, tuple(sorted(xs))


def gen_add(rng: random.Random) -> tuple[Tokens, Tokens]:
    """Add two numbers in 0-99, most significant digit first: ``4 7 + 8`` -> ``5 5``."""
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    return (*str(a), "+", *str(b)), tuple(str(a + b))


def gen_parity(rng: random.Random) -> tuple[Tokens, Tokens]:
    """Parity of 4-10 bits: ``1`` when the number of ones is odd."""
    bits = tuple(rng.choices(("0", "1"), k=rng.randint(4, 10)))
    return bits, (str(bits.count("1") % 2),)


def gen_count(rng: random.Random) -> tuple[Tokens, Tokens]:
    """How often the queried letter occurs: ``a b a c ? a`` -> ``2``."""
    xs = tuple(rng.choices(LETTERS[:4], k=rng.randint(4, 9)))
    query = rng.choice(LETTERS[:4])
    return (*xs, "?", query), (str(xs.count(query)),)


def gen_majority(rng: random.Random) -> tuple[Tokens, Tokens]:
    """The most frequent of a, b, c in 5-11 letters (drawn until the winner is unique)."""
    while True:
        xs = tuple(rng.choices(LETTERS[:3], k=rng.randrange(5, 12, 2)))
        counts = sorted(((xs.count(c), c) for c in LETTERS[:3]), reverse=True)
        if counts[0][0] > counts[1][0]:
            return xs, (counts[0][1],)


def gen_recall(rng: random.Random) -> tuple[Tokens, Tokens]:
    """Key-value recall: ``a 3 c 5 e 1 ? c`` -> ``5`` (2-5 distinct keys)."""
    keys = rng.sample(LETTERS, rng.randint(2, 5))
    values = rng.choices(DIGITS, k=len(keys))
    query = rng.randrange(len(keys))
    pairs = tuple(tok for kv in zip(keys, values, strict=True) for tok in kv)
    return (*pairs, "?", keys[query]), (values[query],)


def gen_brackets(rng: random.Random) -> tuple[Tokens, Tokens]:
    """Are 4-12 round/square brackets balanced? Half are; the rest are one-token corruptions."""
    xs = list(_balanced_brackets(rng, rng.randrange(4, 13, 2)))
    if rng.random() < 0.5:
        return tuple(xs), ("yes",)
    while is_balanced(xs):  # a near miss: one bracket changed, so counting alone is not enough
        xs[rng.randrange(len(xs))] = rng.choice(BRACKETS)
    return tuple(xs), ("no",)


def gen_agree(rng: random.Random) -> tuple[Tokens, Tokens]:
    """Subject-verb agreement past attractors: ``the dog near the cats`` -> ``is``.

    Sentences come from a small probabilistic grammar: NP -> the N (PP | RC)?,
    PP -> P NP, RC -> that NP V, with verbs inside relative clauses agreeing
    with their own subject, so the last noun is often the wrong cue.
    """
    number, words = _noun_phrase(rng, depth=0)
    return words, (COPULA[number],)


def _noun_phrase(rng: random.Random, depth: int) -> tuple[str, Tokens]:
    """(grammatical number, words) of a random noun phrase; depth caps the recursion at 2."""
    number = rng.choice(("sg", "pl"))
    words: Tokens = ("the", rng.choice(SINGULAR if number == "sg" else PLURAL))
    modifier = rng.random() if depth < 2 else 1.0
    if modifier < 0.4:
        _, inner = _noun_phrase(rng, depth + 1)
        words += (rng.choice(PREPOSITIONS), *inner)
    elif modifier < 0.8:
        inner_number, inner = _noun_phrase(rng, depth + 1)
        words += ("that", *inner, rng.choice(VERBS[inner_number]))
    return number, words


def _balanced_brackets(rng: random.Random, length: int) -> Tokens:
    """A uniformly-stepped random balanced string of `length` (even) brackets."""
    out: list[str] = []
    stack: list[str] = []
    while len(out) < length:
        remaining = length - len(out)
        if stack and (remaining == len(stack) or rng.random() < 0.5):
            out.append(")" if stack.pop() == "(" else "]")
        else:
            stack.append(rng.choice("(["))
            out.append(stack[-1])
    return tuple(out)


def is_balanced(xs: Iterable[str]) -> bool:
    """True when round and square brackets in `xs` are properly nested."""
    stack: list[str] = []
    for x in xs:
        if x in "([":
            stack.append(x)
        elif not stack or stack.pop() != {")": "(", "]": "["}[x]:
            return False
    return not stack


TASKS: dict[str, Callable[[random.Random], tuple[Tokens, Tokens]]] = {
    "copy": gen_copy,
    "reverse": gen_reverse,
    "sort": gen_sort,
    "add": gen_add,
    "parity": gen_parity,
    "count": gen_count,
    "majority": gen_majority,
    "recall": gen_recall,
    "brackets": gen_brackets,
    "agree": gen_agree,
}


def task_token(task: str) -> str:
    return f"<{task}>"


# --- vocabulary ------------------------------------------------------------------------------

VOCAB: Tokens = (
    PAD, SEP, EOS,
    *(task_token(t) for t in TASKS),
    *DIGITS, *LETTERS, *BRACKETS, "+", "?", "yes", "no",
    "the", "that", *PREPOSITIONS, *SINGULAR, *PLURAL, *VERBS["sg"], *VERBS["pl"],
    *COPULA.values(),
)
TOKEN_ID = {tok: i for i, tok in enumerate(VOCAB)}
PAD_ID, SEP_ID, EOS_ID = TOKEN_ID[PAD], TOKEN_ID[SEP], TOKEN_ID[EOS]


def encode(tokens: Sequence[str]) -> list[int]:
    return [TOKEN_ID[t] for t in tokens]


def decode(ids: Iterable[int]) -> Tokens:
    return tuple(VOCAB[i] for i in ids)


# --- seeds, eval set, training stream -------------------------------------------------------


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from `parts` via SHA-256: stable across runs, processes and platforms.

    (Python's ``hash`` is salted per process, so it cannot be used here.)
    """
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def check_tasks(tasks: Sequence[str]) -> None:
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        raise ValueError(f"unknown task(s) {unknown or tasks!r}; choose from {', '.join(TASKS)}")


@dataclass(frozen=True)
class EvalSet:
    """Held-out items: ``items[task]`` are Examples with ids ``ids[task]`` (``copy/0017``)."""

    items: dict[str, list[Example]]

    @property
    def ids(self) -> dict[str, list[str]]:
        return {task: [f"{task}/{i:04d}" for i in range(len(xs))]
                for task, xs in self.items.items()}

    def held_out(self) -> set[tuple[str, Tokens]]:
        """(task, input) keys the training stream must never produce."""
        return {(ex.task, ex.input) for xs in self.items.values() for ex in xs}


def make_eval_set(items_per_task: int, tasks: Sequence[str] = tuple(TASKS)) -> EvalSet:
    """The fixed eval set: `items_per_task` distinct inputs per task, from ``EVAL_SEED`` only."""
    check_tasks(tasks)
    if items_per_task < 1:
        raise ValueError(f"items_per_task must be >= 1, got {items_per_task}")
    items: dict[str, list[Example]] = {}
    for task in tasks:
        rng = random.Random(derive_seed(EVAL_SEED, task))
        seen: set[Tokens] = set()
        xs: list[Example] = []
        for _ in range(100 * items_per_task):  # bounded: every task has thousands of inputs
            x, y = TASKS[task](rng)
            if x not in seen:
                seen.add(x)
                xs.append(Example(task, x, y))
                if len(xs) == items_per_task:
                    break
        else:
            raise ValueError(f"task {task!r} has too few distinct inputs for "
                             f"{items_per_task} items")
        items[task] = xs
    return EvalSet(items)


class TrainStream:
    """Endless training examples from one seeded stream, skipping held-out inputs.

    Tasks are drawn uniformly; the order of examples depends only on `seed`
    (the data seed) and the tasks, never on model or global RNG state.
    """

    def __init__(self, seed: int, held_out: set[tuple[str, Tokens]],
                 tasks: Sequence[str] = tuple(TASKS)) -> None:
        check_tasks(tasks)
        self._rng = random.Random(seed)
        self._held_out = held_out
        self._tasks = tuple(tasks)
        self.skipped = 0  # examples dropped because they are eval items

    def example(self) -> Example:
        while True:
            task = self._rng.choice(self._tasks)
            x, y = TASKS[task](self._rng)
            if (task, x) not in self._held_out:
                return Example(task, x, y)
            self.skipped += 1

    def batch(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Next `size` examples as ``(inputs, labels)``, both (size, T) int64; see `collate`."""
        return collate([self.example() for _ in range(size)])


def collate(examples: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token training pairs with the loss masked to the target.

    inputs: (B, T) token ids ``tokens[:-1]``, right-padded with PAD.
    labels: (B, T) ``tokens[1:]`` where that token is a target token or EOS,
        else IGNORE, so only the answer is learned, never the prompt or padding.
    T is the longest example in the batch minus one.
    """
    seqs = [encode(ex.tokens) for ex in examples]
    width = max(map(len, seqs)) - 1
    inputs, labels = [], []
    for ex, seq in zip(examples, seqs, strict=True):
        if len(seq) > MAX_LEN:
            raise ValueError(f"{ex.task} example has {len(seq)} tokens; the limit is {MAX_LEN}")
        pad = width - (len(seq) - 1)
        first = len(ex.prompt) - 1  # position whose next token is the first target token
        inputs.append(seq[:-1] + [PAD_ID] * pad)
        labels.append([IGNORE] * first + seq[first + 1 :] + [IGNORE] * pad)
    return torch.tensor(inputs), torch.tensor(labels)
