"""tinylm: a small decoder-only transformer trained on ten in-process tasks.

labcoat's reference workload: real training (CPU, about a minute on one
thread), per-item held-out evaluation by exact match, and separate seeds for
initialization, data order and dropout. Use it from Python::

    from labcoat.workloads.tinylm import Config, train
    result = train(Config(steps=300, warmup=50, seed=1))
    result.exact_match, result.accuracy["sort"]

``INSIDE`` is its side of `labcoat inside` (model from a trial's settings, eval items,
the answer's log probability per item).

or from the shell (reports through the labcoat SDK)::

    python -m labcoat.workloads.tinylm --warmup 100 --seed 1

Its eval set is a `labcoat.evals` suite (``eval_suite(make_eval_set(20))``,
scored with ``TOKENIZER``), so the eval engine and its checks apply to it.

The silent-error guard watches every CLI run (``--no-guard`` to turn it off;
in Python ``train(cfg, guard=True)``), and ``--fault NAME --fault-step K``
(``train(cfg, fault=Fault(NAME, K))``) injects one of the silent bugs in
`FAULTS` to test it.

Runs survive being killed: with a checkpoint directory (``--checkpoint-dir``
or ``$LABCOAT_CHECKPOINT_DIR``; in Python ``train(cfg, checkpointer=...)``)
a restarted run resumes from its newest verified checkpoint and ends
bit-identical to an uninterrupted one, having logged the same values.
"""

from labcoat.workloads.tinylm._faults import FAULTS, HELD_OUT_FAULTS, Fault
from labcoat.workloads.tinylm._fresh import (
    KNOBS,
    FreshExample,
    LeakConfig,
    fresh_examples,
    fresh_suite,
    fresh_twins,
    knobs_of,
    leaked_run,
    regenerate,
)
from labcoat.workloads.tinylm._inside import INSIDE
from labcoat.workloads.tinylm._model import TinyLM
from labcoat.workloads.tinylm._mup import coord_check
from labcoat.workloads.tinylm._suite import TOKENIZER, eval_suite
from labcoat.workloads.tinylm._tasks import (
    EVAL_SEED,
    MAX_LEN,
    TASKS,
    VOCAB,
    EvalSet,
    Example,
    TrainStream,
    collate,
    decode,
    derive_seed,
    encode,
    is_balanced,
    make_eval_set,
)
from labcoat.workloads.tinylm._train import (
    Config,
    TrainResult,
    build_model,
    build_optimizer,
    evaluate,
    exact_match,
    greedy_decode,
    guard_options,
    learning_rate,
    masked_loss,
    train,
)
from labcoat.workloads.tinylm._training_data import TRAINING_DATA

__all__ = [
    "EVAL_SEED",
    "FAULTS",
    "HELD_OUT_FAULTS",
    "KNOBS",
    "INSIDE",
    "MAX_LEN",
    "TASKS",
    "TOKENIZER",
    "TRAINING_DATA",
    "VOCAB",
    "Config",
    "EvalSet",
    "Example",
    "Fault",
    "FreshExample",
    "LeakConfig",
    "TinyLM",
    "TrainResult",
    "TrainStream",
    "build_model",
    "build_optimizer",
    "coord_check",
    "collate",
    "decode",
    "derive_seed",
    "encode",
    "eval_suite",
    "evaluate",
    "exact_match",
    "fresh_examples",
    "fresh_suite",
    "fresh_twins",
    "greedy_decode",
    "guard_options",
    "is_balanced",
    "knobs_of",
    "leaked_run",
    "learning_rate",
    "make_eval_set",
    "masked_loss",
    "regenerate",
    "train",
]
