"""The eval engine: a suite scored by a PyTorch causal LM, batched and length-bucketed.

The model is any callable ``tokens (B, T) int64 -> logits (B, T, V)``; the
tokenizer is `Tokenizer`-shaped. Work is split so that no per-item Python
runs in the hot path:

- once per engine (the tokenization cache): every item is tokenized into one
  padded (rows, T) matrix with its lengths and the first judged position;
  multiple choice makes one row per (item, choice);
- once per subset (cached too): rows are sorted by length and cut into
  batches of at most `batch_tokens` tokens (length bucketing: little padding);
- per evaluation: one forward per batch and torch ops only.

Exact match uses teacher forcing: greedy decoding yields ``target + EOS``
exactly when, at every target position, the argmax of the logits given the
true prefix is the next target token (induction on the position). One
forward pass per batch therefore gives the same 0/1 scores as token-by-token
greedy generation (checked against `naive_scores` in tests and the
benchmark). Multiple choice sums the log-probabilities of each choice's
tokens and picks the largest (lm-eval-harness's ``acc``). Numeric and user
scorers need text: the engine generates greedily in length-bucketed batches,
and only the final text comparison runs per item.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from labcoat.errors import LabcoatError
from labcoat.evals._scorers import gold_index
from labcoat.evals._suite import EvalSuite
from labcoat.evals._tokenizer import Tokenizer, as_tokenizer

if TYPE_CHECKING:
    from labcoat.sdk import Run

Model = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class EvalResult:
    """Scores of one evaluation, one per item, in the order the items were asked for.

    tasks, items: (n,) task and item ids; scores: (n,) float; indices: (n,)
    positions in the suite; seconds: wall time of the evaluation.
    """

    suite: str
    metric: str
    tasks: list[str]
    items: list[str]
    scores: np.ndarray
    indices: np.ndarray
    seconds: float

    def per_task(self) -> dict[str, np.ndarray]:
        """task -> (items,) scores, tasks in first-seen order."""
        tasks = np.asarray(self.tasks)
        return {task: self.scores[tasks == task] for task in dict.fromkeys(self.tasks)}

    @property
    def macro(self) -> float:
        """Unweighted mean over tasks of each task's mean score."""
        return float(np.mean([s.mean() for s in self.per_task().values()]))

    def log(self, run: Run | None, step: int, **extra: float) -> None:
        """Every item's score (run.log_items, per task) and the macro and per-task means."""
        if run is None:
            return
        tasks = np.asarray(self.tasks)
        items = np.asarray(self.items)
        means = {}
        for task in dict.fromkeys(self.tasks):
            mask = tasks == task
            run.log_items(step, task, items[mask].tolist(), self.scores[mask].tolist())
            means[f"{self.metric}/{task}"] = float(self.scores[mask].mean())
        run.log(step, **{self.metric: self.macro}, **means, **extra)


@dataclass
class _Batch:
    rows: torch.Tensor  # (B,) positions in the selection
    tokens: torch.Tensor  # (B, T)
    starts: torch.Tensor  # (B,) first judged token position
    lengths: torch.Tensor  # (B,)


class EvalEngine:
    """Scores `suite` with `model` and `tokenizer`; reuse one engine for every evaluation.

    batch_tokens: at most this many tokens (rows x padded length) per forward;
        bounds memory, since logits are (B, T, vocab).
    max_len: longest sequence the model takes (None: ``model.max_len`` if set).
    max_new_tokens: generation length for numeric/function scorers (None: the
        longest target in tokens plus 8).
    device: where the inputs go (None: the model's first parameter's device).
    """

    def __init__(self, model: Model, tokenizer: Any, suite: EvalSuite, *,
                 batch_tokens: int = 8192, max_len: int | None = None,
                 max_new_tokens: int | None = None, device: str | torch.device | None = None
                 ) -> None:
        if batch_tokens < 1:
            raise LabcoatError(f"batch_tokens={batch_tokens} must be >= 1")
        self.model = model
        self.tokenizer: Tokenizer = as_tokenizer(tokenizer)
        self.suite = suite
        self.batch_tokens = batch_tokens
        self.max_len = max_len if max_len is not None else getattr(model, "max_len", None)
        self.max_new_tokens = max_new_tokens
        self.device = torch.device(device) if device is not None else _model_device(model)
        self._rows: dict[str, torch.Tensor] | None = None
        self._plans: dict[bytes, list[_Batch]] = {}
        self._text_rule: Callable[..., float] | None = None
        self._new_tokens = 0

    # --- preparation: once per engine ---------------------------------------------------

    def prepare(self) -> None:
        """Tokenize every item once (the cache every later evaluation reuses)."""
        if self._rows is not None:
            return
        suite, tok = self.suite, self.tokenizer
        rows = _tokenize(suite, tok)
        if suite.scorer.generates:
            self._text_rule = suite.scorer.resolve()
            longest_target = 1 + max(len(tok.encode(suite.delimiter + item.target))
                                     for item in suite.items)  # + EOS
            room = (self.max_len or 10**9) - max(map(len, rows.seqs))
            self._new_tokens = self.max_new_tokens or max(longest_target,
                                                          min(longest_target + 8, room))
        self._check_lengths(rows.seqs, rows.starts)
        self._rows = rows.pack(tok.pad_id, len(suite.items))
        self._task_names = np.array([item.task for item in suite.items], dtype=object)
        self._item_ids = np.array([item.id for item in suite.items], dtype=object)

    def _check_lengths(self, seqs: list[list[int]], starts: list[int]) -> None:
        for seq, start in zip(seqs, starts, strict=True):
            if start == 0:
                raise LabcoatError("an eval item's input tokenizes to nothing; the model needs "
                                   "at least one context token to predict from")
            if len(seq) == start and not self.suite.scorer.generates:
                raise LabcoatError("an eval item's target tokenizes to nothing; give every "
                                   "item a target")
        longest = max(map(len, seqs))
        extra = self._new_tokens if self.suite.scorer.generates else 0
        if self.max_len is not None and longest + extra > self.max_len:
            raise LabcoatError(f"eval suite {self.suite.name!r}: the longest item needs "
                               f"{longest + extra} tokens but the model takes {self.max_len}; "
                               "shorten the items or raise the model's max_len")

    # --- evaluation ---------------------------------------------------------------------

    def score(self, indices: Sequence[int] | np.ndarray | None = None, *,
              eval_mode: bool = True) -> EvalResult:
        """Score the items at `indices` (None: the whole suite), in that order.

        eval_mode: switch an nn.Module to eval mode for the evaluation and back
        after (False: leave the mode alone, e.g. to reproduce a bug).
        """
        started = time.perf_counter()
        self.prepare()
        assert self._rows is not None
        chosen = (np.arange(len(self.suite)) if indices is None
                  else np.asarray(indices, dtype=np.int64))
        if chosen.size == 0:
            raise ValueError("score() needs at least one item index")
        with torch.no_grad(), _mode(self.model, eval_mode):
            if self.suite.scorer.kind == "multiple_choice":
                scores = self._multiple_choice(chosen)
            elif self.suite.scorer.generates:
                scores = self._generated(chosen)
            else:
                scores = self._exact_match(chosen)
        return EvalResult(self.suite.name, self.suite.scorer.metric,
                          self._task_names[chosen].tolist(), self._item_ids[chosen].tolist(),
                          scores, chosen, time.perf_counter() - started)

    def _row_selection(self, chosen: np.ndarray) -> torch.Tensor:
        """Row ids of the chosen items (all choices of each, item by item)."""
        assert self._rows is not None
        counts = self._rows["n_choices"][chosen] if self.suite.scorer.kind == \
            "multiple_choice" else torch.ones(len(chosen), dtype=torch.int64)
        first = self._rows["first_row"][chosen]
        offsets = torch.arange(int(counts.sum())) - torch.repeat_interleave(
            torch.cumsum(counts, 0) - counts, counts)
        return torch.repeat_interleave(first, counts) + offsets

    def _plan(self, chosen: np.ndarray, rows: torch.Tensor, lengths: torch.Tensor
              ) -> list[_Batch]:
        """Length-bucketed batches of `rows` (cached per selection)."""
        key = chosen.tobytes() + bytes(self.suite.scorer.kind, "ascii")
        if key in self._plans:
            return self._plans[key]
        assert self._rows is not None
        order = torch.argsort(lengths, descending=True, stable=True)
        batches, i = [], 0
        sorted_lengths = lengths[order].tolist()
        while i < len(order):  # once per batch: the longest row sets the width
            width = sorted_lengths[i]
            size = max(1, min(len(order) - i, self.batch_tokens // max(width, 1)))
            picked = order[i: i + size]
            source = rows[picked]
            batches.append(_Batch(picked, self._rows["tokens"][source, :width].to(self.device),
                                  self._rows["starts"][source].to(self.device),
                                  self._rows["lengths"][source].to(self.device)))
            i += size
        if len(self._plans) >= 8:  # a few subsets are reused; don't grow without bound
            self._plans.pop(next(iter(self._plans)))
        self._plans[key] = batches
        return batches

    def _exact_match(self, chosen: np.ndarray) -> np.ndarray:
        assert self._rows is not None
        rows = self._row_selection(chosen)
        out = torch.zeros(len(rows))
        for batch in self._plan(chosen, rows, self._rows["lengths"][rows]):
            logits = self.model(batch.tokens)
            predicted = logits[:, :-1].argmax(-1)
            position = torch.arange(batch.tokens.shape[1] - 1, device=self.device)
            judged = ((position >= batch.starts[:, None] - 1)
                      & (position < batch.lengths[:, None] - 1))
            correct = ((predicted == batch.tokens[:, 1:]) | ~judged).all(dim=1)
            out[batch.rows] = correct.float().cpu()
        return out.numpy().astype(float)

    def _multiple_choice(self, chosen: np.ndarray) -> np.ndarray:
        """Sum of each choice's token log-probabilities. The model runs only the rows that
        are their own representative (`_Tokenized.rep`): an item's one-token choices share
        one forward pass, read at the context's last position (lm-eval-harness does the
        same), so A/B/C/D answers cost one row per item, not four."""
        assert self._rows is not None
        rows = self._row_selection(chosen)
        rep = self._rows["rep"][rows]
        own = rep == rows
        forward, own_at = rows[own], own.nonzero().squeeze(1)
        shared = (~own).nonzero().squeeze(1)  # positions in `rows` read from their rep
        slot = torch.full((len(self._rows["rep"]),), -1, dtype=torch.int64)
        slot[forward] = torch.arange(len(forward))
        shared_rep = slot[rep[shared]]  # each shared row's rep, as a position in `forward`
        shared_token = self._rows["tokens"][rows[shared], self._rows["starts"][rows[shared]]]
        loglik = torch.empty(len(rows), dtype=torch.float64)
        for batch in self._plan(chosen, forward, self._rows["lengths"][forward]):
            logits = self.model(batch.tokens)
            logp = F.log_softmax(logits[:, :-1].double(), dim=-1)
            token_logp = logp.gather(-1, batch.tokens[:, 1:, None]).squeeze(-1)
            position = torch.arange(batch.tokens.shape[1] - 1, device=self.device)
            judged = ((position >= batch.starts[:, None] - 1)
                      & (position < batch.lengths[:, None] - 1))
            loglik[own_at[batch.rows]] = (token_logp * judged).sum(dim=1).cpu()
            if shared.numel():
                in_batch = torch.full((len(forward),), -1, dtype=torch.int64)
                in_batch[batch.rows] = torch.arange(len(batch.rows))
                k = in_batch[shared_rep]
                take = k >= 0
                k = k[take].to(self.device)
                last = logp[k, batch.starts[k] - 1]
                loglik[shared[take]] = last.gather(
                    -1, shared_token[take].to(self.device)[:, None]).squeeze(-1).cpu()
        n = len(chosen)
        counts = self._rows["n_choices"][chosen]
        owner = torch.repeat_interleave(torch.arange(n), counts)
        table = torch.full((n, int(counts.max())), -torch.inf, dtype=torch.float64)
        table[owner, self._rows["choice"][rows]] = loglik
        return (table.argmax(dim=1) == self._rows["gold"][chosen]).double().numpy()

    def _generated(self, chosen: np.ndarray) -> np.ndarray:
        """Greedy generations (length-bucketed batches), then the text rule per item."""
        assert self._rows is not None and self._text_rule is not None
        rows = self._row_selection(chosen)
        new = self._new_tokens
        eos = self.tokenizer.eos_id
        texts: list[str] = [""] * len(rows)
        for batch in self._plan(chosen, rows, self._rows["lengths"][rows]):
            generated = _greedy(self.model, batch.tokens, batch.lengths, new, eos,
                                self.tokenizer.pad_id)
            for j, ids in zip(batch.rows.tolist(), generated.tolist(), strict=True):
                if eos is not None and eos in ids:
                    ids = ids[: ids.index(eos)]
                texts[j] = self.tokenizer.decode(ids)
        items = self.suite.items
        return np.asarray([self._text_rule(items[i], text)
                           for i, text in zip(chosen.tolist(), texts, strict=True)], dtype=float)


@dataclass
class _Tokenized:
    """Rows as Python lists: one per item (one per choice for multiple choice)."""

    seqs: list[list[int]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # first judged position (context length)
    owner: list[int] = field(default_factory=list)  # the row's item
    choice: list[int] = field(default_factory=list)  # the row's choice (0 without choices)
    gold: list[int] = field(default_factory=list)  # per item: the answer's choice index
    n_choices: list[int] = field(default_factory=list)  # per item
    # per row: the row whose forward pass scores it (itself, or for a one-token choice the
    # item's first one-token choice: same context, so the same logits at its last token)
    rep: list[int] = field(default_factory=list)

    def add(self, seq: list[int], start: int, item: int, option: int = 0,
            rep: int | None = None) -> None:
        self.rep.append(len(self.seqs) if rep is None else rep)
        self.seqs.append(seq)
        self.starts.append(start)
        self.owner.append(item)
        self.choice.append(option)

    def pack(self, pad_id: int, n_items: int) -> dict[str, torch.Tensor]:
        """One padded (rows, T) token matrix and per-row/per-item index tensors."""
        matrix = torch.full((len(self.seqs), max(map(len, self.seqs))), pad_id,
                            dtype=torch.int64)
        for r, seq in enumerate(self.seqs):  # once per suite, not per evaluation
            matrix[r, : len(seq)] = torch.as_tensor(seq, dtype=torch.int64)
        owner = torch.as_tensor(self.owner, dtype=torch.int64)

        def ints(values: list[int]) -> torch.Tensor:
            return torch.as_tensor(values, dtype=torch.int64)

        return {"tokens": matrix, "lengths": ints([len(s) for s in self.seqs]),
                "starts": ints(self.starts), "owner": owner, "choice": ints(self.choice),
                "first_row": torch.searchsorted(owner, torch.arange(n_items)),
                "gold": ints(self.gold), "n_choices": ints(self.n_choices or [1] * n_items),
                "rep": ints(self.rep)}


def _tokenize(suite: EvalSuite, tok: Tokenizer) -> _Tokenized:
    """Every item's rows: context + choice (multiple choice), context (generation), or
    context + target + EOS (exact match judges the EOS that ends the answer too)."""
    rows = _Tokenized()
    end = [] if tok.eos_id is None else [tok.eos_id]
    for i, item in enumerate(suite.items):
        context = list(tok.encode(item.input))
        if suite.scorer.kind == "multiple_choice":
            rows.gold.append(gold_index(item))
            rows.n_choices.append(len(item.choices or ()))
            one_token = None  # the item's first row whose choice is a single token
            for c, option in enumerate(item.choices or ()):
                continuation = list(tok.encode(suite.delimiter + option))
                if len(continuation) == 1 and one_token is None:
                    one_token = len(rows.seqs)
                rows.add(context + continuation, len(context), i, c,
                         rep=one_token if len(continuation) == 1 else None)
        elif suite.scorer.generates:
            rows.add(context, len(context), i)
        else:
            rows.add(context + list(tok.encode(suite.delimiter + item.target)) + end,
                     len(context), i)
    return rows


def _greedy(model: Model, prompts: torch.Tensor, lengths: torch.Tensor, new_tokens: int,
            eos: int | None, pad: int) -> torch.Tensor:
    """Continue each right-padded prompt greedily by up to `new_tokens`: (B, new_tokens).

    Each row writes its next token at its own length, so padding never
    precedes a real token; stops early once every row has produced EOS.
    """
    b, width = prompts.shape
    buf = torch.full((b, width + new_tokens), pad, dtype=prompts.dtype, device=prompts.device)
    buf[:, :width] = prompts
    rows = torch.arange(b, device=prompts.device)
    done = torch.zeros(b, dtype=torch.bool, device=prompts.device)
    for step in range(new_tokens):
        logits = model(buf[:, : width + step])
        nxt = logits[rows, lengths + step - 1].argmax(-1)
        buf[rows, lengths + step] = nxt
        if eos is not None:
            done |= nxt == eos
            if bool(done.all()):
                break
    return buf.gather(1, lengths[:, None] + torch.arange(new_tokens, device=prompts.device))


def _model_device(model: Any) -> torch.device:
    parameters = getattr(model, "parameters", None)
    if callable(parameters):
        for p in parameters():
            return p.device
    return torch.device("cpu")


@contextlib.contextmanager
def _mode(model: Any, eval_mode: bool) -> Iterator[None]:
    """model.eval() for the evaluation, then its previous mode back."""
    if not eval_mode or not hasattr(model, "train") or not hasattr(model, "training"):
        yield
        return
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
