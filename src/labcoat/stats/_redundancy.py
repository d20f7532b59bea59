"""The model-vs-prompt-cluster game of a set of battles, and a redundancy audit: how much
each rating moves when one prompt cluster is duplicated or dropped.

Chatbot-Arena-style ratings weigh a topic by how many prompts it has; a topic
pasted in ten times drags Bradley-Terry and Elo toward the models good at it.
Nash averaging (Balduzzi et al. 2018) of the model-vs-cluster game gives copies of
a cluster the weight of one. The audit shows both, cluster by cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labcoat.stats._nash import NashAverage, nash_average
from labcoat.stats._ratings import ELO_BASE, ELO_SCALE, Battles, _counts, _elo_many, _fit


def cluster_game(data: Battles) -> np.ndarray:
    """Payoff (n_models, n_clusters): each model's smoothed score rate in each cluster
    minus 0.5, (wins + ties / 2 + 1) / (games + 2) - 0.5 (the posterior mean under a
    uniform prior: a model that never played a cluster gets 0, a single game counts a
    little). Needs `data.cluster`."""
    if data.cluster is None or data.clusters is None:
        raise ValueError("the model-vs-prompt game needs a cluster for every battle")
    n, k = len(data.models), len(data.clusters)
    score = (np.bincount(data.a * k + data.cluster, data.outcome, n * k)
             + np.bincount(data.b * k + data.cluster, 1 - data.outcome, n * k)).reshape(n, k)
    games = (np.bincount(data.a * k + data.cluster, minlength=n * k)
             + np.bincount(data.b * k + data.cluster, minlength=n * k)).reshape(n, k)
    return (score + 1.0) / (games + 2.0) - 0.5


def nash_rating(data: Battles) -> NashAverage:
    """Nash averaging of `cluster_game(data)`: ratings (n_models,) in score-rate units
    (a model's rate minus 0.5 against the equilibrium mix of clusters)."""
    return nash_average(cluster_game(data))


@dataclass(frozen=True)
class AuditRow:
    """What one change to the clusters does. change: "duplicate" or "drop"; cluster: its
    name; shift_*: (n_models,) new rating minus the original, in each method's own units
    (Bradley-Terry and Elo in Elo points, Nash in score rate); None where the method has
    no answer (a dropped cluster held a model's only games)."""

    change: str
    cluster: str
    shift_bt: np.ndarray | None
    shift_elo: np.ndarray | None
    shift_nash: np.ndarray | None


@dataclass(frozen=True)
class Audit:
    """The redundancy audit. base_*: (n_models,) ratings on the data as given (Elo: mean
    over `orders` random orders); rows: one per cluster and change."""

    models: list[str]
    copies: int
    base_bt: np.ndarray
    base_elo: np.ndarray
    base_nash: np.ndarray
    rows: list[AuditRow]


def redundancy_audit(data: Battles, *, copies: int = 10, ties: str = "davidson",
                     prior: float = 0.0, orders: int = 20, seed: int = 0) -> Audit:
    """For each cluster: ratings with the cluster present `copies` times (as new clusters
    with new prompts) and with it dropped, minus the ratings on `data`. Elo is averaged
    over `orders` random orders drawn with `seed` (the same orders before and after)."""
    if copies < 2:
        raise ValueError(f"copies={copies} must be >= 2")
    if data.cluster is None or data.clusters is None:
        raise ValueError("the redundancy audit needs a prompt cluster for every battle")
    base = _all_three(data, ties, prior, orders, seed)
    rows = []
    for c, name in enumerate(data.clusters):
        for change, changed in (("duplicate", data.with_copies(c, copies)),
                                ("drop", data.subset(data.cluster != c))):
            new = _all_three(changed, ties, prior, orders, seed)
            rows.append(AuditRow(change, name, *[
                None if x is None or b is None else x - b for x, b in zip(new, base,
                                                                          strict=True)]))
    bt, el, na = base
    assert bt is not None and el is not None and na is not None
    return Audit(list(data.models), copies, bt, el, na, rows)


def _all_three(data: Battles, ties: str, prior: float, orders: int,
               seed: int) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    n = len(data.models)
    games = np.bincount(data.a, minlength=n) + np.bincount(data.b, minlength=n)
    if (games == 0).any() or len(data.a) == 0:
        return None, None, None
    W, T = _counts(data, np.ones(len(data.a)), ties)
    bt = ELO_BASE + ELO_SCALE * _fit(W, T, max(prior, 1e-8))[0]
    rng = np.random.default_rng(seed)
    perms = np.vstack([rng.permutation(len(data.a)) for _ in range(orders)])
    el = _elo_many(data, perms, 4.0).mean(axis=0)
    na = nash_rating(data).ratings
    return bt, el, na
