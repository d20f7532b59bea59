"""Item response theory: a 2-parameter logistic model of per-item 0/1 results, and adaptive
item selection.

Model (Birnbaum 1968): examinee i (a model or a checkpoint) answers item j correctly with
probability P_ij = 1 / (1 + exp(-a_j (theta_i - b_j))); a_j is the item's discrimination,
b_j its difficulty (the ability at which P = 1/2), theta_i the examinee's ability, all in
logits. tinyBenchmarks (Polo et al. 2024) and metabench (Kipnis et al. 2024) fit this to
LLM leaderboards to evaluate on a few items.

Estimation is marginal maximum likelihood (Bock & Aitkin 1981): abilities are integrated
out under a standard normal, by EM on 61 equally spaced nodes in [-6, 6]; each M-step is a
few Newton steps of a weighted logistic regression per item in the slope-intercept form
z = a theta + c (concave, so Newton is stable), then b = -c / a. With few examinees (ten
models, say) pure MML runs off: an item that separates them gets a -> infinity. So by
default each item also has a weak normal prior, a ~ N(1, 1) and c ~ N(0, 3^2), and the
estimate is the marginal posterior mode (Mislevy 1986, "Bayes modal estimation in item
response models"; BILOG's priors serve the same end); with hundreds of examinees it
moves estimates by hundredths. ``prior=None`` is plain MML. Identification: the
ability distribution is fixed at mean 0 and SD 1 (location and scale), and a > 0 at the
start (the sign; an item whose a ends negative is one the better examinees fail more).
Item SEs come from the cross-product of the examinees' score vectors (Louis 1982's observed
information, approximated as in Mislevy 1986), so they include what the missing
abilities cost. Abilities, given the items, are expected a posteriori (EAP) with the
posterior SD as SE, or maximum likelihood with SE 1/sqrt(I(theta)).

Fisher information of item j at theta is a_j^2 P (1 - P), largest where P = 1/2, so
`select_items` and `adaptive_test` choose items about half the examinees of that ability
answer correctly (Lord 1980, ch. 10): a short adaptive test gets most of the full bank's
information about one examinee.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

# Quadrature of the N(0, 1) ability distribution (mirt and girth use 61 nodes on [-6, 6]).
NODES = np.linspace(-6.0, 6.0, 61)
WEIGHTS = np.exp(-0.5 * NODES**2) / np.exp(-0.5 * NODES**2).sum()
# Discriminations are kept in this band: with few examinees a separating item would
# otherwise run off to infinity (its likelihood keeps rising as a grows).
MAX_DISCRIMINATION = 20.0


@dataclass(frozen=True)
class IRTFit:
    """A fitted 2PL model.

    discrimination, difficulty: (n_items,) a_j and b_j (logits); their SEs (n_items,).
    ability, ability_se: (n_examinees,) EAP abilities and posterior SDs.
    log_likelihood: the marginal log-likelihood at the estimates.
    """

    discrimination: np.ndarray
    difficulty: np.ndarray
    discrimination_se: np.ndarray
    difficulty_se: np.ndarray
    ability: np.ndarray
    ability_se: np.ndarray
    log_likelihood: float
    iterations: int
    converged: bool
    method: str = ("marginal maximum likelihood (EM, Bock & Aitkin 1981); abilities "
                   "N(0, 1) for identification")
    prior: tuple[float, float] | None = None

    @property
    def n_items(self) -> int:
        return int(self.discrimination.size)

    def probability(self, theta: ArrayLike) -> np.ndarray:
        """P(correct): (n_theta, n_items) for abilities theta (n_theta,) (a scalar gives
        (1, n_items))."""
        return _prob(np.atleast_1d(np.asarray(theta, float)), self.discrimination,
                     self.difficulty)

    def information(self, theta: ArrayLike) -> np.ndarray:
        """Fisher information a^2 P (1 - P) of each item: (n_theta, n_items)."""
        p = self.probability(theta)
        return self.discrimination**2 * p * (1.0 - p)

    def as_dict(self) -> dict[str, object]:
        return {"method": self.method, "log_likelihood": self.log_likelihood,
                "iterations": self.iterations, "converged": self.converged,
                "items": [{"discrimination": float(a), "difficulty": float(b),
                           "discrimination_se": float(sa), "difficulty_se": float(sb)}
                          for a, b, sa, sb in zip(self.discrimination, self.difficulty,
                                                  self.discrimination_se, self.difficulty_se,
                                                  strict=True)],
                "abilities": [{"ability": float(t), "se": float(s)}
                              for t, s in zip(self.ability, self.ability_se, strict=True)]}


PRIOR = (1.0, 3.0)  # SDs of the default item priors a ~ N(1, 1^2), c ~ N(0, 3^2)


def fit_2pl(responses: ArrayLike, *, prior: tuple[float, float] | None = PRIOR,
            max_iterations: int = 500, tol: float = 1e-6) -> IRTFit:
    """Fit a 2PL model by marginal maximum likelihood (a posteriori, with `prior`).

    responses: (n_examinees, n_items) of 0/1, NaN where an examinee did not answer an
    item (missing at random). Every item needs a 0 and a 1 among its answers (an item
    all examinees pass or fail has no finite difficulty: drop it first, e.g. with
    `informative_items`), and at least 2 examinees.
    prior: (sd_a, sd_c), the SDs of normal priors a ~ N(1, sd_a^2) and intercept
    c = -a b ~ N(0, sd_c^2) on every item (the marginal posterior mode); None: plain
    marginal maximum likelihood (needs many examinees per item).
    Stops when the marginal log-likelihood (plus log prior) gains less than `tol` per
    examinee.
    """
    if prior is not None and not (len(prior) == 2 and all(v > 0 for v in prior)):
        raise ValueError(f"prior={prior!r} must be two positive SDs (a, intercept) or None")
    y, observed = _responses(responses)
    n, j = y.shape
    constant = informative_items(np.where(observed, y, np.nan)) == False  # noqa: E712
    if constant.any():
        bad = np.flatnonzero(constant)
        raise ValueError(
            f"items {bad[:5].tolist()}{'...' if bad.size > 5 else ''} ({bad.size} of {j}) "
            "were answered the same way by every examinee, so their difficulty is infinite; "
            "drop them (stats.informative_items) before fitting")
    # Start: a = 1, b from the logit of each item's proportion correct.
    p = np.clip((y * observed).sum(0) / observed.sum(0), 0.02, 0.98)
    a, c = np.ones(j), np.log(p / (1 - p))
    previous = -math.inf
    converged = False
    iteration = 0
    for iteration in range(1, max_iterations + 1):  # noqa: B007
        post, loglik = _posterior(y, observed, a, c)
        # Expected counts at each node: answered (n_jq) and correct (r_jq), (J, Q).
        n_jq = observed.T.astype(float) @ post
        r_jq = (y * observed).T @ post
        a, c = _m_step(a, c, n_jq, r_jq, prior)
        loglik += _log_prior(a, c, prior)
        if abs(loglik - previous) < tol * n:
            converged = True
            break
        previous = loglik
    post, loglik = _posterior(y, observed, a, c)
    ability = post @ NODES
    ability_se = np.sqrt(np.maximum(post @ NODES**2 - ability**2, 0.0))
    se_a, se_b = _item_se(y, observed, post, a, c, prior)
    method = IRTFit.method if prior is None else (
        f"marginal maximum a posteriori (EM, Bock & Aitkin 1981; item priors a ~ N(1, "
        f"{prior[0]:g}^2), intercept ~ N(0, {prior[1]:g}^2)); abilities N(0, 1) for "
        "identification")
    return IRTFit(discrimination=a, difficulty=-c / a, discrimination_se=se_a,
                  difficulty_se=se_b, ability=ability, ability_se=ability_se,
                  log_likelihood=float(loglik), iterations=iteration, converged=converged,
                  method=method, prior=None if prior is None else tuple(prior))


def informative_items(responses: ArrayLike) -> np.ndarray:
    """(n_items,) bool: items with at least one 0 and one 1 among the answered (NaN = not
    answered); only these have a finite difficulty."""
    x = np.asarray(responses, float)
    if x.ndim != 2:
        raise ValueError(f"responses must be (n_examinees, n_items), got shape {x.shape}")
    return np.nanmax(np.where(np.isnan(x), -np.inf, x), 0) > np.nanmin(
        np.where(np.isnan(x), np.inf, x), 0)


@dataclass(frozen=True)
class Ability:
    """An ability estimate (logits) with its SE and the items it rests on."""

    theta: float
    se: float
    items: tuple[int, ...]
    method: str


def ability(fit: IRTFit, responses: ArrayLike, items: Sequence[int] | None = None, *,
            method: Literal["eap", "mle"] = "eap") -> Ability:
    """One examinee's ability from its answers to some of the fitted items.

    responses: (len(items),) 0/1 answers to `items` (indices into the fit; None: all
    items, in order). "eap": posterior mean and SD under the N(0, 1) prior the fit
    assumed (finite even for all-correct answers). "mle": the maximum-likelihood theta
    (Newton, kept in [-6, 6]) with SE 1 / sqrt(sum of the items' information).
    """
    index = np.arange(fit.n_items) if items is None else np.asarray(items, dtype=int)
    x = np.asarray(responses, float).ravel()
    if x.size != index.size:
        raise ValueError(f"{x.size} responses for {index.size} items; give one per item")
    if not np.all((x == 0) | (x == 1)):
        raise ValueError("responses must be 0 or 1")
    a, b = fit.discrimination[index], fit.difficulty[index]
    if method == "eap":
        p = _prob(NODES, a, b)
        loglik = np.log(p) @ x + np.log1p(-p) @ (1 - x)
        post = WEIGHTS * np.exp(loglik - loglik.max())
        post /= post.sum()
        theta = float(post @ NODES)
        return Ability(theta, float(math.sqrt(max(post @ NODES**2 - theta**2, 0.0))),
                       tuple(index.tolist()), "eap")
    if method != "mle":
        raise ValueError(f"method={method!r}; choose 'eap' or 'mle'")
    theta = 0.0
    for _ in range(100):
        p = _prob(np.array([theta]), a, b)[0]
        gradient = float(a @ (x - p))
        info = float(a**2 @ (p * (1 - p)))
        step = gradient / max(info, 1e-12)
        theta = float(np.clip(theta + step, NODES[0], NODES[-1]))
        if abs(step) < 1e-10 or theta in (NODES[0], NODES[-1]):
            break
    p = _prob(np.array([theta]), a, b)[0]
    se = 1.0 / math.sqrt(max(float(a**2 @ (p * (1 - p))), 1e-300))
    return Ability(theta, se, tuple(index.tolist()), "mle")


def select_items(fit: IRTFit, theta: ArrayLike, n: int, *,
                 exclude: Sequence[int] = ()) -> np.ndarray:
    """The n items with the most Fisher information summed over abilities theta (one
    ability: the items it answers about half right; several, e.g. the current models: a
    fixed subset informative for all of them). Returns (n,) item indices, best first."""
    info = fit.information(theta).sum(axis=0)
    info[list(exclude)] = -np.inf
    if not 1 <= n <= fit.n_items - len(set(exclude)):
        raise ValueError(f"n={n} must be between 1 and the {fit.n_items - len(set(exclude))} "
                         "items left")
    return np.argsort(-info, kind="stable")[:n]


@dataclass(frozen=True)
class AdaptiveTest:
    """An adaptive test's course: items asked (in order), the answers, the final ability
    and its SE, and the EAP estimate after each answer."""

    items: tuple[int, ...]
    responses: tuple[float, ...]
    ability: Ability
    path: tuple[float, ...]


def adaptive_test(fit: IRTFit, answer: Callable[[int], float], n_items: int, *,
                  start: float = 0.0, method: Literal["eap", "mle"] = "eap") -> AdaptiveTest:
    """Ask one examinee `n_items` items, each the most informative at its current EAP
    ability (Fisher information; the item it answers right with probability nearest 1/2,
    weighted by a^2), starting from `start`.

    answer: item index -> 0 or 1 (run the model on that item, or look up a stored result).
    The final ability uses `method` on the answers given.
    """
    if not 1 <= n_items <= fit.n_items:
        raise ValueError(f"n_items={n_items} must be between 1 and the bank's {fit.n_items}")
    asked: list[int] = []
    given: list[float] = []
    path: list[float] = []
    theta = start
    for _ in range(n_items):
        item = int(select_items(fit, theta, 1, exclude=asked)[0])
        value = float(answer(item))
        if value not in (0.0, 1.0):
            raise ValueError(f"answer({item}) returned {value!r}; it must be 0 or 1")
        asked.append(item)
        given.append(value)
        theta = ability(fit, given, asked).theta
        path.append(theta)
    return AdaptiveTest(tuple(asked), tuple(given), ability(fit, given, asked, method=method),
                        tuple(path))


# --- internals --------------------------------------------------------------------------------


def _responses(responses: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(responses, float)
    if x.ndim != 2:
        raise ValueError(f"responses must be (n_examinees, n_items), got shape {x.shape}")
    observed = ~np.isnan(x)
    y = np.where(observed, x, 0.0)
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("responses must be 0, 1 or NaN (not answered)")
    if x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(f"need at least 2 examinees and 1 item, got shape {x.shape}")
    if not observed.any(axis=1).all():
        raise ValueError("an examinee answered no item; drop it")
    return y, observed


def _prob(theta: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n_theta, n_items) P(correct), kept off 0 and 1 so logs stay finite."""
    z = np.clip(a[None, :] * (theta[:, None] - b[None, :]), -40.0, 40.0)
    return np.clip(1.0 / (1.0 + np.exp(-z)), 1e-12, 1 - 1e-12)


def _posterior(y: np.ndarray, observed: np.ndarray, a: np.ndarray, c: np.ndarray
               ) -> tuple[np.ndarray, float]:
    """(n, Q) posterior weights of each examinee's ability at the nodes, and the marginal
    log-likelihood."""
    p = _prob(NODES, a, -c / a)  # (Q, J)
    loglik = y @ np.log(p).T + (observed - y) @ np.log1p(-p).T  # (n, Q)
    top = loglik.max(axis=1, keepdims=True)
    joint = WEIGHTS * np.exp(loglik - top)
    marginal = joint.sum(axis=1, keepdims=True)
    return joint / marginal, float(np.sum(np.log(marginal) + top))


def _log_prior(a: np.ndarray, c: np.ndarray, prior: tuple[float, float] | None) -> float:
    if prior is None:
        return 0.0
    return float(-0.5 * np.sum((a - 1.0) ** 2) / prior[0] ** 2
                 - 0.5 * np.sum(c**2) / prior[1] ** 2)


def _m_step(a: np.ndarray, c: np.ndarray, n_jq: np.ndarray, r_jq: np.ndarray,
            prior: tuple[float, float] | None, steps: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Newton steps of every item's weighted logistic regression of (r, n) on [theta, 1],
    with the prior's quadratic penalty (still concave)."""
    pa, pc = (0.0, 0.0) if prior is None else (1 / prior[0] ** 2, 1 / prior[1] ** 2)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(a[:, None] * NODES[None, :] + c[:, None], -40, 40)))
        residual = r_jq - n_jq * p
        weight = n_jq * p * (1 - p)
        g_a, g_c = residual @ NODES - pa * (a - 1.0), residual.sum(1) - pc * c
        h_aa, h_ac, h_cc = weight @ NODES**2 + pa, weight @ NODES, weight.sum(1) + pc
        det = np.maximum(h_aa * h_cc - h_ac**2, 1e-12)
        step_a = (h_cc * g_a - h_ac * g_c) / det
        step_c = (h_aa * g_c - h_ac * g_a) / det
        a = np.clip(a + step_a, -MAX_DISCRIMINATION, MAX_DISCRIMINATION)
        a = np.where(np.abs(a) < 1e-4, 1e-4, a)  # b = -c / a needs a != 0
        c = c + step_c
        if max(np.abs(step_a).max(), np.abs(step_c).max()) < 1e-10:
            break
    return a, c


def _item_se(y: np.ndarray, observed: np.ndarray, post: np.ndarray, a: np.ndarray,
             c: np.ndarray, prior: tuple[float, float] | None
             ) -> tuple[np.ndarray, np.ndarray]:
    """SEs of (a, b) from the cross-product information sum_i s_i s_i^T, s_i the gradient
    of examinee i's marginal log-likelihood in (a_j, c_j) for all items j; b's by the delta
    method (b = -c / a)."""
    n, j = y.shape
    p = 1.0 / (1.0 + np.exp(-np.clip(a[None, :] * NODES[:, None] + c[None, :], -40, 40)))
    # d log L_i / d(a_j, c_j) = sum_q post_iq (y_ij - P_jq) [theta_q, 1] over observed items.
    expected_p = post @ p  # (n, J)
    expected_tp = post @ (NODES[:, None] * p)  # (n, J)
    s_c = observed * (y - expected_p)
    s_a = observed * (y * (post @ NODES)[:, None] - expected_tp)
    scores = np.concatenate([s_a, s_c], axis=1)  # (n, 2J)
    info = scores.T @ scores
    if prior is not None:  # the prior's precision adds to the information
        info += np.diag(np.r_[np.full(j, 1 / prior[0] ** 2), np.full(j, 1 / prior[1] ** 2)])
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        cov = np.linalg.pinv(info)
    var_a, var_c = np.diag(cov)[:j], np.diag(cov)[j:]
    cov_ac = np.diag(cov[:j, j:])
    # b = -c/a: db/da = c/a^2, db/dc = -1/a.
    var_b = (c / a**2) ** 2 * var_a + (1 / a) ** 2 * var_c - 2 * (c / a**2) / a * cov_ac
    return np.sqrt(np.maximum(var_a, 0)), np.sqrt(np.maximum(var_b, 0))
