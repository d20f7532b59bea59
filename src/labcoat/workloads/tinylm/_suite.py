"""tinylm's eval set as a labcoat eval suite, and its tokenizer, for `labcoat.evals`.

An item's input is its prompt tokens ``<task> input... <sep>`` joined by
spaces and its target the answer tokens; the tokenizer splits on whitespace
and appends nothing, so a target followed by EOS is exactly what tinylm was
trained to produce. Item ids are tinylm's (``copy/0017``).
"""

from __future__ import annotations

from collections.abc import Sequence

from labcoat.evals import EvalItem, EvalSuite, Scorer, Tokenizer
from labcoat.workloads.tinylm._tasks import EOS_ID, PAD_ID, EvalSet, decode, encode


def _encode(text: str) -> list[int]:
    return encode(text.split())


def _decode(ids: Sequence[int]) -> str:
    return " ".join(decode(ids))


TOKENIZER = Tokenizer(encode=_encode, decode=_decode, pad_id=PAD_ID, eos_id=EOS_ID)


def eval_suite(eval_set: EvalSet) -> EvalSuite:
    """Every item of `eval_set`, scored by exact match (greedy answer, then EOS)."""
    items = [EvalItem(task=task, id=item_id, input=" ".join(ex.prompt), target=" ".join(ex.target))
             for task, examples in eval_set.items.items()
             for item_id, ex in zip(eval_set.ids[task], examples, strict=True)]
    return EvalSuite("tinylm", tuple(items), Scorer(kind="exact_match"))
