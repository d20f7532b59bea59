"""The two scaling-law forms, fitted in log space with log-sum-exp (Hoffmann et al. 2022, §3.3).

    power:       L(N)    = E + A / N^alpha
    chinchilla:  L(N, D) = E + A / N^alpha + B / D^beta

Parameters are optimized as theta = (e, a, alpha[, b, beta]) with E = exp(e),
A = exp(a), B = exp(b), so E, A, B stay positive and

    log L = LSE(a - alpha log N, b - beta log D, e)

(Hoffmann et al. 2022, eq. (10), appendix D.2). theta's order puts the power
form's parameters first, so both forms share one code path.

The objective is sum_i w_i Huber_delta(log L_hat_i - log L_i) (Hoffmann et al.
use delta = 1e-3 and sum over points), divided here by delta: the minimizer is
unchanged, but the value and gradient are O(number of points) instead of
O(delta * number of points). Besiroglu et al. 2024 traced Hoffmann et al.'s
unconverged estimates to exactly this: with a tiny loss scale, L-BFGS's
default tolerances stop the optimizer early.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Form:
    """name; theta: optimizer coordinates; params: public names, same order."""

    name: str
    theta: tuple[str, ...]
    params: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.theta)


POWER = Form("power", ("e", "a", "alpha"), ("E", "A", "alpha"))
CHINCHILLA = Form("chinchilla", ("e", "a", "alpha", "b", "beta"), ("E", "A", "alpha", "B", "beta"))
FORMS = {"power": POWER, "chinchilla": CHINCHILLA}

# Starting grid of Hoffmann et al. 2022 (appendix D.2), used as is by Besiroglu et
# al. 2024 (their notebook: alpha, beta in 0..2 by 0.5, e in -1..1 by 0.5, a, b in
# 0..25 by 5): 5 * 5 * 5 * 6 * 6 = 4,500 starts for the chinchilla form.
HOFFMANN_GRID: dict[str, np.ndarray] = {
    "e": np.arange(-1.0, 1.01, 0.5),
    "a": np.arange(0.0, 25.1, 5.0),
    "alpha": np.arange(0.0, 2.01, 0.5),
    "b": np.arange(0.0, 25.1, 5.0),
    "beta": np.arange(0.0, 2.01, 0.5),
}
# The power form has 3 parameters, so the same budget buys a finer grid.
POWER_GRID: dict[str, np.ndarray] = {
    "e": np.arange(-1.0, 1.01, 0.25),
    "a": np.arange(0.0, 25.1, 2.5),
    "alpha": np.arange(0.0, 2.01, 0.1),
}


def default_grid(form: Form) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in (HOFFMANN_GRID if form is CHINCHILLA else POWER_GRID).items()}


def grid_points(form: Form, grid: dict[str, np.ndarray]) -> np.ndarray:
    """All combinations of the grid's axes: (starts, P), columns in theta order."""
    axes = [np.asarray(grid[name], dtype=float) for name in form.theta]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


def log_model(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray | None) -> np.ndarray:
    """log L_hat for each parameter row: theta (S, P), log_n, log_d (n,) -> (S, n)."""
    theta = np.atleast_2d(theta)
    terms = [np.broadcast_to(theta[:, 0:1], (theta.shape[0], log_n.size)),
             theta[:, 1:2] - theta[:, 2:3] * log_n]
    if theta.shape[1] == 5:
        terms.append(theta[:, 3:4] - theta[:, 4:5] * log_d)
    return np.logaddexp.reduce(np.stack(terms), axis=0)


def huber_objective(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray | None,
                    log_loss: np.ndarray, weights: np.ndarray | float, delta: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Objective / delta and its gradient for S parameter rows at once.

    theta: (S, P); log_n, log_d: (n,); log_loss: (n,), or (S, n) for one data set per
    row (residual-bootstrap replicates); weights: scalar, (n,) or (S, n) (pairs-bootstrap
    replicates are point counts). Returns f (S,) and g (S, P).
    """
    e = theta[:, 0:1]
    u1 = theta[:, 1:2] - theta[:, 2:3] * log_n
    chinchilla = theta.shape[1] == 5
    m = np.maximum(u1, e)
    if chinchilla:
        u2 = theta[:, 3:4] - theta[:, 4:5] * log_d
        np.maximum(m, u2, out=m)
    # In place from here: these arrays are (S, n), the whole cost of a batched fit.
    z1 = np.exp(np.subtract(u1, m, out=u1), out=u1)
    z3 = np.exp(e - m)
    total = z1 + z3
    if chinchilla:
        z2 = np.exp(np.subtract(u2, m, out=u2), out=u2)
        total += z2
    r = np.log(total)
    r += m
    r -= log_loss  # residual in log space
    # psi = d(Huber/delta)/dr = clip(r/delta, -1, 1), and Huber/delta = psi (r - delta psi / 2).
    psi = np.multiply(r, 1.0 / delta, out=m)
    np.clip(psi, -1.0, 1.0, out=psi)
    h = psi * delta
    h *= -0.5
    h += r
    h *= psi
    f = (h * weights).sum(axis=1) if np.ndim(weights) else h.sum(axis=1) * weights
    wpsi = np.divide(psi, total, out=psi)  # softmax denominator folded in
    if np.ndim(weights):
        wpsi *= weights
    g = np.empty(theta.shape)
    g[:, 0] = np.einsum("sn,sn->s", wpsi, z3)
    t1 = np.multiply(wpsi, z1, out=z1)
    g[:, 1] = t1.sum(axis=1)
    g[:, 2] = -(t1 @ log_n)
    if chinchilla:
        t2 = np.multiply(wpsi, z2, out=z2)
        g[:, 3] = t2.sum(axis=1)
        g[:, 4] = -(t2 @ log_d)
    if not np.ndim(weights):
        g *= weights
    return f, g


def theta_to_params(form: Form, theta: np.ndarray) -> dict[str, np.ndarray]:
    """theta (..., P) -> public parameters, each (...,): E, A, alpha[, B, beta]."""
    theta = np.asarray(theta, dtype=float)
    out = {"E": np.exp(theta[..., 0]), "A": np.exp(theta[..., 1]), "alpha": theta[..., 2]}
    if form is CHINCHILLA:
        out["B"] = np.exp(theta[..., 3])
        out["beta"] = theta[..., 4]
    return out


def params_to_theta(form: Form, params: dict[str, float]) -> np.ndarray:
    """Public parameters -> theta (P,); raises ValueError naming a missing or bad one."""
    missing = [p for p in form.params if p not in params]
    if missing:
        raise ValueError(f"form={form.name!r} needs parameters {list(form.params)}; "
                         f"missing {missing}")
    for p in ("E", "A", "B"):
        if p in form.params and not params[p] > 0:
            raise ValueError(f"{p}={params[p]!r} must be > 0 (it enters as log {p})")
    theta = [np.log(params["E"]), np.log(params["A"]), params["alpha"]]
    if form is CHINCHILLA:
        theta += [np.log(params["B"]), params["beta"]]
    return np.array(theta, dtype=float)


def compute_optimal(theta: np.ndarray, compute: np.ndarray) -> dict[str, np.ndarray]:
    """Compute-optimal allocation under C = 6 N D (Hoffmann et al. 2022, eq. (4)).

    N_opt(C) = G (C/6)^a, D_opt(C) = G^-1 (C/6)^b with a = beta / (alpha + beta),
    b = alpha / (alpha + beta), G = (alpha A / (beta B))^(1 / (alpha + beta)).
    theta: (..., 5) chinchilla parameters; compute: (M,). Returns arrays of
    shape (..., M) for N, D, tokens_per_parameter and loss, and (...,) for a, b.
    NaN where alpha or beta <= 0 (no interior optimum).
    """
    theta = np.asarray(theta, dtype=float)
    e, a_log, alpha, b_log, beta = (theta[..., i] for i in range(5))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        valid = (alpha > 0) & (beta > 0)
        s = np.where(valid, alpha + beta, np.nan)
        exp_a = beta / s
        exp_b = alpha / s
        log_g = (np.log(np.where(valid, alpha, np.nan)) + a_log
                 - np.log(np.where(valid, beta, np.nan)) - b_log) / s
        log_c6 = np.log(np.asarray(compute, dtype=float) / 6.0)
        log_n = log_g[..., None] + exp_a[..., None] * log_c6
        log_d = log_c6 - log_n
        loss = (np.exp(e)[..., None] + np.exp(a_log[..., None] - alpha[..., None] * log_n)
                + np.exp(b_log[..., None] - beta[..., None] * log_d))
        return {"N": np.exp(log_n), "D": np.exp(log_d),
                "tokens_per_parameter": np.exp(log_d - log_n), "loss": loss,
                "a": exp_a, "b": exp_b}
