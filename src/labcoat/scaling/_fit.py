"""Fitting L(N) = E + A/N^alpha or L(N, D) = E + A/N^alpha + B/D^beta (Hoffmann et al. 2022,
approach 3), with bootstrap intervals and prediction intervals.

The search, measured in benchmarks/scaling_fit.py:
1. Evaluate the Huber objective at every point of the starting grid in one
   vectorized call (Hoffmann et al.'s 4,500-point grid for the chinchilla form).
2. Run L-BFGS from the `starts` best grid points (default 256), all at once
   (`_lbfgs.minimize_batch`: one objective evaluation per iteration for the
   whole batch). On Besiroglu et al.'s data and 14 identifiable synthetic data
   sets, the best 64 grid points already reached the same optimum as running
   all 4,500; `starts=None` runs every grid point.
3. Polish the best distinct candidates with scipy's L-BFGS-B at tight
   tolerances; its gradient at the result is the convergence check.
4. Check: the gradient is small relative to its per-point terms; several
   starts reach the best objective; those that do agree on the extrapolation
   to 10x the largest fitted scale; the estimate lies inside the starting
   grid; every term contributes at some data point.

Why not one scipy call per start: ~40 ms each, so 4,500 starts take minutes.
Why not fewer grid points: the objective has many local optima (Besiroglu et
al. 2024 found Hoffmann et al.'s estimates were not its minimum at all).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize

from labcoat.scaling._bootstrap import (
    INTERVAL_METHODS,
    noise_pool,
    percentile_interval,
    prediction_noise,
    refit,
    resample_weights,
    residual_data,
    residual_noise,
    stretch,
    stretch_bounds,
)
from labcoat.scaling._checks import (
    MAX_EXTRAPOLATION,
    ScalingWarning,
    check_ci,
    check_range,
    check_seed,
    positive_array,
    same_length,
)
from labcoat.scaling._forms import (
    CHINCHILLA,
    FORMS,
    POWER,
    Form,
    compute_optimal,
    default_grid,
    grid_points,
    huber_objective,
    log_model,
    theta_to_params,
)
from labcoat.scaling._lbfgs import minimize_batch
from labcoat.stats import Interval

ArrayLike = Sequence[float] | np.ndarray | float

# Relative gradient at which the polished estimate counts as converged: the
# largest |dObjective/dtheta_j| divided by sum_i w_i |d r_i / d theta_j| (the
# gradient if every residual pushed the same way).
GRADIENT_RTOL = 1e-6
# Starts whose objective is within this relative distance of the best "reach" it.
OBJECTIVE_RTOL = 1e-6
# Solutions at the best objective that extrapolate (to 10x the largest scale)
# further apart than this, in log loss, signal an unidentified fit.
AGREEMENT_ATOL = 1e-3
# A term below this share of the predicted loss at every data point is unidentified.
NEGLIGIBLE_SHARE = 1e-3
# Log residual SD above which the Chinchilla form's E, A and alpha intervals were measured
# to under-cover (92.8% at 2%, 86-92% at 3% noise on 8 sizes x 5 budgets; 93.5-94.5% at 1%;
# benchmarks/scaling_coverage.py): such a fit says so.
NOISY_SCATTER = 0.02


@dataclass(frozen=True)
class FitDiagnostics:
    """How the optimum was found and how much to trust it.

    starts_evaluated: grid points whose objective was computed.
    starts_optimized: L-BFGS runs (the best grid points by objective).
    starts_at_best: runs that ended within 1e-6 (relative) of the best objective.
    objective: sum of Huber_delta(log residual) at the estimate (not divided by delta).
    gradient: largest relative gradient at the estimate (see GRADIENT_RTOL).
    converged: the gradient test passed.
    optimizer_message: scipy L-BFGS-B's message for the final polish (its
        "ABNORMAL_TERMINATION_IN_LNSRCH" is common at a Huber optimum, where the
        curvature jumps; the gradient test decides).
    bootstrap_converged: fraction of replicates whose refit converged.
    seconds_fit, seconds_bootstrap: wall time of the search and of the bootstrap.
    """

    starts_evaluated: int
    starts_optimized: int
    starts_at_best: int
    objective: float
    gradient: float
    converged: bool
    optimizer_message: str
    bootstrap_converged: float
    seconds_fit: float
    seconds_bootstrap: float


@dataclass(frozen=True, eq=False)
class ScalingFit:
    """A fitted scaling law, its bootstrap and how it was obtained. Build with `fit`.

    form: "power" (L = E + A/N^alpha) or "chinchilla" (L = E + A/N^alpha + B/D^beta).
    params: the estimate: E, A, alpha (and B, beta).
    intervals: name -> Interval (bootstrap, level `ci`, see `interval_method`) for every
        parameter and, for the chinchilla form, the compute-optimal exponents
        "a" = beta/(alpha+beta) (N_opt ~ C^a) and "b" = alpha/(alpha+beta)
        (D_opt ~ C^b). Empty when bootstrap=0.
    N, D, loss: (n,) the fitted points (D None for the power form).
    residuals: (n,) log(loss) - log(prediction) at the fitted points.
    residual_scale: RMS of `residuals` with n - p degrees of freedom (log space).
    samples: (R, P) bootstrap replicates of the parameters in the optimizer's
        coordinates (log E, log A, alpha, log B, beta); see `sample_params`.
    noise: (R,) log-space noise added to each replicate's prediction (predict_interval).
    warnings: what qualifies this fit (also emitted with `warnings.warn`).
    interval_method: how replicates were made: "residual" (fixed design, resampled
        log residuals; percentile intervals stretched by t_{n-p} / z) or "pairs"
        (points or groups resampled; percentile intervals). See `fit`.
    """

    form: str
    params: dict[str, float]
    intervals: dict[str, Interval]
    N: np.ndarray
    D: np.ndarray | None
    loss: np.ndarray
    residuals: np.ndarray
    residual_scale: float
    huber_delta: float
    ci: float
    bootstrap: int
    seed: int | None
    diagnostics: FitDiagnostics
    theta: np.ndarray
    samples: np.ndarray
    noise: np.ndarray
    warnings: tuple[ScalingWarning, ...] = field(default=())
    interval_method: str = "residual"

    # --- predictions --------------------------------------------------------

    def predict(self, N: ArrayLike, D: ArrayLike | None = None) -> np.ndarray:
        """Predicted loss at N (and D): arrays broadcast together -> the broadcast shape."""
        log_n, log_d, shape = self._targets(N, D)
        return np.exp(log_model(self.theta, log_n, log_d)[0]).reshape(shape)

    def predict_interval(self, N: ArrayLike, D: ArrayLike | None = None, *, ci: float = 0.95,
                         noise: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(point, low, high) at N (and D), each of the broadcast shape.

        point is the fitted curve; low and high are quantiles over the
        bootstrap replicates' predictions, plus (noise=True) a resampled log
        residual, so the band is where a new run's loss should land with
        probability `ci`. noise=False gives the band of the curve itself.
        Quantile levels as for `intervals` (see `interval_method`).
        Emits a ScalingWarning (far-extrapolation) beyond 10x the fitted scales.
        """
        check_ci(ci)
        self._warn_far(N, D)
        return self._interval(N, D, ci=ci, noise=noise)

    def allocation(self, C: float, *, ci: float | None = None) -> dict[str, Interval]:
        """Compute-optimal allocation at training compute C (FLOPs, C = 6 N D).

        Returns Intervals (bootstrap quantiles, level `ci`, default the fit's)
        for N (parameters), D (tokens), tokens_per_parameter and loss at the
        optimum (Hoffmann et al. 2022, eq. (4)). Chinchilla form only.
        """
        if self.form != "chinchilla":
            raise ValueError("allocation() needs form='chinchilla' (a power law in N alone "
                             "says nothing about tokens); refit with D= and form='chinchilla'")
        compute = positive_array("C", C)
        if compute.size != 1:
            raise ValueError(f"C must be one compute budget; got {compute.size} values")
        level = self.ci if ci is None else ci
        check_ci(level)
        point = compute_optimal(self.theta, compute)
        reps = compute_optimal(self.samples, compute) if self.samples.size else None
        out = {}
        for key in ("N", "D", "tokens_per_parameter", "loss"):
            value = float(point[key][0])
            if reps is None:
                out[key] = Interval(point=value, low=math.nan, high=math.nan,
                                    n=self.N.size, ci=level)
            else:
                out[key] = percentile_interval(reps[key][:, 0], value, level, self.N.size,
                                               self._dof, log=True)
        return out

    def sample_params(self) -> dict[str, np.ndarray]:
        """The bootstrap replicates as public parameters: name -> (R,)."""
        return theta_to_params(FORMS[self.form], self.samples)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (for `labcoat scaling fit --json`)."""
        return {
            "form": self.form,
            "params": dict(self.params),
            "intervals": {k: {"point": v.point, "low": v.low, "high": v.high, "se": v.se}
                          for k, v in self.intervals.items()},
            "ci": self.ci,
            "n_points": int(self.N.size),
            "huber_delta": self.huber_delta,
            "bootstrap": self.bootstrap,
            "interval_method": self.interval_method,
            "seed": self.seed,
            "residual_scale": self.residual_scale,
            "range": {"N": [float(self.N.min()), float(self.N.max())],
                      **({"D": [float(self.D.min()), float(self.D.max())]}
                         if self.D is not None else {})},
            "diagnostics": dict(self.diagnostics.__dict__),
            "warnings": [{"kind": w.kind, "message": str(w)} for w in self.warnings],
        }

    # --- internals ------------------------------------------------------------

    @property
    def _dof(self) -> int | None:
        """Degrees of freedom of the interval stretch (None: plain percentiles)."""
        return _interval_dof(self.interval_method, self.N.size, FORMS[self.form].size)

    def _targets(self, N: ArrayLike, D: ArrayLike | None
                 ) -> tuple[np.ndarray, np.ndarray | None, tuple[int, ...]]:
        n_arr = np.asarray(N, dtype=float)
        if self.form == "power":
            if D is not None:
                raise ValueError("this is a power-law fit in N alone; call predict(N) "
                                 "without D, or refit with form='chinchilla'")
            _check_positive("N", n_arr)
            return np.log(n_arr).ravel(), None, n_arr.shape
        if D is None:
            raise ValueError("a chinchilla fit predicts L(N, D): give D (training tokens)")
        n_arr, d_arr = np.broadcast_arrays(n_arr, np.asarray(D, dtype=float))
        _check_positive("N", n_arr)
        _check_positive("D", d_arr)
        return np.log(n_arr).ravel(), np.log(d_arr).ravel(), n_arr.shape

    def _warn_far(self, N: ArrayLike, D: ArrayLike | None) -> None:
        for w in check_range(self.N, self.D, target_N=np.ravel(N),
                             target_D=None if D is None else np.ravel(D)):
            if w.kind == "far-extrapolation":
                warnings.warn(w, stacklevel=3)

    def _interval(self, N: ArrayLike, D: ArrayLike | None, *, ci: float, noise: bool
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.samples.shape[0] == 0:
            raise ValueError("this fit has no bootstrap replicates (bootstrap=0); refit with "
                             "bootstrap=1000 or more to get intervals")
        log_n, log_d, shape = self._targets(N, D)
        point = np.exp(log_model(self.theta, log_n, log_d)[0])
        low = np.empty(log_n.size)
        high = np.empty(log_n.size)
        reps = self.samples.shape[0]
        chunk = max(1, 2_000_000 // reps)  # bound memory to ~16 MB per block
        q = [(1 - ci) / 2, (1 + ci) / 2]
        factor = stretch(ci, self._dof)
        for s in range(0, log_n.size, chunk):
            block = log_model(self.samples, log_n[s:s + chunk],
                              None if log_d is None else log_d[s:s + chunk])
            if noise:
                block = block + self.noise[:, None]
            lo, hi = np.nanquantile(block, q, axis=0)
            if factor != 1.0:  # in log loss, about the fitted curve
                lo, hi = stretch_bounds(np.log(point[s:s + chunk]), lo, hi, factor)
            low[s:s + chunk], high[s:s + chunk] = np.exp(lo), np.exp(hi)
        return point.reshape(shape), low.reshape(shape), high.reshape(shape)


def fit(N: ArrayLike, D: ArrayLike | None = None, loss: ArrayLike | None = None, *,
        form: str | None = None, huber_delta: float = 1e-3, bootstrap: int = 4000,
        seed: int | np.random.Generator = 0, ci: float = 0.95,
        groups: Sequence[Any] | np.ndarray | None = None,
        grid: Mapping[str, Sequence[float]] | None = None, starts: int | None = 256,
        warn: bool = True, interval_method: str | None = None) -> ScalingFit:
    """Fit a scaling law in log space (Huber loss, L-BFGS from a grid) and bootstrap it.

    N: (n,) parameters; D: (n,) training tokens (chinchilla form); loss: (n,).
    form: "chinchilla" (L = E + A/N^alpha + B/D^beta) or "power" (L = E + A/N^alpha);
        None picks chinchilla when D is given, power otherwise.
    huber_delta: Huber threshold on log residuals (Hoffmann et al. 2022 use 1e-3;
        the objective sums over points).
    bootstrap: replicates for intervals (0: none). seed: int or numpy Generator,
        the only source of randomness (resampling and residual noise).
    ci: level of `intervals`.
    groups: (n,) labels of points that are not independent (e.g. the run each
        checkpoint came from); the bootstrap resamples whole groups ("pairs").
    interval_method: how bootstrap replicates are made (None: "residual", or
        "pairs" when groups are given).
        "residual": the design stays fixed; each replicate is the fitted curve
        plus log residuals drawn with replacement (the p closest to zero left
        out, the rest scaled to n - p degrees of freedom), refitted; percentile
        intervals stretched about the estimate by t_{n-p} / z (in log for E, A,
        B and predictions), so that for linear least squares they would be the
        Student-t intervals. On 8 sizes x 5 token budgets with 1-3% noise
        (benchmarks/scaling_coverage.py) its 95% intervals for B and beta cover
        93-97.5%, 0.99-1.18x as wide as the estimates' spread over data sets;
        A and alpha 93-94.5% at 1-2% noise. Where E is barely identified (3%
        noise) E, A and alpha cover only 86-92%, as with "pairs". It treats
        points as independent, so it does not take groups.
        "pairs": points (or whole groups) drawn with replacement, percentile
        interval; Besiroglu et al. 2024's method and labcoat's before 2026-12
        (same numbers as then). Needs no model of the noise or its correlation,
        but with few points it is too wide (B and beta: 98-100% coverage in 5 of
        the 6 cells above, 1.10-1.33x the spread).
    grid: starting values per optimizer coordinate ("e", "a", "alpha", "b",
        "beta"; E = exp(e), A = exp(a), B = exp(b)), replacing the default axes
        given (Hoffmann et al.'s grid).
    starts: how many of the best grid points L-BFGS starts from (None: all).
    warn: emit the fit's warnings (they are kept in `.warnings` either way).
    """
    started = time.perf_counter()
    form_obj = _form(form, D)
    n_arr = positive_array("N", N)
    loss_arr = positive_array("loss", loss)
    d_arr = positive_array("D", D, allow_none=True)
    if form_obj is POWER and d_arr is not None:
        raise ValueError("form='power' fits L(N) = E + A/N^alpha and takes no D; drop D= "
                         "or use form='chinchilla'")
    n = same_length(N=n_arr, D=d_arr, loss=loss_arr)
    if n <= form_obj.size:
        raise ValueError(f"form={form_obj.name!r} has {form_obj.size} parameters and needs "
                         f"at least {form_obj.size + 1} points; got {n}")
    if not (isinstance(huber_delta, int | float) and huber_delta > 0
            and math.isfinite(huber_delta)):
        raise ValueError(f"huber_delta={huber_delta!r} must be a positive number, e.g. 1e-3 "
                         "(Hoffmann et al. 2022)")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int | np.integer) \
            or bootstrap < 0:
        raise ValueError(f"bootstrap={bootstrap!r} must be a non-negative int (replicates; "
                         "0 for none, 4000 as in Besiroglu et al. 2024)")
    if starts is not None and (isinstance(starts, bool) or not isinstance(starts, int)
                               or starts < 1):
        raise ValueError(f"starts={starts!r} must be a positive int or None (all grid points)")
    check_ci(ci)
    rng = check_seed(seed)
    group_idx = _groups(groups, n)
    method = _interval_method(interval_method, group_idx)
    axes = _grid(form_obj, grid)

    log_n = np.log(n_arr)
    log_d = None if d_arr is None else np.log(d_arr)
    log_loss = np.log(loss_arr)
    theta, diag = _search(form_obj, log_n, log_d, log_loss, huber_delta, axes, starts)
    seconds_fit = time.perf_counter() - started

    started = time.perf_counter()
    residuals = log_loss - log_model(theta, log_n, log_d)[0]
    dof = max(n - form_obj.size, 1)
    residual_scale = float(np.sqrt(np.sum(residuals**2) / dof))
    samples = np.empty((0, form_obj.size))
    noise = np.empty(0)
    intervals: dict[str, Interval] = {}
    boot_converged = math.nan
    if bootstrap:
        if method == "pairs":
            weights = resample_weights(n, int(bootstrap), rng, group_idx)
            result = refit(form_obj, log_n, log_d, log_loss, theta, weights, huber_delta)
        else:
            pool = noise_pool(residuals, form_obj.size, huber_delta)
            data = residual_data(log_loss - residuals, pool, int(bootstrap), rng)
            result = refit(form_obj, log_n, log_d, data, theta, None, huber_delta)
        finite = np.isfinite(result.x).all(axis=1) & np.isfinite(result.f)
        boot_converged = float(np.mean(result.converged & finite))
        samples = result.x[finite]
        if method == "pairs":
            noise = residual_noise(residuals, form_obj.size, samples.shape[0], rng)
        else:
            noise = prediction_noise(pool, samples.shape[0], rng)
        intervals = _intervals(form_obj, theta, samples, ci, n,
                               _interval_dof(method, n, form_obj.size))
    seconds_boot = time.perf_counter() - started

    diagnostics = FitDiagnostics(
        starts_evaluated=diag["evaluated"], starts_optimized=diag["optimized"],
        starts_at_best=diag["at_best"], objective=diag["objective"] * huber_delta,
        gradient=diag["gradient"], converged=diag["converged"],
        optimizer_message=diag["message"], bootstrap_converged=boot_converged,
        seconds_fit=seconds_fit, seconds_bootstrap=seconds_boot)
    found = check_range(n_arr, d_arr)
    found += _fit_warnings(form_obj, theta, log_n, log_d, axes, diag, boot_converged)
    if intervals and form_obj.name == "chinchilla" and residual_scale > NOISY_SCATTER:
        found.append(ScalingWarning(
            f"the loss scatters {100 * residual_scale:.2g}% about the fit (log residual SD): "
            "at this noise the intervals of E, A and alpha under-cover (86-92% for a nominal "
            "95% at 3% noise on 8 sizes x 5 budgets, benchmarks/README.md); read them as too "
            "narrow, or add sizes and budgets", kind="noisy"))
    if warn:
        for w in found:
            warnings.warn(w, stacklevel=2)
    params = {k: float(v) for k, v in theta_to_params(form_obj, theta).items()}
    return ScalingFit(
        form=form_obj.name, params=params, intervals=intervals, N=n_arr, D=d_arr,
        loss=loss_arr, residuals=residuals, residual_scale=residual_scale,
        huber_delta=float(huber_delta), ci=ci, bootstrap=int(bootstrap),
        seed=seed if isinstance(seed, int) else None, diagnostics=diagnostics,
        theta=theta, samples=samples, noise=noise, warnings=tuple(found),
        interval_method=method)


# --- search -------------------------------------------------------------------


def _search(form: Form, log_n: np.ndarray, log_d: np.ndarray | None, log_loss: np.ndarray,
            delta: float, axes: dict[str, np.ndarray], starts: int | None
            ) -> tuple[np.ndarray, dict[str, Any]]:
    """Grid -> batched L-BFGS from the best `starts` -> scipy polish -> checks."""
    def fun(x: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        return huber_objective(x, log_n, log_d, log_loss, 1.0, delta)

    points = grid_points(form, axes)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        f0, _ = fun(points)
        f0 = np.where(np.isfinite(f0), f0, np.inf)
        chosen = np.argsort(f0, kind="stable")[: starts or points.shape[0]]
        batch = minimize_batch(fun, points[chosen], max_iter=200)
        # Starts still moving after 200 iterations are usually sliding down a
        # degenerate valley (E -> 0, an exponent -> 0); continue only those that
        # are within 10% of the best objective so far.
        best_f = np.nanmin(np.where(np.isfinite(batch.f), batch.f, np.nan))
        more = ~batch.converged & np.isfinite(batch.f) & (batch.f <= 1.1 * best_f + 1e-12)
        if more.any():
            again = minimize_batch(fun, batch.x, max_iter=1000, active=more)
            batch.x[more], batch.f[more], batch.g[more] = (again.x[more], again.f[more],
                                                          again.g[more])
            batch.converged[more] = again.converged[more]
    f = np.where(np.isfinite(batch.f) & np.isfinite(batch.x).all(axis=1), batch.f, np.inf)
    order = np.argsort(f, kind="stable")
    # Polish the best distinct candidates (up to 3) with scipy's L-BFGS-B.
    candidates: list[np.ndarray] = []
    for i in order[:50]:
        if len(candidates) == 3 or not np.isfinite(f[i]):
            break
        if all(np.abs(batch.x[i] - c).max() > 1e-4 for c in candidates):
            candidates.append(batch.x[i])
    if not candidates:
        raise ValueError("the objective is not finite at any starting point; check the data "
                         "(losses and scales far outside the grid?) or pass grid=")
    best = None
    for x0 in candidates:
        res = minimize(lambda z: _single(fun, z), x0, jac=True, method="L-BFGS-B",
                       options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000,
                                "maxfun": 20_000})
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    theta = np.asarray(best.x, dtype=float)
    if f[order[0]] < best.fun:  # the polish never makes things worse
        theta = batch.x[order[0]].copy()
    f_best, g_best = _single(fun, theta)
    scale = _gradient_scale(theta, log_n, log_d, log_loss, delta)
    gradient = float(np.max(np.abs(g_best) / np.maximum(scale, 1e-300)))
    at_best = f <= f_best * (1 + OBJECTIVE_RTOL) + 1e-12
    # Do the solutions that reach the best objective agree where it matters, at 10x scale?
    far_n = np.array([log_n.max() + math.log(MAX_EXTRAPOLATION)])
    far_d = None if log_d is None else np.array([log_d.max() + math.log(MAX_EXTRAPOLATION)])
    with np.errstate(over="ignore", invalid="ignore"):
        far = log_model(batch.x[at_best], far_n, far_d)[:, 0] if at_best.any() else np.empty(0)
        far_best = log_model(theta, far_n, far_d)[0, 0]
    spread = float(np.max(np.abs(far - far_best))) if far.size else 0.0
    return theta, {
        "evaluated": int(points.shape[0]), "optimized": int(chosen.size),
        "at_best": int(at_best.sum()), "objective": float(f_best), "gradient": gradient,
        "converged": bool(gradient <= GRADIENT_RTOL), "message": str(best.message),
        "spread": spread, "best_start": points[chosen[order[0]]],
    }


def _single(fun: Any, z: np.ndarray) -> tuple[float, np.ndarray]:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        f, g = fun(np.asarray(z, dtype=float)[None, :])
    return float(f[0]), g[0]


def _gradient_scale(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray | None,
                    log_loss: np.ndarray, delta: float) -> np.ndarray:
    """sum_i |d r_i / d theta_j| (P,): the gradient's size if every residual pushed one way."""
    terms = _term_shares(theta, log_n, log_d)  # (k, n) softmax weights of the LSE terms
    cols = [terms[0], terms[1], terms[1] * np.abs(log_n)]
    if theta.size == 5:
        cols += [terms[2], terms[2] * np.abs(log_d)]
    return np.array([c.sum() for c in cols])


def _term_shares(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray | None) -> np.ndarray:
    """Share of each term (E, A N^-alpha[, B D^-beta]) in the predicted loss: (k, n)."""
    logs = [np.full(log_n.shape, theta[0]), theta[1] - theta[2] * log_n]
    if theta.size == 5:
        logs.append(theta[3] - theta[4] * log_d)
    stacked = np.stack(logs)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(stacked - np.logaddexp.reduce(stacked, axis=0))


def _intervals(form: Form, theta: np.ndarray, samples: np.ndarray, ci: float, n: int,
               dof: int | None) -> dict[str, Interval]:
    point = theta_to_params(form, theta)
    reps = theta_to_params(form, samples)
    out = {k: percentile_interval(reps[k], float(point[k]), ci, n, dof,
                                  log=k in ("E", "A", "B"))  # stretched in log
           for k in form.params}
    if form is CHINCHILLA:
        with np.errstate(divide="ignore", invalid="ignore"):
            for key, num in (("a", "beta"), ("b", "alpha")):
                value = point[num] / (point["alpha"] + point["beta"])
                rep = reps[num] / (reps["alpha"] + reps["beta"])
                out[key] = percentile_interval(rep, float(value), ci, n, dof)
    return out


def _fit_warnings(form: Form, theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray | None,
                  axes: dict[str, np.ndarray], diag: dict[str, Any], boot_converged: float
                  ) -> list[ScalingWarning]:
    out: list[ScalingWarning] = []
    if not diag["converged"]:
        out.append(ScalingWarning(
            f"the optimizer did not converge (relative gradient {diag['gradient']:.2g} > "
            f"{GRADIENT_RTOL:g}; {diag['message']}): the estimate may not be the minimum",
            kind="not-converged"))
    if diag["optimized"] >= 10 and diag["at_best"] < 2:
        out.append(ScalingWarning(
            f"only 1 of {diag['optimized']} starts reached the best objective: the optimum is "
            "fragile; try starts=None (every grid point) or a finer grid=",
            kind="starts-disagree"))
    if diag["spread"] > AGREEMENT_ATOL:
        out.append(ScalingWarning(
            f"starts that fit the data equally well predict losses up to "
            f"{100 * math.expm1(diag['spread']):.2g}% apart at 10x the largest fitted scale: "
            "the data do not pin down the extrapolation", kind="starts-disagree"))
    outside = []
    for j, name in enumerate(form.theta):
        lo, hi = float(np.min(axes[name])), float(np.max(axes[name]))
        if not lo <= theta[j] <= hi:
            outside.append(f"{name}={theta[j]:.3g} (grid {lo:g}..{hi:g})")
    if outside:
        out.append(ScalingWarning(
            "the estimate lies outside the starting grid: " + ", ".join(outside) + "; the "
            "search may have missed a better optimum; widen grid= to cover it",
            kind="grid-edge"))
    shares = _term_shares(theta, log_n, log_d).max(axis=1)
    names = ["E", "A/N^alpha", "B/D^beta"]
    for name, share in zip(names, shares, strict=False):
        if share < NEGLIGIBLE_SHARE:
            out.append(ScalingWarning(
                f"the term {name} is below {100 * share:.2g}% of the predicted loss at every "
                "point: the data do not identify it, and its parameters' intervals are "
                "meaningless; fit fewer terms or add points where it matters",
                kind="unidentified"))
    for j, name in ((2, "alpha"), (4, "beta")):
        if j < theta.size and theta[j] <= 0:
            out.append(ScalingWarning(
                f"{name}={theta[j]:.3g} <= 0: the fitted loss does not fall with "
                f"{'N' if name == 'alpha' else 'D'}; the fit is degenerate",
                kind="unidentified"))
    if not math.isnan(boot_converged) and boot_converged < 0.99:
        out.append(ScalingWarning(
            f"{100 * (1 - boot_converged):.1f}% of bootstrap refits did not converge: "
            "intervals may be off", kind="bootstrap"))
    return out


# --- argument helpers -------------------------------------------------------------


def _form(form: str | None, D: object) -> Form:
    if form is None:
        return POWER if D is None else CHINCHILLA
    if form not in FORMS:
        raise ValueError(f"form={form!r}; choose between 'chinchilla' (L = E + A/N^alpha + "
                         "B/D^beta) and 'power' (L = E + A/N^alpha)")
    if form == "chinchilla" and D is None:
        raise ValueError("form='chinchilla' needs D= (training tokens per point); give D or "
                         "use form='power'")
    return FORMS[form]


def _interval_method(method: str | None, groups: np.ndarray | None) -> str:
    if method is None:
        return "residual" if groups is None else "pairs"
    if method not in INTERVAL_METHODS:
        raise ValueError(f"interval_method={method!r}; choose between 'residual' (fixed "
                         "design, resampled log residuals; the default) and 'pairs' "
                         "(resampled points or groups)")
    if method == "residual" and groups is not None:
        raise ValueError("interval_method='residual' resamples residuals point by point, but "
                         "groups= says points of one run are correlated; use "
                         "interval_method='pairs' (the default with groups), which resamples "
                         "whole groups")
    return method


def _interval_dof(method: str, n: int, n_params: int) -> int | None:
    """Student-t degrees of freedom of the quantile levels: n - p for "residual", None
    (percentile levels) for "pairs"."""
    return max(n - n_params, 1) if method == "residual" else None


def _grid(form: Form, grid: Mapping[str, Sequence[float]] | None) -> dict[str, np.ndarray]:
    axes = default_grid(form)
    for key, values in (grid or {}).items():
        if key not in form.theta:
            raise ValueError(f"grid key {key!r} is not a coordinate of form={form.name!r}; "
                             f"choose from {list(form.theta)} (E = exp(e), A = exp(a), "
                             "B = exp(b))")
        arr = np.asarray(values, dtype=float).ravel()
        if arr.size == 0 or not np.isfinite(arr).all():
            raise ValueError(f"grid[{key!r}] must be a non-empty list of finite numbers")
        axes[key] = arr
    return axes


def _groups(groups: Sequence[Any] | np.ndarray | None, n: int) -> np.ndarray | None:
    if groups is None:
        return None
    labels = np.asarray(groups)
    if labels.shape != (n,):
        raise ValueError(f"groups must have one label per point ({n}); got shape {labels.shape}")
    _, idx = np.unique(labels, return_inverse=True)
    if idx.max() < 1:
        raise ValueError("groups has a single label: the bootstrap needs at least two groups "
                         "to resample (pass groups=None to resample points)")
    return idx.astype(int)


def _check_positive(name: str, arr: np.ndarray) -> None:
    if not (np.isfinite(arr).all() and (arr > 0).all()):
        raise ValueError(f"{name} must be finite and > 0 everywhere to predict (log scale)")
