"""Nash averaging of a model-vs-prompt game: a rating that redundant prompts cannot move.

Balduzzi, Tuyls, Perolat and Graepel, "Re-evaluating evaluation" (NeurIPS 2018),
section 4: the agent-vs-task matrix S (models x prompts) defines a two-player
zero-sum game; the model player picks a model to maximise p' S q, the prompt
player picks prompts to minimise it. Among the (convex set of) Nash equilibria
the maximum-entropy one is unique; a model's rating is its payoff against the
prompt player's equilibrium mix, (S q)_m. Adding copies of a prompt (column)
leaves the equilibrium payoffs unchanged: the copies share the mass the one
prompt had. Exact copies are merged before solving so that this holds exactly
even where the equilibrium is not unique; in the generic case (a unique
equilibrium) merging changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True)
class NashAverage:
    """The maximum-entropy Nash equilibrium of a model-vs-prompt game.

    ratings: (n_models,) payoff of each model against the prompt mix, S @ prompt_mix;
    prompt_mix: (n_prompts,) the prompt player's equilibrium (copies share mass equally);
    model_mix: (n_models,) the model player's equilibrium (which models matter);
    value: the game's value, model_mix @ S @ prompt_mix.
    """

    ratings: np.ndarray
    model_mix: np.ndarray
    prompt_mix: np.ndarray
    value: float


def nash_average(payoff: ArrayLike, *, tol: float = 1e-10) -> NashAverage:
    """Nash averaging (Balduzzi et al. 2018) of `payoff`: (n_models, n_prompts), larger is
    better for the model (e.g. a centred per-item score, or a win rate minus 0.5).

    Returns the ratings, both equilibrium mixes and the value. Raises ValueError on a
    matrix with non-finite entries or fewer than one model or prompt.
    """
    S = np.asarray(payoff, dtype=float)
    if S.ndim != 2 or S.shape[0] < 1 or S.shape[1] < 1:
        raise ValueError(f"payoff must be (n_models, n_prompts) with at least one of each; "
                         f"got shape {S.shape}")
    if not np.all(np.isfinite(S)):
        raise ValueError("payoff contains NaN or inf; every model needs a payoff per prompt")
    col_first, col_of = _unique(S.T)  # distinct prompts, and which one each prompt is
    row_first, row_of = _unique(S)  # distinct models likewise
    U = S[np.ix_(row_first, col_first)]  # (n_distinct_models, n_distinct_prompts)
    value, q0 = _minimax(U)  # the prompt player's equilibrium (it minimises U)
    _, p0 = _minimax(-U.T)  # the model player's (it maximises U)
    scale = tol * max(1.0, float(np.abs(U).max()))
    # any equilibrium of one player lives on the best responses to any equilibrium of the
    # other (complementary slackness), so the entropy step searches only those
    q = _maxent(U, value + scale, q0, p0 @ U <= value + scale)
    p = _maxent(-U.T, -value + scale, p0, U @ q0 >= value - scale)
    prompt_mix = _spread(q, col_of)
    model_mix = _spread(p, row_of)
    ratings = S @ prompt_mix
    return NashAverage(ratings=ratings, model_mix=model_mix, prompt_mix=prompt_mix,
                       value=float(value))


def _unique(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the first copy of each distinct row of M (in order), and for each row
    which distinct row it is."""
    _, first, inverse = np.unique(M, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse.ravel()]


def _spread(mix: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Mass of each distinct strategy shared equally among its copies."""
    counts = np.bincount(of, minlength=len(mix))
    return mix[of] / counts[of]


def _minimax(U: np.ndarray) -> tuple[float, np.ndarray]:
    """The value v = min_q max_i (U q)_i and a minimising q (linear program, HiGHS)."""
    from scipy.optimize import linprog

    n_rows, n_cols = U.shape
    # variables (q, v): minimise v subject to U q - v <= 0, sum q = 1, q >= 0
    lp = linprog(np.r_[np.zeros(n_cols), 1.0], A_ub=np.c_[U, -np.ones(n_rows)],
                 b_ub=np.zeros(n_rows), A_eq=np.r_[np.ones(n_cols), 0.0][None, :], b_eq=[1.0],
                 bounds=[(0, None)] * n_cols + [(None, None)], method="highs")
    if lp.status != 0:  # a finite matrix game always has a value
        raise ValueError(f"the equilibrium linear program failed: {lp.message}")
    q = np.clip(lp.x[:-1], 0, None)
    return float(lp.x[-1]), q / q.sum()


def _maxent(U: np.ndarray, bound: float, q0: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """The q of largest entropy with U q <= bound, supported on `allowed` (bool, (n_cols,)),
    by SLSQP from the LP's equilibrium q0 (which is feasible). If SLSQP fails, q0."""
    from scipy.optimize import minimize

    cols = np.flatnonzero(allowed | (q0 > 0))
    if len(cols) == 1:
        return q0
    V = U[:, cols]
    k = len(cols)

    def negent(z: np.ndarray) -> tuple[float, np.ndarray]:
        z = np.clip(z, 1e-300, None)
        return float(np.sum(z * np.log(z))), np.log(z) + 1.0

    start = 0.999 * q0[cols] + 0.001 / k  # off the boundary, where log is finite
    res = minimize(negent, start, jac=True, method="SLSQP", bounds=[(0, 1)] * k,
                   constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1.0,
                                 "jac": lambda z: np.ones((1, k))},
                                {"type": "ineq", "fun": lambda z: bound - V @ z,
                                 "jac": lambda z: -V}],
                   options={"ftol": 1e-15, "maxiter": 500})
    z = np.clip(res.x, 0, None)
    z /= z.sum()
    if not res.success or np.max(V @ z) > bound + 1e-9:
        return q0  # still an equilibrium, though maybe not the maximum-entropy one
    q = np.zeros_like(q0)
    q[cols] = z
    return q
