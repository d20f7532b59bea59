"""The reference evaluation: one item at a time, the obvious way.

Each item is tokenized on the spot; free-form answers are generated token by
token (one forward per token, batch of one) and judged as text
(`score_text`); multiple choice runs one forward per choice and sums the
choice's log-probabilities in Python. Slow on purpose: it is what the engine
must agree with (tests, `benchmarks/eval_engine.py`) and a self-check users
can run on their own model and tokenizer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from labcoat.evals._engine import Model
from labcoat.evals._scorers import gold_index, score_text
from labcoat.evals._suite import EvalSuite
from labcoat.evals._tokenizer import as_tokenizer


@torch.no_grad()
def naive_scores(model: Model, tokenizer: Any, suite: EvalSuite,
                 max_new_tokens: int | None = None) -> np.ndarray:
    """(n_items,) scores of every item of `suite`, computed item by item (eval mode)."""
    tok = as_tokenizer(tokenizer)
    was_training = getattr(model, "training", None)
    if was_training is not None:
        model.eval()  # type: ignore[attr-defined]
    try:
        out = []
        for item in suite.items:
            context = list(tok.encode(item.input))
            if suite.scorer.kind == "multiple_choice":
                logliks = []
                for choice in item.choices or ():
                    continuation = list(tok.encode(suite.delimiter + choice))
                    ids = torch.tensor([context + continuation])
                    logp = torch.log_softmax(model(ids)[0].double(), dim=-1)
                    logliks.append(sum(float(logp[len(context) - 1 + k, t])
                                       for k, t in enumerate(continuation)))
                out.append(float(int(np.argmax(logliks)) == gold_index(item)))
                continue
            target_len = len(tok.encode(suite.delimiter + item.target))
            with_eos = target_len + (tok.eos_id is not None)  # exact match judges the EOS too
            limit = max_new_tokens or (with_eos if not suite.scorer.generates
                                       else target_len + 9)
            room = getattr(model, "max_len", None)
            if room is not None:
                limit = min(limit, room - len(context))
            ids = list(context)
            generated: list[int] = []
            for _ in range(limit):
                nxt = int(model(torch.tensor([ids]))[0, -1].argmax())
                if tok.eos_id is not None and nxt == tok.eos_id:
                    break
                generated.append(nxt)
                ids.append(nxt)
            out.append(score_text(suite.scorer, item, tok.decode(generated)))
        return np.asarray(out, dtype=float)
    finally:
        if was_training is not None:
            model.train(was_training)  # type: ignore[attr-defined]
