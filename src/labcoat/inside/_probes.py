"""Linear probes per layer, with selectivity, compared between arms.

A probe is a logistic regression (scikit-learn) from one layer's activation at one
position per item to a label the user gives per eval item. Its accuracy is held out:
k-fold cross-validation predicts every item from a probe that never saw it, so each
item is one 0/1 outcome and the accuracy is a mean over items (and seeds) with a
two-way bootstrap interval (`stats.ratio_of_means`).

High accuracy alone does not show the layer represents the label: a probe with enough
capacity can memorize. Hewitt & Liang (2019, "Designing and Interpreting Probes with
Control Tasks") compare with a control task: each word type gets a random label (drawn
from the task's label frequencies, once per type), so the control is learnable only by
memorizing types. Selectivity = task accuracy - control accuracy; a layer that encodes
the label, not just the type, is selective.

Between arms, the same layers are probed in the control's and the variant's models
(each seed separately) and the paired differences per item are bootstrapped over seeds
and items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from labcoat import stats
from labcoat.errors import LabcoatError
from labcoat.inside._compare import Share
from labcoat.inside._components import Component
from labcoat.inside._hooks import capture
from labcoat.inside._patching import _evaluating

Positions = Callable[[Any], torch.Tensor]


@dataclass(kw_only=True)
class ProbeConfig:
    """folds: cross-validation folds; C, max_iter, tol: the logistic regression's;
    ci, reps, seed: the bootstrap's (the seed also draws the folds and control labels)."""

    folds: int = 5
    C: float = 1.0
    max_iter: int = 2000
    tol: float = 1e-3  # L-BFGS stopping tolerance (scikit-learn's default 1e-4 fits 3x longer)
    ci: float = 0.95
    reps: int = 4000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise LabcoatError(f"folds={self.folds} must be >= 2")
        if not self.C > 0:
            raise LabcoatError(f"C={self.C} must be > 0")


@dataclass(frozen=True)
class ProbeScore:
    """One layer of one model: held-out accuracy on the task and on the control task, and
    selectivity (their difference), each over seeds and items."""

    accuracy: Share
    control_task: Share
    selectivity: Share


@dataclass(frozen=True)
class ProbeLayer:
    """One layer in both arms, and the variant - control differences."""

    layer: str
    control: ProbeScore
    variant: ProbeScore
    accuracy_difference: Share
    selectivity_difference: Share


@dataclass
class ProbeComparison:
    label: str
    classes: int
    items: int
    seeds: int
    chance: float  # accuracy of always answering the most frequent label
    layers: list[ProbeLayer]

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "classes": self.classes, "items": self.items,
                "seeds": self.seeds, "chance": self.chance,
                "layers": [asdict(layer) for layer in self.layers]}


def control_labels(labels: Sequence[Any], types: Sequence[Any], seed: int = 0) -> np.ndarray:
    """Hewitt & Liang's control task: one random label per type, drawn from the labels'
    frequencies; (N,) the control label of every item."""
    labels, types = np.asarray(labels), np.asarray(types)
    if labels.shape != types.shape:
        raise LabcoatError(f"{labels.size} labels but {types.size} types; give one per item")
    rng = np.random.default_rng(seed)
    values, counts = np.unique(labels, return_counts=True)
    kinds = np.unique(types)
    drawn = dict(zip(kinds.tolist(), rng.choice(values, size=kinds.size, p=counts / counts.sum()),
                     strict=True))
    return np.array([drawn[t] for t in types.tolist()])


def held_out_correct(features: np.ndarray, labels: Sequence[Any], config: ProbeConfig
                     ) -> np.ndarray:
    """(N,) 1.0 where the k-fold probe that did not see item i labels it right."""
    from sklearn.model_selection import KFold
    from threadpoolctl import threadpool_limits

    y = np.asarray(labels)
    x = np.asarray(features, dtype=float)
    if x.ndim != 2 or x.shape[0] != y.size:
        raise LabcoatError(f"features must be (items, width) with one row per label; got "
                           f"{x.shape} for {y.size} labels")
    correct = np.zeros(y.size)
    folds = KFold(config.folds, shuffle=True, random_state=config.seed)
    # Small fits: one BLAS thread. OpenBLAS's spinning threads made each L-BFGS step
    # ~4 ms instead of well under 1 ms on a busy two-core machine.
    with threadpool_limits(1):
        _fit_folds(x, y, folds.split(x), config, correct)
    return correct


def _fit_folds(x: np.ndarray, y: np.ndarray, splits: Any, config: ProbeConfig,
               correct: np.ndarray) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    for train, test in splits:
        if np.unique(y[train]).size < 2:
            correct[test] = (y[test] == y[train][0])
            continue
        scaler = StandardScaler().fit(x[train])
        model = LogisticRegression(C=config.C, max_iter=config.max_iter, tol=config.tol)
        model.fit(scaler.transform(x[train]), y[train])
        correct[test] = model.predict(scaler.transform(x[test])) == y[test]


def layer_features(model: nn.Module, batches: Sequence[Any], run: Callable[[nn.Module, Any],
                   Any], layers: Sequence[str], positions: Positions) -> dict[str, np.ndarray]:
    """{layer: (N, width)} each layer module's output at each item's position."""
    components = [Component(name, name, "output") for name in layers]
    out: dict[str, list[np.ndarray]] = {name: [] for name in layers}
    with _evaluating(model), torch.no_grad():
        for batch in batches:
            into: dict[str, list[torch.Tensor]] = {}
            with capture(model, components, into):
                run(model, batch)
            where = positions(batch).long()
            rows = torch.arange(where.numel())
            for name in layers:
                act = into[name][-1]
                out[name].append(act[rows, where].flatten(1).double().numpy())
    return {name: np.concatenate(parts) for name, parts in out.items()}


def probe_arms(pairs: Sequence[tuple[nn.Module, nn.Module]], batches: Sequence[Any],
               run: Callable[[nn.Module, Any], Any], labels: Sequence[Any],
               types: Sequence[Any], layers: Sequence[str], positions: Positions,
               config: ProbeConfig | None = None, *, label: str = "label"
               ) -> ProbeComparison:
    """Probe `layers` of the control and the variant of every seed pair for `labels`.

    run(model, batch): a forward pass over a batch (e.g. the patching metric).
    labels, types: one per item, in batch order; types define the control task.
    positions(batch) -> (B,) the position whose activation stands for the item.
    """
    config = config or ProbeConfig()
    y = np.asarray(labels)
    if np.unique(y).size < 2:
        raise LabcoatError(f"label {label!r} has one value on every item; a probe needs two "
                           "or more")
    control_y = control_labels(y, types, config.seed)
    correct: dict[tuple[str, str, str], list[np.ndarray]] = {}
    for c_model, v_model in pairs:
        for arm, model in (("control", c_model), ("variant", v_model)):
            feats = layer_features(model, batches, run, layers, positions)
            for name, x in feats.items():
                correct.setdefault((arm, name, "task"), []).append(
                    held_out_correct(x, y, config))
                correct.setdefault((arm, name, "control"), []).append(
                    held_out_correct(x, control_y, config))

    def share(values: np.ndarray) -> Share:
        return Share.of(stats.ratio_of_means(values, ci=config.ci, reps=config.reps,
                                             seed=config.seed))

    def score(arm: str, name: str) -> ProbeScore:
        task = np.array(correct[(arm, name, "task")])
        ctrl = np.array(correct[(arm, name, "control")])
        return ProbeScore(share(task), share(ctrl), share(task - ctrl))

    result = []
    for name in layers:
        task = {a: np.array(correct[(a, name, "task")]) for a in ("control", "variant")}
        ctrl = {a: np.array(correct[(a, name, "control")]) for a in ("control", "variant")}
        sel = {a: task[a] - ctrl[a] for a in task}
        result.append(ProbeLayer(name, score("control", name), score("variant", name),
                                 share(task["variant"] - task["control"]),
                                 share(sel["variant"] - sel["control"])))
    _, counts = np.unique(y, return_counts=True)
    return ProbeComparison(label=label, classes=counts.size, items=y.size, seeds=len(pairs),
                           chance=float(counts.max() / counts.sum()), layers=result)
