"""scaling.fit: recovery of known laws, the search, intervals, predictions, validation.

Expected values come from the generating parameters (synthetic data), from an
independent computation (brute-force minimization for the compute-optimal
allocation, scipy's L-BFGS-B one problem at a time for the batched optimizer),
or from Besiroglu et al. 2024's published refit.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import pytest
from scipy.optimize import minimize

from labcoat import scaling
from labcoat.scaling import ScalingWarning, check_range
from labcoat.scaling import _forms as forms
from labcoat.scaling._bootstrap import refit, resample_weights
from labcoat.stats import StatsWarning


def _quiet_fit(*args, **kwargs) -> scaling.ScalingFit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScalingWarning)
        return scaling.fit(*args, **kwargs)


# --- recovering known laws -----------------------------------------------------------------


def test_recovers_epoch_parameters_from_noise_free_points(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    """Points generated from Besiroglu et al.'s refit are fitted back to its parameters."""
    N, D = grid()
    f = scaling.fit(N=N, D=D, loss=law(N, D, epoch), bootstrap=0)
    for name, true in epoch.items():
        assert f.params[name] == pytest.approx(true, rel=2e-4), name
    assert f.diagnostics.converged and f.diagnostics.starts_at_best >= 2
    assert f.diagnostics.starts_evaluated == 4500  # Hoffmann et al.'s grid
    assert not f.warnings


def test_recovers_chinchilla_parameters_with_noise_inside_intervals(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    N, D = grid(sizes=10)
    rng = np.random.default_rng(7)
    loss = law(N, D, epoch) * np.exp(rng.normal(0, 0.01, N.size))
    f = scaling.fit(N=N, D=D, loss=loss, bootstrap=500, seed=1)
    for name, true in epoch.items():
        iv = f.intervals[name]
        assert iv.low <= true <= iv.high, (name, iv)
        assert iv.low <= f.params[name] <= iv.high
    assert f.params["alpha"] == pytest.approx(epoch["alpha"], abs=0.04)
    assert f.params["beta"] == pytest.approx(epoch["beta"], abs=0.04)
    a_true = epoch["beta"] / (epoch["alpha"] + epoch["beta"])
    assert f.intervals["a"].low <= a_true <= f.intervals["a"].high
    assert f.intervals["a"].point + f.intervals["b"].point == pytest.approx(1.0)
    assert f.residual_scale == pytest.approx(0.01, rel=0.35)


def test_recovers_power_law() -> None:
    N = np.geomspace(1e6, 1e9, 12)
    rng = np.random.default_rng(3)
    loss = (1.5 + 300 * N**-0.3) * np.exp(rng.normal(0, 0.003, N.size))
    f = scaling.fit(N=N, loss=loss, bootstrap=400, seed=0)
    assert f.form == "power" and set(f.params) == {"E", "A", "alpha"}
    assert f.params["alpha"] == pytest.approx(0.3, abs=0.05)
    for name, true in {"E": 1.5, "A": 300.0, "alpha": 0.3}.items():
        assert f.intervals[name].low <= true <= f.intervals[name].high, name
    exact = scaling.fit(N=N, loss=1.5 + 300 * N**-0.3, bootstrap=0)
    assert exact.params["alpha"] == pytest.approx(0.3, rel=1e-4)
    assert exact.params["E"] == pytest.approx(1.5, rel=1e-4)


def test_compute_optimal_allocation_matches_brute_force(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    """Hoffmann et al.'s eq. (4) against minimizing L(N, C/6N) over a fine grid of N."""
    N, D = grid()
    f = scaling.fit(N=N, D=D, loss=law(N, D, epoch), bootstrap=200, seed=0)
    C = 5.76e23  # Chinchilla's training compute
    n_grid = np.geomspace(1e9, 1e12, 200_001)
    losses = law(n_grid, C / (6 * n_grid), f.params)
    n_best = n_grid[np.argmin(losses)]
    alloc = f.allocation(C)
    assert alloc["N"].point == pytest.approx(n_best, rel=1e-3)
    assert alloc["D"].point == pytest.approx(C / (6 * n_best), rel=1e-3)
    assert alloc["loss"].point == pytest.approx(losses.min(), rel=1e-9)
    # Besiroglu et al.: their refit implies ~20 tokens per parameter, as Hoffmann et al.'s
    # approaches 1 and 2 did (and unlike Hoffmann et al.'s own approach-3 estimates).
    assert 15 < alloc["tokens_per_parameter"].point < 25
    assert alloc["N"].low <= alloc["N"].point <= alloc["N"].high


def test_besiroglu_point_hoffmann_estimates_imply_more_tokens(epoch: dict) -> None:
    """Hoffmann et al.'s published approach-3 numbers imply far more tokens per
    parameter at Chinchilla's compute than Epoch's refit (Besiroglu et al. 2024)."""
    hoffmann = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}
    theta_h = forms.params_to_theta(forms.CHINCHILLA, hoffmann)
    theta_e = forms.params_to_theta(forms.CHINCHILLA, epoch)
    c = np.array([5.76e23])
    ratio_h = forms.compute_optimal(theta_h, c)["tokens_per_parameter"][0]
    ratio_e = forms.compute_optimal(theta_e, c)["tokens_per_parameter"][0]
    assert ratio_h > 2 * ratio_e


# --- the search and the batched optimizer ---------------------------------------------------


def test_batched_bootstrap_refits_match_scipy_one_at_a_time(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    N, D = grid()
    rng = np.random.default_rng(0)
    loss = law(N, D, epoch) * np.exp(rng.normal(0, 0.01, N.size))
    theta = forms.params_to_theta(forms.CHINCHILLA, epoch)
    ln, ld, ly = np.log(N), np.log(D), np.log(loss)
    w = resample_weights(N.size, 12, np.random.default_rng(1))
    batch = refit(forms.CHINCHILLA, ln, ld, ly, theta, w, 1e-3)
    assert batch.converged.all()
    for i in range(w.shape[0]):
        def one(z, wi=w[i]):
            f, g = forms.huber_objective(z[None], ln, ld, ly, wi, 1e-3)
            return f[0], g[0]
        ref = minimize(one, theta, jac=True, method="L-BFGS-B",
                       options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000})
        assert batch.f[i] <= ref.fun * (1 + 1e-9) + 1e-12
        assert np.allclose(batch.x[i], ref.x, atol=1e-4)


def test_objective_gradient_matches_finite_differences(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    N, D = grid()
    ln, ld = np.log(N), np.log(D)
    ly = np.log(law(N, D, epoch)) + np.random.default_rng(0).normal(0, 0.003, N.size)
    theta = np.array([[0.5, 6.0, 0.33, 7.5, 0.37], [0.7, 6.3, 0.36, 7.7, 0.35]])
    f, g = forms.huber_objective(theta, ln, ld, ly, 1.0, 1e-3)
    for s in range(2):
        for j in range(5):
            h = np.zeros(5)
            h[j] = 1e-7
            up = forms.huber_objective((theta[s] + h)[None], ln, ld, ly, 1.0, 1e-3)[0][0]
            down = forms.huber_objective((theta[s] - h)[None], ln, ld, ly, 1.0, 1e-3)[0][0]
            assert g[s, j] == pytest.approx((up - down) / 2e-7, rel=1e-4, abs=1e-4)
    # the value is the Huber sum divided by delta
    r = forms.log_model(theta[:1], ln, ld)[0] - ly
    huber = np.where(np.abs(r) <= 1e-3, 0.5 * r**2, 1e-3 * (np.abs(r) - 0.5e-3)).sum()
    assert f[0] == pytest.approx(huber / 1e-3, rel=1e-12)


def test_all_grid_starts_and_the_best_256_agree(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    N, D = grid(sizes=6)
    loss = law(N, D, epoch) * np.exp(np.random.default_rng(5).normal(0, 0.01, N.size))
    some = scaling.fit(N=N, D=D, loss=loss, bootstrap=0)
    every = scaling.fit(N=N, D=D, loss=loss, bootstrap=0, starts=None)
    assert every.diagnostics.starts_optimized == 4500
    assert some.diagnostics.objective == pytest.approx(every.diagnostics.objective, rel=1e-9)
    for name in epoch:
        assert some.params[name] == pytest.approx(every.params[name], rel=1e-4)


# --- intervals, predictions, determinism ------------------------------------------------------


def _power_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    N = np.geomspace(1e6, 1e9, 10)
    rng = np.random.default_rng(seed)
    return N, (1.5 + 300 * N**-0.3) * np.exp(rng.normal(0, 0.01, N.size))


def test_same_seed_same_intervals_other_seed_other_intervals() -> None:
    N, loss = _power_data()
    a = scaling.fit(N=N, loss=loss, bootstrap=300, seed=11)
    b = scaling.fit(N=N, loss=loss, bootstrap=300, seed=11)
    c = scaling.fit(N=N, loss=loss, bootstrap=300, seed=12)
    assert a.intervals == b.intervals
    assert np.array_equal(a.predict_interval(1e10)[1], b.predict_interval(1e10)[1])
    assert a.intervals["alpha"] != c.intervals["alpha"]
    gen = scaling.fit(N=N, loss=loss, bootstrap=300, seed=np.random.default_rng(11))
    assert gen.intervals["alpha"].point == a.intervals["alpha"].point


def test_predict_broadcasts_and_matches_the_formula(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    N, D = grid()
    f = scaling.fit(N=N, D=D, loss=law(N, D, epoch), bootstrap=100)
    n = np.array([[1e9], [1e10]])
    d = np.array([2e10, 2e11, 2e12])
    out = f.predict(n, d)
    assert out.shape == (2, 3)
    assert np.allclose(out, law(n, d, f.params), rtol=1e-12)
    assert f.predict(1e9, 2e10).shape == ()
    point, low, high = f.predict_interval(n, d)
    assert point.shape == low.shape == high.shape == (2, 3)
    assert (low <= point).all() and (point <= high).all()


def test_noise_widens_the_prediction_interval() -> None:
    N, loss = _power_data()
    f = scaling.fit(N=N, loss=loss, bootstrap=500, seed=0)
    _, lo_n, hi_n = f.predict_interval(2e9, noise=True)
    _, lo_c, hi_c = f.predict_interval(2e9, noise=False)
    assert hi_n - lo_n > hi_c - lo_c
    _, lo90, hi90 = f.predict_interval(2e9, ci=0.5)
    assert hi90 - lo90 < hi_n - lo_n


def test_groups_resample_whole_runs() -> None:
    """Five identical copies of every point look like 5x the data to a point bootstrap
    (pairs or residual); resampled as groups they give back the intervals of the
    original points. groups= makes "pairs" the default."""
    N, loss = _power_data()
    base = scaling.fit(N=N, loss=loss, bootstrap=600, seed=0, interval_method="pairs")
    kw = {"N": np.repeat(N, 5), "loss": np.repeat(loss, 5), "bootstrap": 600, "seed": 0}
    copies = scaling.fit(**kw, interval_method="pairs")
    copies_residual = scaling.fit(**kw)
    grouped = scaling.fit(**kw, groups=np.repeat(np.arange(N.size), 5))
    assert copies_residual.interval_method == "residual"
    assert grouped.interval_method == "pairs"

    def width(f: scaling.ScalingFit) -> float:
        return f.intervals["alpha"].high - f.intervals["alpha"].low

    assert width(copies) < 0.7 * width(base)
    assert width(copies_residual) < 0.7 * width(base)
    assert width(grouped) == pytest.approx(width(base), rel=0.25)
    with pytest.raises(ValueError, match="interval_method='pairs'"):
        scaling.fit(**kw, groups=np.repeat(np.arange(N.size), 5), interval_method="residual")


def test_to_dict_is_json_ready() -> None:
    import json

    N, loss = _power_data()
    f = scaling.fit(N=N, loss=loss, bootstrap=50)
    data = json.loads(json.dumps(f.to_dict()))
    assert data["form"] == "power" and data["n_points"] == 10
    assert set(data["intervals"]) == {"E", "A", "alpha"}


def test_bootstrap_zero_has_no_intervals() -> None:
    N, loss = _power_data()
    f = scaling.fit(N=N, loss=loss, bootstrap=0)
    assert f.intervals == {}
    with pytest.raises(ValueError, match="bootstrap=0"):
        f.predict_interval(1e10)


# --- warnings ---------------------------------------------------------------------------------


def test_check_range_flags_weak_ranges() -> None:
    kinds = {w.kind for w in check_range([1e6, 2e6, 3e6], target_N=1e9)}
    assert kinds == {"few-sizes", "narrow-range", "far-extrapolation"}
    assert check_range(np.geomspace(1e6, 1e8, 6), target_N=5e8) == []
    assert all(isinstance(w, StatsWarning) for w in check_range([1.0, 2.0]))
    d_kinds = {w.kind for w in check_range(np.geomspace(1e6, 1e8, 6), [1e9] * 6)}
    assert d_kinds == {"few-sizes", "narrow-range"}


def test_fit_warns_about_few_sizes_and_far_targets() -> None:
    N = np.array([1e6, 3e6, 1e7, 3e7])
    loss = 1.5 + 300 * N**-0.3
    with pytest.warns(ScalingWarning, match="distinct N"):
        f = scaling.fit(N=N, loss=loss, bootstrap=50)
    assert "few-sizes" in {w.kind for w in f.warnings}
    with pytest.warns(ScalingWarning, match="beyond 10x"):
        f.predict_interval(1e9)


def test_noisy_chinchilla_fits_warn_that_some_intervals_under_cover(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    """3% log noise (E, A, alpha covered 86-92% in benchmarks/scaling_coverage.py) warns;
    1% (93.5-97.5%) does not."""
    N, D = grid(sizes=8)
    rng = np.random.default_rng(3)
    clean = law(N, D, epoch)
    for sd, noisy in ((0.03, True), (0.01, False)):
        f = _quiet_fit(N=N, D=D, loss=clean * np.exp(rng.normal(0, sd, N.size)),
                       bootstrap=100, seed=0)
        assert ("noisy" in {w.kind for w in f.warnings}) == noisy, (sd, f.residual_scale)


def test_grid_edge_warning_when_the_estimate_leaves_the_grid() -> None:
    N = np.geomspace(1e6, 1e9, 10)
    loss = 0.05 + 300 * N**-0.5  # E = 0.05: log E = -3 is below the grid's -1
    with pytest.warns(ScalingWarning, match="outside the starting grid"):
        f = scaling.fit(N=N, loss=loss, bootstrap=0)
    assert f.params["E"] == pytest.approx(0.05, rel=1e-3)
    wide = scaling.fit(N=N, loss=loss, bootstrap=0, grid={"e": np.arange(-5.0, 1.01, 0.5)})
    assert "grid-edge" not in {w.kind for w in wide.warnings}


def test_unidentified_term_is_flagged(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    """Tokens so plentiful that B/D^beta is ~1e-6 of the loss: the data cannot see it."""
    N, D = grid()
    loss = law(N, D * 1e12, epoch)
    f = _quiet_fit(N=N, D=D, loss=loss, bootstrap=0)
    assert "unidentified" in {w.kind for w in f.warnings}


# --- validation -------------------------------------------------------------------------------


N10 = np.geomspace(1e6, 1e9, 10)
L10 = 1.5 + 300 * N10**-0.3


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"N": -N10, "loss": L10}, r"N\[0\]=.* is not a finite positive"),
    ({"N": N10, "loss": np.r_[L10[:-1], np.nan]}, r"loss\[9\]"),
    ({"N": N10, "loss": L10[:-1]}, "lengths differ"),
    ({"N": N10}, "loss= is required"),
    ({"N": N10, "loss": L10, "form": "chinchilla"}, "needs D="),
    ({"N": N10, "D": N10 * 20, "loss": L10, "form": "power"}, "takes no D"),
    ({"N": N10, "loss": L10, "form": "kaplan"}, "choose between 'chinchilla'"),
    ({"N": N10[:3], "loss": L10[:3]}, "at least 4 points"),
    ({"N": N10, "loss": L10, "huber_delta": 0}, "huber_delta"),
    ({"N": N10, "loss": L10, "bootstrap": -1}, "bootstrap=-1"),
    ({"N": N10, "loss": L10, "bootstrap": 1.5}, "bootstrap=1.5"),
    ({"N": N10, "loss": L10, "ci": 95}, "ci=95"),
    ({"N": N10, "loss": L10, "seed": -3}, "seed=-3"),
    ({"N": N10, "loss": L10, "starts": 0}, "starts=0"),
    ({"N": N10, "loss": L10, "grid": {"b": [1.0]}}, "grid key 'b'"),
    ({"N": N10, "loss": L10, "groups": [1, 2]}, "one label per point"),
    ({"N": N10, "loss": L10, "groups": [0] * 10}, "single label"),
    ({"N": N10, "loss": L10, "interval_method": "wild"}, "choose between 'residual'"),
    ({"N": np.ones((2, 5)), "loss": L10}, "must be 1-D"),
])
def test_invalid_input_raises_naming_the_problem(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        scaling.fit(**kwargs)


def test_prediction_and_allocation_validate_inputs(
    epoch: dict, law: Callable, grid: Callable
) -> None:
    f = scaling.fit(N=N10, loss=L10, bootstrap=20)
    with pytest.raises(ValueError, match="without D"):
        f.predict(1e9, 1e10)
    with pytest.raises(ValueError, match="N must be finite and > 0"):
        f.predict(-1.0)
    with pytest.raises(ValueError, match="form='chinchilla'"):
        f.allocation(1e21)
    with pytest.raises(ValueError, match="ci=2"):
        f.predict_interval(1e9, ci=2)
    N, D = grid(sizes=5)
    g = scaling.fit(N=N, D=D, loss=law(N, D, epoch), bootstrap=20)
    with pytest.raises(ValueError, match="give D"):
        g.predict(1e9)
    with pytest.raises(ValueError, match="one compute budget"):
        g.allocation([1e21, 1e22])
    assert math.isfinite(g.allocation(1e21)["N"].point)
