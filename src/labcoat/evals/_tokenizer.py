"""What the eval engine needs from a tokenizer, and an adapter for common shapes.

A tokenizer has ``encode(text) -> list[int]``, ``decode(ids) -> str``, a
padding id and optionally an end-of-sequence id. Hugging Face tokenizers fit
through their ``eos_token_id``/``pad_token_id`` (`as_tokenizer`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from labcoat.errors import LabcoatError


@dataclass(frozen=True)
class Tokenizer:
    """encode: text -> ids; decode: ids -> text; pad_id: filler id (never judged);
    eos_id: the end-of-sequence id a finished answer ends with (None: answers
    are judged without it and generation stops after the target's length)."""

    encode: Callable[[str], Sequence[int]]
    decode: Callable[[Sequence[int]], str]
    pad_id: int
    eos_id: int | None = None


def as_tokenizer(obj: Any) -> Tokenizer:
    """A Tokenizer, or anything with encode/decode and pad/eos ids (``pad_id``/``eos_id``
    or Hugging Face's ``pad_token_id``/``eos_token_id``)."""
    if isinstance(obj, Tokenizer):
        return obj
    encode, decode = getattr(obj, "encode", None), getattr(obj, "decode", None)
    if not callable(encode) or not callable(decode):
        raise LabcoatError(f"{type(obj).__name__} is not a tokenizer: it needs encode(text) "
                           "and decode(ids); or build evals.Tokenizer(encode, decode, pad_id, "
                           "eos_id)")
    eos = _first(obj, "eos_id", "eos_token_id")
    pad = _first(obj, "pad_id", "pad_token_id")
    if pad is None:
        pad = eos if eos is not None else 0  # padding is never judged; any id works
    return Tokenizer(encode=encode, decode=decode, pad_id=int(pad),
                     eos_id=None if eos is None else int(eos))


def _first(obj: Any, *names: str) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None
