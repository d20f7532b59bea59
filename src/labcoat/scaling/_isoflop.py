"""Approach 2 of Hoffmann et al. 2022: isoFLOP parabolas.

For each compute budget C, fit a parabola to loss against log N over the
models trained with that compute, take its vertex as N_opt(C), then regress
log N_opt on log C: N_opt ~ C^a, and D_opt = C / (6 N_opt) ~ C^b.

Known bias (measured in tests/scaling/test_isoflop.py; described in detail by
"Problems with Chinchilla Approach 2: Systematic Biases in IsoFLOP Parabola
Fits", arXiv:2603.22339). At fixed C the Chinchilla form is, in x = log N,
E + A e^(-alpha x) + B' e^(beta x): a parabola only to second order, and
asymmetric unless alpha = beta. So the vertex of a fitted parabola sits off the
true minimum, by an amount that grows with the width of the sampled window in
log N and with its off-centering. When every budget is sampled the same way
around its optimum the offset is the same for all budgets and only the
intercept is biased; when the windows sit differently around the optimum at
different budgets (e.g. one grid of model sizes for all budgets) the offset
drifts with C and the exponent a is biased too. Besiroglu et al. 2024 compare
approach 3 with approaches 1 and 2 and use approach 2's a ~ 0.5 as the check.
Prefer `fit` (approach 3) when the form is credible; use this as a check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from labcoat.scaling._bootstrap import percentile_interval
from labcoat.scaling._checks import (
    ScalingWarning,
    check_ci,
    check_seed,
    positive_array,
    same_length,
)
from labcoat.stats import Interval


@dataclass(frozen=True)
class IsoFlopBudget:
    """One isoFLOP profile: its compute C, the parabola's vertex (N_opt, D_opt =
    C / (6 N_opt), loss_opt), its curvature (d^2 loss / d (ln N)^2), how many
    points it had, and whether the vertex lies inside the sampled range of N."""

    C: float
    N_opt: float
    D_opt: float
    loss_opt: float
    curvature: float
    points: int
    inside: bool


@dataclass(frozen=True)
class IsoFlopFit:
    """Approach-2 result. a, b: exponents of N_opt ~ C^a and D_opt ~ C^b; budgets:
    the profiles used (C ascending); intervals: "a", "b" (bootstrap resampling
    points within each budget; empty with bootstrap=0); warnings."""

    a: float
    b: float
    log_n_intercept: float
    budgets: tuple[IsoFlopBudget, ...]
    intervals: dict[str, Interval]
    warnings: tuple[ScalingWarning, ...] = field(default=())

    def N_opt(self, C: float | Sequence[float] | np.ndarray) -> np.ndarray:  # noqa: N802
        """Compute-optimal parameters at compute C (FLOPs): (M,) -> (M,)."""
        c = positive_array("C", C)
        return np.exp(self.log_n_intercept + self.a * np.log(c))

    def D_opt(self, C: float | Sequence[float] | np.ndarray) -> np.ndarray:  # noqa: N802
        """Compute-optimal tokens at compute C, D = C / (6 N_opt): (M,) -> (M,)."""
        c = positive_array("C", C)
        return c / (6.0 * self.N_opt(c))


def isoflop_fit(N: Sequence[float] | np.ndarray, loss: Sequence[float] | np.ndarray, *,
                C: Sequence[float] | np.ndarray | None = None,
                D: Sequence[float] | np.ndarray | None = None, rtol: float = 0.05,
                bootstrap: int = 1000, seed: int | np.random.Generator = 0,
                ci: float = 0.95) -> IsoFlopFit:
    """Fit isoFLOP parabolas and the power laws of their vertices.

    N, loss: (n,) model sizes and final losses. C: (n,) training compute of
    each point; without it C = 6 N D from D (n,) tokens. Points whose C agree
    within `rtol` (relative) form one budget; budgets need >= 3 distinct N.
    bootstrap: replicates resampling points within each budget (0: none);
    seed: int or numpy Generator, the only source of randomness.
    """
    n_arr = positive_array("N", N)
    loss_arr = positive_array("loss", loss)
    if C is None and D is None:
        raise ValueError("isoflop_fit needs the compute of each point: give C= (FLOPs) or "
                         "D= (tokens, so that C = 6 N D)")
    if C is not None:
        c_arr = positive_array("C", C)
        same_length(N=n_arr, loss=loss_arr, C=c_arr)
    else:
        d_arr = positive_array("D", D)
        same_length(N=n_arr, loss=loss_arr, D=d_arr)
        c_arr = 6.0 * n_arr * d_arr
    if not 0 < rtol < 1:
        raise ValueError(f"rtol={rtol!r} must be in (0, 1): the relative tolerance within "
                         "which two points share a compute budget, e.g. 0.05")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or bootstrap < 0:
        raise ValueError(f"bootstrap={bootstrap!r} must be a non-negative int")
    check_ci(ci)
    rng = check_seed(seed)

    groups = _budgets(c_arr, rtol)
    found: list[ScalingWarning] = []
    used: list[np.ndarray] = []
    for idx in groups:
        if np.unique(n_arr[idx]).size < 3:
            found.append(ScalingWarning(
                f"budget C~{np.exp(np.mean(np.log(c_arr[idx]))):.3g} has "
                f"{np.unique(n_arr[idx]).size} distinct N (< 3): no parabola; skipped",
                kind="few-sizes"))
            continue
        used.append(idx)
    x = np.log(n_arr)
    budgets: list[IsoFlopBudget] = []
    vertices = []
    for idx in used:
        coef = _parabola(x[idx], loss_arr[idx], np.ones((1, idx.size)))[0]
        c_budget = float(np.exp(np.mean(np.log(c_arr[idx]))))
        if not coef[2] > 0:
            found.append(ScalingWarning(
                f"the parabola at C={c_budget:.3g} opens downward (no minimum): the "
                "profile does not bracket an optimum; skipped", kind="unidentified"))
            continue
        x_opt = -coef[1] / (2 * coef[2])
        inside = bool(x[idx].min() <= x_opt <= x[idx].max())
        if not inside:
            found.append(ScalingWarning(
                f"the vertex at C={c_budget:.3g} (N={math.exp(x_opt):.3g}) lies outside the "
                f"sampled N ({n_arr[idx].min():.3g}..{n_arr[idx].max():.3g}): it is an "
                "extrapolation; sample larger/smaller models at this budget",
                kind="far-extrapolation"))
        loss_opt = coef[0] + coef[1] * x_opt + coef[2] * x_opt**2
        budgets.append(IsoFlopBudget(
            C=c_budget, N_opt=math.exp(x_opt), D_opt=c_budget / (6 * math.exp(x_opt)),
            loss_opt=float(loss_opt), curvature=float(2 * coef[2]), points=int(idx.size),
            inside=inside))
        vertices.append((idx, c_budget))
    if len(budgets) < 2:
        raise ValueError(f"only {len(budgets)} usable compute budget(s): approach 2 needs at "
                         "least 2 (better 4+) budgets, each with >= 3 model sizes whose loss "
                         "curve has a minimum")
    if len(budgets) < 4:
        found.append(ScalingWarning(
            f"only {len(budgets)} compute budgets: the exponent rests on very few vertices",
            kind="few-sizes"))
    log_c = np.log([b.C for b in budgets])
    log_nopt = np.log([b.N_opt for b in budgets])
    a, intercept = np.polyfit(log_c, log_nopt, 1)
    b_exp = 1.0 - a  # D_opt = C / (6 N_opt)
    intervals: dict[str, Interval] = {}
    if bootstrap:
        reps = _bootstrap_vertices(x, loss_arr, [v[0] for v in vertices], bootstrap, rng)
        ok = np.isfinite(reps).all(axis=1)
        if ok.mean() < 0.99:
            found.append(ScalingWarning(
                f"{100 * (1 - ok.mean()):.1f}% of bootstrap replicates had a budget without "
                "a minimum; intervals use the rest", kind="bootstrap"))
        lc = log_c - log_c.mean()
        slopes = (reps[ok] - reps[ok].mean(axis=1, keepdims=True)) @ lc / (lc @ lc)
        intervals["a"] = percentile_interval(slopes, float(a), ci, len(budgets))
        intervals["b"] = percentile_interval(1.0 - slopes, float(b_exp), ci, len(budgets))
    order = np.argsort(log_c)
    return IsoFlopFit(a=float(a), b=float(b_exp), log_n_intercept=float(intercept),
                      budgets=tuple(budgets[i] for i in order), intervals=intervals,
                      warnings=tuple(found))


def _budgets(c: np.ndarray, rtol: float) -> list[np.ndarray]:
    """Points grouped by compute: sorted C within rtol of its group's first member."""
    order = np.argsort(c, kind="stable")
    groups: list[list[int]] = []
    start = None
    for i in order:
        if start is None or c[i] > start * (1 + rtol):
            groups.append([])
            start = c[i]
        groups[-1].append(int(i))
    return [np.array(g) for g in groups]


def _parabola(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted least-squares parabolas y ~ c0 + c1 x + c2 x^2, one per weight row.

    x, y: (m,); w: (R, m) -> (R, 3). x is centred for conditioning, then the
    coefficients are mapped back. Singular systems give NaN.
    """
    mu = x.mean()
    xc = x - mu
    X = np.stack([np.ones_like(xc), xc, xc * xc], axis=1)  # (m, 3)
    xtwx = np.einsum("rm,mi,mj->rij", w, X, X)
    xtwy = np.einsum("rm,mi,m->ri", w, X, y)
    with np.errstate(invalid="ignore"):
        det = np.linalg.det(xtwx)
        singular = ~(np.abs(det) > 1e-12 * np.abs(xtwx).max(axis=(1, 2)) ** 3)
        xtwx[singular] = np.eye(3)
        k = np.linalg.solve(xtwx, xtwy[..., None])[..., 0]
    k[singular] = np.nan
    c0 = k[:, 0] - k[:, 1] * mu + k[:, 2] * mu * mu
    c1 = k[:, 1] - 2 * k[:, 2] * mu
    return np.stack([c0, c1, k[:, 2]], axis=1)


def _bootstrap_vertices(x: np.ndarray, y: np.ndarray, groups: list[np.ndarray], reps: int,
                        rng: np.random.Generator) -> np.ndarray:
    """(reps, budgets) log N_opt from resampling points within each budget (NaN: no minimum)."""
    out = np.empty((reps, len(groups)))
    for j, idx in enumerate(groups):
        m = idx.size
        w = rng.multinomial(m, np.full(m, 1.0 / m), size=reps).astype(float)
        coef = _parabola(x[idx], y[idx], w)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, j] = np.where(coef[:, 2] > 0, -coef[:, 1] / (2 * coef[:, 2]), np.nan)
    return out
