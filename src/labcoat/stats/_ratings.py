"""Ratings of many models from head-to-head outcomes: Bradley-Terry (Davidson for ties),
Elo beside it, and how to turn per-item scores into battles.

Battles use Chatbot Arena's columns: model_a, model_b, winner in {"model_a",
"model_b", "tie"} ("tie (bothbad)" counts as a tie). Ratings are reported on the
Elo scale Arena uses: 400 / ln(10) points per unit of log-strength, centred on
1000 (Chiang et al. 2024, "Chatbot Arena", arXiv 2403.04132).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from labcoat.stats._checks import check_ci

ELO_SCALE = 400.0 / np.log(10.0)  # Elo points per unit of log-strength
ELO_BASE = 1000.0
WINNERS = ("model_a", "model_b", "tie", "tie (bothbad)")
TIES = ("davidson", "half")


@dataclass(frozen=True)
class Battles:
    """Pairwise outcomes, coded. a, b: (n_battles,) model indices into `models`;
    outcome: (n_battles,) 1.0 a won, 0.0 b won, 0.5 tie; prompt: (n_battles,) index of
    the prompt (the bootstrap resamples prompts, all their battles together); cluster:
    (n_battles,) index into `clusters` (topic of the prompt), or None."""

    models: list[str]
    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray
    prompt: np.ndarray
    cluster: np.ndarray | None = None
    clusters: list[str] | None = None

    def subset(self, keep: np.ndarray) -> Battles:
        """The battles where `keep` (bool, (n_battles,)) is true; models and clusters kept."""
        return Battles(self.models, self.a[keep], self.b[keep], self.outcome[keep],
                       self.prompt[keep], None if self.cluster is None else self.cluster[keep],
                       self.clusters)

    def with_copies(self, cluster: int, copies: int) -> Battles:
        """The battles with cluster `cluster` present `copies` times in all: each extra copy
        is a new cluster (named "NAME#2", ...) with new prompts, as a redundant topic is."""
        if self.cluster is None or self.clusters is None:
            raise ValueError("with_copies needs battles with clusters")
        idx = np.flatnonzero(self.cluster == cluster)
        a, b, o, p, c = [self.a], [self.b], [self.outcome], [self.prompt], [self.cluster]
        names = list(self.clusters)
        top = int(self.prompt.max()) + 1 if len(self.prompt) else 0
        for k in range(2, copies + 1):
            names.append(f"{self.clusters[cluster]}#{k}")
            a.append(self.a[idx])
            b.append(self.b[idx])
            o.append(self.outcome[idx])
            p.append(self.prompt[idx] + top * (k - 1))
            c.append(np.full(len(idx), len(names) - 1))
        return Battles(self.models, np.concatenate(a), np.concatenate(b), np.concatenate(o),
                       np.concatenate(p), np.concatenate(c), names)


def battles(model_a: Sequence[str], model_b: Sequence[str], winner: Sequence[str], *,
            prompts: Sequence[str] | None = None,
            clusters: Sequence[str] | None = None) -> Battles:
    """Code battles given as Arena's columns (each (n_battles,)). Raises ValueError naming
    the first unknown winner value or a battle of a model against itself."""
    n = len(model_a)
    if len(model_b) != n or len(winner) != n:
        raise ValueError(f"model_a, model_b and winner differ in length "
                         f"({n}, {len(model_b)}, {len(winner)})")
    for name, col in (("prompts", prompts), ("clusters", clusters)):
        if col is not None and len(col) != n:
            raise ValueError(f"{name} has {len(col)} entries for {n} battles")
    code = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5, "tie (bothbad)": 0.5}
    outcome = np.empty(n)
    for i, w in enumerate(winner):
        if w not in code:
            raise ValueError(f"battle {i}: winner {w!r} is not one of {', '.join(WINNERS)}")
        outcome[i] = code[w]
    models = sorted(set(model_a) | set(model_b))
    index = {m: i for i, m in enumerate(models)}
    a = np.array([index[m] for m in model_a], dtype=int)
    b = np.array([index[m] for m in model_b], dtype=int)
    same = np.flatnonzero(a == b)
    if len(same):
        raise ValueError(f"battle {same[0]}: {model_a[same[0]]!r} plays itself")
    prompt = (np.arange(n) if prompts is None
              else np.unique(np.asarray(prompts, dtype=str), return_inverse=True)[1].ravel())
    if clusters is None:
        return Battles(models, a, b, outcome, prompt)
    names, cluster = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
    return Battles(models, a, b, outcome, prompt, cluster.ravel(), [str(c) for c in names])


def battles_from_scores(scores: ArrayLike, models: Sequence[str], *,
                        clusters: Sequence[str] | None = None) -> Battles:
    """Battles from per-item scores of several models: on each item every pair of models
    plays once; the higher score wins, equal scores tie.

    scores: (n_models, n_items); clusters: (n_items,) topic of each item (e.g. its task).
    Each item is one prompt, so the bootstrap resamples items.
    """
    S = np.asarray(scores, dtype=float)
    if S.ndim != 2 or S.shape[0] != len(models) or S.shape[0] < 2:
        raise ValueError(f"scores must be (n_models, n_items) with 2 or more models and one "
                         f"row per model; got shape {S.shape} for {len(models)} models")
    if not np.all(np.isfinite(S)):
        raise ValueError("scores contain NaN or inf; every model needs a score on every item")
    i, j = np.triu_indices(S.shape[0], k=1)
    diff = S[i] - S[j]  # (n_pairs, n_items)
    outcome = np.where(diff > 0, 1.0, np.where(diff < 0, 0.0, 0.5)).T.ravel()
    n_items = S.shape[1]
    a, b = np.tile(i, n_items), np.tile(j, n_items)
    prompt = np.repeat(np.arange(n_items), len(i))
    if clusters is None:
        return Battles(list(models), a, b, outcome, prompt)
    if len(clusters) != n_items:
        raise ValueError(f"clusters has {len(clusters)} entries for {n_items} items")
    names, code = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
    return Battles(list(models), a, b, outcome, prompt, code.ravel()[prompt],
                   [str(c) for c in names])


@dataclass(frozen=True)
class Ratings:
    """Bradley-Terry ratings with bootstrap intervals.

    models: (n_models,); strength: (n_models,) log-strength, mean zero (P(i beats j) =
    1 / (1 + exp(strength_j - strength_i)) without ties); rating: the same on the Elo
    scale (1000 + 400 / ln 10 * strength); low, high: (n_models,) percentile bootstrap
    interval of `rating`; rank: (n_models,) 1 = best; rank_low, rank_high: percentile
    interval of each model's rank over the replicates; tie: Davidson's tie parameter nu
    (None with ties="half"); games: (n_models,) battles each model played.
    """

    models: list[str]
    strength: np.ndarray
    rating: np.ndarray
    low: np.ndarray
    high: np.ndarray
    rank: np.ndarray
    rank_low: np.ndarray
    rank_high: np.ndarray
    tie: float | None
    games: np.ndarray
    ci: float
    bootstrap: int


def bradley_terry(data: Battles, *, ties: str = "davidson", prior: float = 0.0,
                  bootstrap: int = 1000, ci: float = 0.95, seed: int = 0) -> Ratings:
    """Maximum-likelihood Bradley-Terry ratings of `data`, with percentile bootstrap
    intervals (prompts resampled with replacement, `seed` drives them) and rank intervals.

    ties: "davidson" models ties (Davidson 1970, JASA 65:317: P(tie) = nu sqrt(pi_i pi_j) /
    (pi_i + pi_j + nu sqrt(pi_i pi_j))); "half" counts a tie as half a win for each side,
    as Chatbot Arena does. prior: ridge penalty prior / 2 * sum(strength^2) (0: the plain
    MLE, which exists only if no group of models won or tied every game against the
    rest, Ford 1957). Raises ValueError naming a model without games or one whose
    strength is unbounded.
    """
    check_ci(ci)
    if ties not in TIES:
        raise ValueError(f"ties={ties!r} is not one of {', '.join(TIES)}")
    if bootstrap < 0 or prior < 0:
        raise ValueError("bootstrap and prior must be >= 0")
    n = len(data.models)
    games = np.bincount(data.a, minlength=n) + np.bincount(data.b, minlength=n)
    if n < 2 or (games == 0).any():
        idle = [m for m, g in zip(data.models, games, strict=True) if g == 0]
        raise ValueError(f"model {idle[0]!r} has no games; every model needs at least one"
                         if idle else "ratings need battles between at least 2 models")
    W, T = _counts(data, np.ones(len(data.a)), ties)
    if prior == 0:
        _check_connected(W, T, data.models)
    theta, nu = _fit(W, T, prior)
    reps = np.empty((bootstrap, n))
    if bootstrap:
        rng = np.random.default_rng(seed)
        n_prompts = int(data.prompt.max()) + 1
        for r in range(bootstrap):
            weight = np.bincount(rng.integers(0, n_prompts, n_prompts), minlength=n_prompts)
            Wr, Tr = _counts(data, weight[data.prompt].astype(float), ties)
            reps[r] = _fit(Wr, Tr, max(prior, 1e-8), start=theta)[0]  # tiny ridge: a
            # replicate can lose a model's only loss; its estimate then stays finite
    rating = ELO_BASE + ELO_SCALE * theta
    rank = _ranks(theta[None, :])[0]
    alpha = (1 - ci) / 2
    if bootstrap:
        elo = ELO_BASE + ELO_SCALE * reps
        low, high = np.quantile(elo, [alpha, 1 - alpha], axis=0)
        rr = _ranks(reps)
        rank_low, rank_high = np.quantile(rr, [alpha, 1 - alpha], axis=0, method="nearest")
    else:
        low = high = np.full(n, np.nan)
        rank_low = rank_high = rank.astype(float)
    return Ratings(list(data.models), theta, rating, low, high, rank, rank_low.astype(int),
                   rank_high.astype(int), nu, games, ci, bootstrap)


def _ranks(theta: np.ndarray) -> np.ndarray:
    """Rank of each column in each row, 1 = largest: (n_reps, n_models)."""
    return np.argsort(np.argsort(-theta, axis=1, kind="stable"), axis=1) + 1


def _counts(data: Battles, weight: np.ndarray, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """W[i, j]: (weighted) wins of i over j; T[i, j] = T[j, i]: ties (zero with "half",
    where a tie adds half a win to each side)."""
    n = len(data.models)
    win_a = weight * (data.outcome == 1.0)
    win_b = weight * (data.outcome == 0.0)
    tie = weight * (data.outcome == 0.5)
    if ties == "half":
        win_a, win_b, tie = win_a + tie / 2, win_b + tie / 2, 0 * tie
    W = (np.bincount(data.a * n + data.b, win_a, n * n)
         + np.bincount(data.b * n + data.a, win_b, n * n)).reshape(n, n)
    T = np.bincount(data.a * n + data.b, tie, n * n).reshape(n, n)
    return W, T + T.T


def _check_connected(W: np.ndarray, T: np.ndarray, models: list[str]) -> None:
    """Ford's condition: the MLE is finite iff every model can reach every other through
    'beat or tied' edges. Otherwise name a model on top (or bottom) and the fix."""
    from scipy.sparse.csgraph import connected_components

    beat = (W + T) > 0
    count, label = connected_components(beat, directed=True, connection="strong")
    if count == 1:
        return
    # a strongly connected component no other component beats: its strengths go to +inf
    above = {label[i] for i in range(len(models)) for j in range(len(models))
             if beat[i, j] and label[i] != label[j]}
    below = {label[j] for i in range(len(models)) for j in range(len(models))
             if beat[i, j] and label[i] != label[j]}
    top = sorted(set(range(count)) - below) or sorted(above)
    who = [m for m, c in zip(models, label, strict=True) if c == top[0]]
    raise ValueError(f"the Bradley-Terry MLE does not exist: {', '.join(map(repr, who[:3]))} "
                     "never lost (or tied) a game against the other models, so its strength "
                     "is unbounded; add those games or a prior (e.g. prior=0.01)")


def _fit(W: np.ndarray, T: np.ndarray, prior: float,
         start: np.ndarray | None = None) -> tuple[np.ndarray, float | None]:
    """Maximise the Davidson likelihood (plain Bradley-Terry when T is all zero) by
    Newton's method with backtracking: returns (strength with mean zero, nu or None).

    Davidson's model is a multinomial logit in (strength, log nu): a win of i scores
    e_i, a tie (e_i + e_j) / 2 + e_nu, so the Hessian of the negative log-likelihood is
    the summed covariance of those scores, computed exactly below.
    """
    n = W.shape[0]
    with_ties = bool(T.sum() > 0)
    x = np.zeros(n + with_ties) if start is None else np.r_[start, np.zeros(int(with_ties))]
    if with_ties:
        x[n] = np.log(max(T.sum() / max((W + W.T).sum() / 2, 1.0), 1e-3))
    value, grad, hess = _davidson(x, W, T, prior, with_ties)
    for _ in range(200):
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while True:
            new = x - t * step
            new_value, new_grad, new_hess = _davidson(new, W, T, prior, with_ties)
            if new_value <= value + 1e-12 * abs(value) or t < 1e-8:
                break
            t /= 2
        x, value, grad, hess = new, new_value, new_grad, new_hess
        if np.max(np.abs(t * step)) < 1e-11:
            break
    theta = x[:n] - x[:n].mean()
    return theta, (float(np.exp(x[n])) if with_ties else None)


def _davidson(x: np.ndarray, W: np.ndarray, T: np.ndarray, prior: float,
              with_ties: bool) -> tuple[float, np.ndarray, np.ndarray]:
    """Negative log-likelihood, gradient and Hessian at x = (strength, [log nu]).
    W: (n, n) wins of row over column; T: (n, n) symmetric ties."""
    n = W.shape[0]
    th = x[:n]
    kappa = x[n] if with_ties else -np.inf
    d = th[:, None] - th[None, :]
    # log(D / e^{theta_i}) with D = e^{theta_i} + e^{theta_j} + nu e^{(theta_i+theta_j)/2}
    logD_i = np.logaddexp(np.logaddexp(0.0, -d), kappa - d / 2)
    off = ~np.eye(n, dtype=bool)
    P = np.where(off, np.exp(-logD_i), 0.0)  # P(row beats column)
    Q = P.T  # P(column beats row)
    logT = kappa - d / 2 - logD_i
    Tp = np.where(off, np.exp(logT), 0.0) if with_ties else np.zeros((n, n))
    N = W + W.T + T
    value = -np.sum(W * np.where(off, -logD_i, 0.0))
    if with_ties:
        value -= np.sum(np.triu(T, 1) * np.triu(logT, 1))
    mu_i, mu_j = P + Tp / 2, Q + Tp / 2  # expected scores of row and column
    grad = -(W + T / 2 - N * mu_i).sum(axis=1)
    H = N * (Tp / 4 - mu_i * mu_j)  # covariance of the two sides' scores
    np.fill_diagonal(H, (N * (P + Tp / 4 - mu_i**2)).sum(axis=1))
    mean = th.mean()
    value += 0.5 * prior * np.sum(th**2) + 0.5 * n * mean**2  # the last fixes the mean at 0
    grad = grad + prior * th + mean
    H = H + prior * np.eye(n) + 1.0 / n
    if not with_ties:
        return float(value), grad, H
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    g_k = -(np.sum(T[upper]) - np.sum(N[upper] * Tp[upper]))
    h_ik = (N * (Tp / 2 - mu_i * Tp)).sum(axis=1)
    h_kk = np.sum(N[upper] * (Tp[upper] - Tp[upper] ** 2))
    full = np.zeros((n + 1, n + 1))
    full[:n, :n], full[:n, n], full[n, :n], full[n, n] = H, h_ik, h_ik, h_kk
    return float(value), np.r_[grad, g_k], full


@dataclass(frozen=True)
class Elo:
    """Online Elo ratings. rating: (n_models,) after the battles in the order given;
    mean, low, high: (n_models,) mean and central `ci` interval over `orders` random
    orders of the same battles (how much Elo depends on the order alone)."""

    models: list[str]
    rating: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    k: float
    orders: int
    ci: float


def elo(data: Battles, *, k: float = 4.0, orders: int = 100, ci: float = 0.95,
        seed: int = 0) -> Elo:
    """Elo with K-factor `k` (Chatbot Arena's online Elo used K=4, scale 400, base 10,
    start 1000; a tie is half a win), in the given order and over `orders` shuffles drawn
    with `seed`."""
    check_ci(ci)
    if orders < 1:
        raise ValueError(f"orders={orders} must be >= 1")
    rng = np.random.default_rng(seed)
    m = len(data.a)
    perms = np.vstack([np.arange(m)] + [rng.permutation(m) for _ in range(orders)])
    R = _elo_many(data, perms, k)
    alpha = (1 - ci) / 2
    low, high = np.quantile(R[1:], [alpha, 1 - alpha], axis=0)
    return Elo(list(data.models), R[0], R[1:].mean(axis=0), low, high, k, orders, ci)


def _elo_many(data: Battles, perms: np.ndarray, k: float) -> np.ndarray:
    """Elo after each order of battles at once: perms (n_orders, n_battles) -> (n_orders,
    n_models). One pass over the battles, vectorised over the orders."""
    R = np.full((perms.shape[0], len(data.models)), ELO_BASE)
    rows = np.arange(perms.shape[0])
    for step in range(perms.shape[1]):
        idx = perms[:, step]
        a, b, s = data.a[idx], data.b[idx], data.outcome[idx]
        expected = 1.0 / (1.0 + 10.0 ** ((R[rows, b] - R[rows, a]) / 400.0))
        delta = k * (s - expected)
        R[rows, a] += delta
        R[rows, b] -= delta
    return R
