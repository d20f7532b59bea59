"""L-BFGS on a batch of independent problems at once (numpy, no Python loop over problems).

Scaling-law fits are small (3-5 parameters, tens to hundreds of points) but are
solved thousands of times: once per starting point of a grid (Hoffmann et al.
2022 start L-BFGS from a grid of 4,500 points; Besiroglu et al. 2024 do the
same) and once per bootstrap replicate. A scipy call per problem costs ~40 ms
of Python overhead and small-array arithmetic; here every problem of the batch
takes the same iteration together, so each iteration is one vectorized
objective evaluation over the whole (problems, points) array.

The algorithm is textbook L-BFGS (Nocedal & Wright 2006, Algorithm 7.4 for the
two-loop recursion, 7.5 for the overall method) with a backtracking Armijo line
search run for all problems at once (problems that accept a step drop out of
the search). Curvature pairs with s'y <= 0 are stored with rho = 0, which makes
the two-loop recursion skip them, so no per-problem bookkeeping is needed.
Problems that have converged (small gradient or no relative progress) are
frozen and no longer evaluated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# fun(x, rows) -> (f, g): objective values (k,) and gradients (k, P) of the
# problems numbered `rows` (k,) at points x (k, P).
Objective = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class BatchResult:
    """x: (S, P) final points; f: (S,) values; g: (S, P) gradients; iterations: (S,)
    iterations used; converged: (S,) True where the gradient or progress test
    stopped the problem (False: the iteration budget ran out or the line search failed)."""

    x: np.ndarray
    f: np.ndarray
    g: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray


def minimize_batch(fun: Objective, x0: np.ndarray, *, max_iter: int = 500, memory: int = 10,
                   gtol: float = 1e-8, ftol: float = 1e-13, active: np.ndarray | None = None,
                   max_backtracks: int = 40) -> BatchResult:
    """Minimize S independent problems from x0 (S, P) by L-BFGS, all at once.

    gtol: stop a problem when max |g| <= gtol. ftol: stop when an iteration
    lowers f by less than ftol * max(|f|, 1) (scipy's L-BFGS-B `ftol` rule).
    active: (S,) bool, the problems to run (others are returned as evaluated at x0).
    """
    x = np.array(x0, dtype=float, copy=True)
    S, P = x.shape
    rows_all = np.arange(S)
    f, g = fun(x, rows_all)
    f = np.asarray(f, dtype=float).copy()
    g = np.asarray(g, dtype=float).copy()
    s_hist = np.zeros((S, memory, P))
    y_hist = np.zeros((S, memory, P))
    rho = np.zeros((S, memory))
    # Every running problem stores one pair per iteration (rho = 0 if rejected), so
    # all share the ring position; `stored` counts each problem's usable pairs.
    slot = 0
    stored = np.zeros(S, dtype=int)
    iterations = np.zeros(S, dtype=int)
    converged = np.abs(g).max(axis=1) <= gtol
    running = ~converged if active is None else (np.asarray(active, bool) & ~converged)
    for _ in range(max_iter):
        rows = np.flatnonzero(running)
        if rows.size == 0:
            break
        d = -_two_loop(g[rows], s_hist[rows], y_hist[rows], rho[rows], slot, stored[rows])
        slope = np.einsum("kp,kp->k", g[rows], d)
        bad = ~(slope < 0) | ~np.isfinite(slope)
        if bad.any():  # not a descent direction: restart from steepest descent
            d[bad] = -g[rows[bad]]
            slope[bad] = -np.einsum("kp,kp->k", g[rows[bad]], g[rows[bad]])
            rho[rows[bad]] = 0.0
            stored[rows[bad]] = 0
        # First step of a fresh memory: a unit-length move (as scipy's L-BFGS-B does).
        fresh = stored[rows] == 0
        t = np.ones(rows.size)
        t[fresh] = np.minimum(1.0, 1.0 / np.maximum(np.abs(d[fresh]).sum(axis=1), 1e-300))
        x_new, f_new, g_new, ok = _armijo(fun, rows, x[rows], f[rows], d, slope, t,
                                          max_backtracks)
        iterations[rows] += 1
        # Problems whose line search failed stop here (at their last good point).
        failed = rows[~ok]
        running[failed] = False
        rows, x_new, f_new, g_new = rows[ok], x_new[ok], f_new[ok], g_new[ok]
        s = x_new - x[rows]
        yv = g_new - g[rows]
        sy = np.einsum("kp,kp->k", s, yv)
        s_hist[rows, slot] = s
        y_hist[rows, slot] = yv
        curved = sy > 1e-12 * np.sqrt(np.einsum("kp,kp->k", s, s)
                                      * np.einsum("kp,kp->k", yv, yv))
        rho[rows, slot] = np.where(curved, 1.0 / np.where(curved, sy, 1.0), 0.0)
        slot = (slot + 1) % memory
        stored[rows] = np.minimum(stored[rows] + 1, memory)
        progress = f[rows] - f_new
        x[rows], f[rows], g[rows] = x_new, f_new, g_new
        done = (np.abs(g_new).max(axis=1) <= gtol) | (
            progress <= ftol * np.maximum(np.maximum(np.abs(f_new), np.abs(f_new + progress)),
                                          1.0))
        converged[rows[done]] = True
        running[rows[done]] = False
    return BatchResult(x=x, f=f, g=g, iterations=iterations, converged=converged)


def _two_loop(g: np.ndarray, s_hist: np.ndarray, y_hist: np.ndarray, rho: np.ndarray,
              slot: int, stored: np.ndarray) -> np.ndarray:
    """H g for each problem: g (k, P), histories (k, m, P), rho (k, m) -> (k, P).

    Slots are visited newest to oldest, then back; unused or rejected slots
    have rho = 0 and change nothing.
    """
    k, m, _ = s_hist.shape
    q = g.copy()
    alpha = np.zeros((k, m))
    order = [(slot - 1 - j) % m for j in range(m)]  # newest first
    for j, pos in enumerate(order):
        r = np.where(j < stored, rho[:, pos], 0.0)
        a = r * np.einsum("kp,kp->k", s_hist[:, pos], q)
        alpha[:, j] = a
        q -= a[:, None] * y_hist[:, pos]
    # Initial Hessian scaling gamma = s'y / y'y of the newest accepted pair (Nocedal &
    # Wright eq. 7.20); 1 where there is none.
    gamma = np.ones(k)
    found = np.zeros(k, dtype=bool)
    for j, pos in enumerate(order):
        r = rho[:, pos]
        pick = (j < stored) & (r > 0) & ~found
        if pick.any():
            yy = np.einsum("kp,kp->k", y_hist[:, pos], y_hist[:, pos])
            gamma = np.where(pick, 1.0 / np.where(pick, r * yy, 1.0), gamma)
            found |= pick
    q *= gamma[:, None]
    for j in reversed(range(m)):
        pos = order[j]
        r = np.where(j < stored, rho[:, pos], 0.0)
        b = r * np.einsum("kp,kp->k", y_hist[:, pos], q)
        q += (alpha[:, j] - b)[:, None] * s_hist[:, pos]
    return q


def _armijo(fun: Objective, rows: np.ndarray, x: np.ndarray, f: np.ndarray, d: np.ndarray,
            slope: np.ndarray, t: np.ndarray, max_backtracks: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Backtracking line search, all problems at once: halve t until
    f(x + t d) <= f + 1e-4 t slope (Nocedal & Wright 2006, Algorithm 3.1).

    Returns the new points, values, gradients and (k,) whether a step was found.
    """
    k, P = x.shape
    x_new = x.copy()
    f_new = f.copy()
    g_new = np.zeros((k, P))
    ok = np.zeros(k, dtype=bool)
    pending = np.arange(k)
    for _ in range(max_backtracks):
        if pending.size == 0:
            break
        trial = x[pending] + t[pending, None] * d[pending]
        ft, gt = fun(trial, rows[pending])
        tp, sp = t[pending], slope[pending]
        accept = np.isfinite(ft) & (ft <= f[pending] + 1e-4 * tp * sp)
        acc = pending[accept]
        x_new[acc], f_new[acc], g_new[acc] = trial[accept], ft[accept], gt[accept]
        ok[acc] = True
        # Next trial: the minimum of the quadratic through f, the slope and f(t),
        # kept within [0.1 t, 0.5 t] (Nocedal & Wright 2006, eq. 3.57 and §3.5).
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            curv = ft - f[pending] - sp * tp
            t_quad = -sp * tp * tp / (2.0 * curv)
        t_next = np.where(np.isfinite(t_quad) & (curv > 0),
                          np.clip(t_quad, 0.1 * tp, 0.5 * tp), 0.5 * tp)
        t[pending] = t_next
        pending = pending[~accept]
    return x_new, f_new, g_new, ok
