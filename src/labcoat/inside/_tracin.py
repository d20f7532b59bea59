"""TracIn over a trial's checkpoints, and self-influence, by per-example gradients.

TracInCP (Pruthi et al. 2020, eq. 3) scores how much training example z moved
the loss on a test example z' along training, from checkpoints alone:

    TracInCP(z, z') = sum over checkpoints c of  lr_c * grad L(z; w_c) . grad L(z'; w_c)

Positive: z pushed the test loss down (a proponent); negative: up (an
opponent). Self-influence TracInCP(z, z) is large for examples the model keeps
failing to fit: mislabeled, ambiguous or rare ones (Pruthi et al. section 4.1).
The same definition as Captum's ``TracInCP`` with its ``checkpoints_load_func``
returning the learning rate (tests/inside check one against the other); it is
computed here with ``torch.func`` (``vmap`` of ``grad``) in chunks, so memory
is (chunk x parameters), not (training examples x parameters), and Captum is
not needed to run it. With Adam the dot products are TracIn's first-order
heuristic, not the optimizer's exact step (Pruthi et al. use SGD).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from labcoat.errors import LabcoatError

#: loss_fn(model, batch) -> (n,) per-example losses, where batch is a tuple of tensors whose
#: first dimension is the n examples. The per-example gradient is that of the example's own
#: loss, so a mean inside one example (over its tokens) is fine, a mean over examples is not.
LossFn = Callable[[nn.Module, tuple[torch.Tensor, ...]], torch.Tensor]


class InfluenceError(LabcoatError):
    """Influence cannot be computed as asked (no checkpoints, mismatched examples...)."""


@dataclass(frozen=True, kw_only=True)
class CheckpointWeights:
    """One checkpoint TracIn sums over.

    step: the optimizer step it was saved at.
    state: the model's state_dict at that step.
    lr: the learning rate TracIn weighs it by (the schedule's value at `step`).
    """

    step: int
    state: Mapping[str, torch.Tensor]
    lr: float

    def __post_init__(self) -> None:
        if not (self.lr > 0 and np.isfinite(self.lr)):
            raise InfluenceError(f"checkpoint at step {self.step}: learning rate {self.lr!r} "
                                 "must be a positive number (TracIn weighs each checkpoint by it)")


def tracin(model: nn.Module, checkpoints: Sequence[CheckpointWeights], loss_fn: LossFn,
           train: Iterable[tuple[torch.Tensor, ...]], test: tuple[torch.Tensor, ...], *,
           params: Sequence[str] | None = None) -> np.ndarray:
    """TracInCP scores of every training example on every test example.

    model: the architecture; its weights are replaced by each checkpoint's in turn
        (a copy is used, the caller's model is left as it was).
    train: batches (chunks) of training examples in index order; a chunk's size bounds
        memory (chunk x parameters floats).
    test: one batch of test examples (m of them).
    params: names of the parameters whose gradients count (None: every trainable one);
        the last layers alone are a common, cheaper choice (Pruthi et al. section 3.2).
    Returns (m, n) float64: row i, column j is TracInCP(train j, test i).
    """
    return tracin_and_self_influence(model, checkpoints, loss_fn, train, test,
                                     params=params)[0]


def self_influence(model: nn.Module, checkpoints: Sequence[CheckpointWeights], loss_fn: LossFn,
                   train: Iterable[tuple[torch.Tensor, ...]], *,
                   params: Sequence[str] | None = None) -> np.ndarray:
    """TracInCP(z, z) of every training example: (n,) float64, >= 0.

    Rank training examples by it to review the likeliest mislabeled or duplicated ones
    first (Pruthi et al. 2020, section 4.1); arguments as in `tracin`.
    """
    return tracin_and_self_influence(model, checkpoints, loss_fn, train, None,
                                     params=params)[1]


def tracin_and_self_influence(
        model: nn.Module, checkpoints: Sequence[CheckpointWeights], loss_fn: LossFn,
        train: Iterable[tuple[torch.Tensor, ...]], test: tuple[torch.Tensor, ...] | None, *,
        params: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`tracin` (None without `test`) and `self_influence` from one pass of per-example
    gradients over the training examples, the bulk of the cost of either."""
    checkpoints = _checked(checkpoints)
    train = list(train)
    scores: torch.Tensor | None = None
    selfs: torch.Tensor | None = None
    for ck in checkpoints:
        net, weights = _at(model, ck, params)
        g_test = None if test is None else _per_example_grads(net, weights, loss_fn, test)
        rows, norms = [], []
        for chunk in train:
            g = _per_example_grads(net, weights, loss_fn, chunk)  # (chunk, P)
            norms.append(g.pow(2).sum(1))
            if g_test is not None:
                rows.append(g_test @ g.T)  # (m, chunk)
        s = ck.lr * torch.cat(norms)
        selfs = s if selfs is None else selfs + s
        if g_test is not None:
            t = ck.lr * torch.cat(rows, dim=1)
            scores = t if scores is None else scores + t
    assert selfs is not None
    return (None if scores is None else scores.double().numpy()), selfs.double().numpy()


def chunks(batch: tuple[torch.Tensor, ...], size: int) -> Iterator[tuple[torch.Tensor, ...]]:
    """`batch` (a tuple of tensors, first dimension the examples) in pieces of `size`."""
    if size < 1:
        raise InfluenceError(f"chunk size {size} must be >= 1")
    n = len(batch[0])
    for start in range(0, n, size):
        yield tuple(t[start:start + size] for t in batch)


def _checked(checkpoints: Sequence[CheckpointWeights]) -> list[CheckpointWeights]:
    checkpoints = list(checkpoints)
    if not checkpoints:
        raise InfluenceError("TracIn needs at least one checkpoint; keep several along "
                             "training (Checkpointer(keep_every=N) or --replay-budget)")
    return checkpoints


def _at(model: nn.Module, ck: CheckpointWeights, params: Sequence[str] | None
        ) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """A copy of `model` in eval mode holding `ck`'s weights, and the weights to differentiate
    (tied parameters appear once, under their first name, as `named_parameters` gives them)."""
    import copy

    net = copy.deepcopy(model)
    try:
        net.load_state_dict(dict(ck.state))
    except RuntimeError as err:
        raise InfluenceError(f"checkpoint at step {ck.step} does not fit the model: "
                             f"{str(err).splitlines()[0]}") from None
    net.eval()  # no dropout: the gradient of the example as the checkpoint scores it
    named = {n: p.detach() for n, p in net.named_parameters() if p.requires_grad}
    if params is not None:
        unknown = sorted(set(params) - set(named))
        if unknown:
            raise InfluenceError(f"no trainable parameter(s) {unknown} in the model; choose "
                                 f"from {', '.join(named)}")
        named = {n: named[n] for n in params}
    return net, named


def _per_example_grads(net: nn.Module, weights: dict[str, torch.Tensor], loss_fn: LossFn,
                       batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """(n, P) float32: each example's loss gradient over `weights`, flattened in order."""
    frozen = {n: p.detach() for n, p in net.named_parameters() if n not in weights}
    frozen |= dict(net.named_buffers())

    def one(w: dict[str, torch.Tensor], *example: torch.Tensor) -> torch.Tensor:
        single = tuple(t.unsqueeze(0) for t in example)
        losses = loss_fn(_Bound(net, w | frozen), single)
        return losses.reshape(()) if losses.numel() == 1 else losses.sum()

    with warnings.catch_warnings():  # e.g. CPU attention kernels have no batching rule yet:
        # vmap falls back to a loop over examples, slower but exact
        warnings.filterwarnings("ignore", message="There is a performance drop")
        grads = vmap(grad(one), in_dims=(None, *([0] * len(batch))))(weights, *batch)
    return torch.cat([grads[n].reshape(len(batch[0]), -1) for n in weights], dim=1)


class _Bound(nn.Module):
    """`net` called with the given parameter tensors (``torch.func.functional_call``), so a
    loss_fn written for a plain module works unchanged."""

    def __init__(self, net: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        object.__setattr__(self, "_net", net)
        object.__setattr__(self, "_tensors", tensors)

    def forward(self, *args: object, **kwargs: object) -> torch.Tensor:
        return functional_call(self._net, self._tensors, args, kwargs)
