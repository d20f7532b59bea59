"""EK-FAC influence (Grosse et al. 2023) through Kronfluence, on one checkpoint.

Influence functions ask what removing one training example would do to a test
loss: ``grad L(z'; w)^T (G + damping I)^-1 grad L(z; w)``, with the
Gauss-Newton matrix G approximated per layer by eigenvalue-corrected
Kronecker factors (George et al. 2018). Kronfluence computes them only for the
layers it can factor, ``nn.Linear`` and ``nn.Conv2d``; other parameters
(embeddings, LayerNorm) are left out, which `influence_layers` lists so a
caller can say what the scores cover. Kronfluence is an optional dependency
(the ``inside`` extra); TracIn (`_tracin`) needs only torch.

The Fisher is the empirical one (the examples' own labels), so the same
``loss_fn`` as TracIn's serves; Kronfluence's ``sample=True`` true-Fisher mode
would need labels drawn from the model, which a generic loss cannot do.
"""

from __future__ import annotations

import copy
import logging
import tempfile
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from labcoat.inside._tracin import InfluenceError, LossFn

FACTORABLE = (nn.Linear, nn.Conv2d)


def influence_layers(model: nn.Module) -> list[str]:
    """Names of the modules EK-FAC covers (Linear and Conv2d), in model order."""
    return [name for name, m in model.named_modules() if isinstance(m, FACTORABLE)]


def ekfac(model: nn.Module, state: Mapping[str, torch.Tensor] | None, loss_fn: LossFn,
          train: tuple[torch.Tensor, ...], test: tuple[torch.Tensor, ...] | None = None, *,
          damping: float | None = None, batch_size: int = 64) -> np.ndarray:
    """EK-FAC influence of every training example on every test example, or self-influence.

    state: the checkpoint's weights (None: the model's own).
    train: every training example as one tuple of tensors (first dimension n, equal
        shapes, e.g. padded together); the factors are fitted on these examples.
    test: m test examples; None gives self-influence, (n,).
    damping: added to the eigenvalues; None is Kronfluence's heuristic (0.1 x their mean).
    Returns (m, n) float64, Kronfluence's sign: positive where upweighting the training
    example lowers the test loss. Raises `InfluenceError` if kronfluence is missing or
    the model has no Linear or Conv2d layer.
    """
    try:
        from kronfluence.analyzer import Analyzer, prepare_model
        from kronfluence.arguments import FactorArguments, ScoreArguments
        from kronfluence.task import Task
    except ImportError:
        raise InfluenceError("EK-FAC influence needs kronfluence: pip install "
                             "'labcoat[inside]' (or use method='tracin', torch only)") from None
    if not influence_layers(model):
        raise InfluenceError(f"{type(model).__name__} has no Linear or Conv2d layer, the only "
                             "ones EK-FAC can factor; use method='tracin'")

    class _Task(Task):
        def compute_train_loss(self, batch, model, sample=False):  # noqa: ANN001, ARG002
            return loss_fn(model, tuple(batch)).sum()

        def compute_measurement(self, batch, model):  # noqa: ANN001
            return loss_fn(model, tuple(batch)).sum()

    net = copy.deepcopy(model)
    if state is not None:
        net.load_state_dict(dict(state))
    if isinstance(net, FACTORABLE):  # Kronfluence wraps a layer in place, inside its parent
        net = nn.Sequential(net)
    task = _Task()
    net = prepare_model(net, task)
    n_train = len(train[0])
    factor_args = FactorArguments(strategy="ekfac", use_empirical_fisher=True)
    score_args = ScoreArguments(damping_factor=damping)
    import warnings

    quiet = logging.getLogger("kronfluence")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        with (tempfile.TemporaryDirectory(prefix="labcoat-ekfac-") as tmp,
              warnings.catch_warnings()):
            # Kronfluence 1.0.1 builds torch.cuda.amp.GradScaler, deprecated in torch 2.x
            warnings.filterwarnings("ignore", category=FutureWarning, module="kronfluence")
            analyzer = Analyzer("labcoat", net, task, cpu=True, disable_tqdm=True,
                                output_dir=tmp, log_level=logging.WARNING)
            train_set = _Rows(train)
            analyzer.fit_all_factors("factors", train_set, per_device_batch_size=batch_size,
                                     factor_args=factor_args, overwrite_output_dir=True)
            if test is None:
                analyzer.compute_self_scores("self", "factors", train_set,
                                             per_device_train_batch_size=batch_size,
                                             score_args=score_args, overwrite_output_dir=True)
                scores = analyzer.load_self_scores("self")["all_modules"]
                return scores.reshape(n_train).double().numpy()
            analyzer.compute_pairwise_scores(
                "pairwise", "factors", _Rows(test), train_set,
                per_device_query_batch_size=min(batch_size, len(test[0])),
                per_device_train_batch_size=batch_size, score_args=score_args,
                overwrite_output_dir=True)
            return analyzer.load_pairwise_scores("pairwise")["all_modules"].double().numpy()
    finally:
        quiet.setLevel(level)


class _Rows(Dataset):
    """Examples as a map-style dataset: row i of every tensor (the default collate stacks)."""

    def __init__(self, tensors: tuple[torch.Tensor, ...]) -> None:
        self.tensors = tensors

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        return tuple(t[i] for t in self.tensors)
