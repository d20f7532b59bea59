"""Stratified bootstrap intervals against slow, obviously-correct references and scipy.

References: a Python loop over replications using the same index draws (rliable's
StratifiedBootstrap resampling, written out), scipy.stats.bootstrap for one task (the
same random stream, so exact agreement) and for several tasks (scipy's multi-sample
BCa, agreement within Monte-Carlo error).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from labcoat.stats import _bootstrap
from labcoat.stats._bootstrap import (
    METRICS,
    _acceleration,
    _cell_jackknife,
    _replicates,
    interval_estimates,
    probability_of_improvement,
)
from labcoat.stats._checks import StatsWarning

RUNS, TASKS, REPS = 6, 5, 300


def _data(runs: int = RUNS, tasks: int = TASKS, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(-0.5, 0.6, size=(runs, tasks))


# --- slow references -------------------------------------------------------


def _ref_metric(sample: np.ndarray, name: str, gamma: float = 1.0) -> float:
    """rliable's metrics.py definitions on one (runs, tasks) array."""
    if name == "iqm":
        return stats.trim_mean(sample, 0.25, axis=None)
    if name == "mean":
        return np.mean(np.mean(sample, axis=0))
    if name == "median":
        return np.median(np.mean(sample, axis=0))
    return gamma - np.mean(np.minimum(sample, gamma))


def _ref_ragged_metric(columns: list[np.ndarray], name: str, gamma: float = 1.0) -> float:
    """The same metrics when tasks have different numbers of runs (jackknife deletions)."""
    if name == "iqm":
        return stats.trim_mean(np.concatenate(columns), 0.25)
    if name == "optimality_gap":
        return gamma - np.mean([np.minimum(c, gamma).mean() for c in columns])
    means = [c.mean() for c in columns]
    return np.mean(means) if name == "mean" else np.median(means)


def _draws(seed: int, reps: int, runs: int, tasks: int, task_bootstrap: bool):
    """The draws interval_estimates makes for one algorithm when they fit in one chunk."""
    rng = np.random.default_rng(seed)
    run_idx = rng.integers(0, runs, size=(reps, runs, tasks))
    task_idx = rng.integers(0, tasks, size=(reps, tasks)) if task_bootstrap else None
    return run_idx, task_idx


def _ref_replicates(x, run_idx, task_idx, metric) -> np.ndarray:
    """One replication at a time: task t of replication b takes runs run_idx[b, :, t]
    of task t (or of task task_idx[b, t] with the task bootstrap)."""
    reps, runs, tasks = run_idx.shape
    out = []
    for b in range(reps):
        sample = np.empty((runs, tasks))
        for t in range(tasks):
            source = t if task_idx is None else task_idx[b, t]
            sample[:, t] = x[run_idx[b, :, t], source]
        out.append(metric(sample) if callable(metric) else _ref_metric(sample, metric))
    return np.array(out)


def _ref_stratified_acceleration(x: np.ndarray, name: str) -> float:
    """Davison & Hinkley (1997) sec. 3.7: delete run r of task t, strata = tasks."""
    runs, tasks = x.shape
    num = den = 0.0
    for t in range(tasks):
        jk = np.array([
            _ref_ragged_metric(
                [np.delete(x[:, s], r) if s == t else x[:, s] for s in range(tasks)], name
            )
            for r in range(runs)
        ])
        u = (runs - 1) * (jk.mean() - jk)
        num += np.sum(u**3) / runs**3
        den += np.sum(u**2) / runs**2
    return num / (6 * den**1.5)


def _ref_efron_acceleration(jk: np.ndarray) -> float:
    """Efron (1987): a = sum d^3 / (6 (sum d^2)^1.5), d = mean(jk) - jk."""
    d = jk.mean() - jk
    return np.sum(d**3) / (6 * np.sum(d**2) ** 1.5)


def _ref_bca(point: float, replicates: np.ndarray, accel: float, ci: float = 0.95):
    z0 = stats.norm.ppf(stats.percentileofscore(replicates, point, kind="mean") / 100)
    z = stats.norm.ppf((1 - ci) / 2)
    levels = [stats.norm.cdf(z0 + (z0 + q) / (1 - accel * (z0 + q))) for q in (z, -z)]
    return np.quantile(replicates, levels)


# --- replicates and percentile intervals -----------------------------------


@pytest.mark.parametrize("task_bootstrap", [False, True])
@pytest.mark.parametrize("name", METRICS)
def test_replicates_match_loop_over_replications(name: str, task_bootstrap: bool) -> None:
    """The vectorized replicates equal a per-replication loop with rliable's definitions."""
    x = _data()
    run_idx, task_idx = _draws(1, REPS, RUNS, TASKS, task_bootstrap)
    fast = _replicates(x, [(name, name)], iter([(run_idx, task_idx)]), REPS, 1.0)[name]
    np.testing.assert_allclose(fast, _ref_replicates(x, run_idx, task_idx, name), rtol=1e-12)


@pytest.mark.parametrize("task_bootstrap", [False, True])
@pytest.mark.parametrize("name", METRICS)
def test_percentile_interval_matches_loop_reference(name: str, task_bootstrap: bool) -> None:
    """interval_estimates(seed=s) uses those draws; bounds are the 2.5/97.5% quantiles."""
    x = _data()
    reference = _ref_replicates(x, *_draws(3, REPS, RUNS, TASKS, task_bootstrap), name)
    found = interval_estimates({"a": x}, metric=name, reps=REPS, seed=3,
                               task_bootstrap=task_bootstrap, method="percentile")["a"]
    assert found.point == pytest.approx(_ref_metric(x, name), rel=1e-12)
    low, high = np.quantile(reference, [0.025, 0.975])
    assert (found.low, found.high) == pytest.approx((low, high), rel=1e-12)
    assert found.se == pytest.approx(reference.std(ddof=1), rel=1e-9)
    assert found.n == RUNS and found.ci == 0.95


@pytest.mark.parametrize("name", ["mean", "iqm"])
def test_expanded_interval_uses_hesterbergs_levels_with_pooled_df(name: str) -> None:
    """Expanded percentile (Hesterberg 2015): quantiles at
    Phi(-sqrt(n/(n-1)) t_{0.975, T(n-1)}), T tasks of n runs; wider than percentile."""
    x = _data()
    reference = _ref_replicates(x, *_draws(3, REPS, RUNS, TASKS, False), name)
    level = stats.norm.cdf(-math.sqrt(RUNS / (RUNS - 1))
                           * stats.t.ppf(0.975, TASKS * (RUNS - 1)))
    found = interval_estimates({"a": x}, metric=name, reps=REPS, seed=3, method="expanded")["a"]
    low, high = np.quantile(reference, [level, 1 - level])
    assert (found.low, found.high) == pytest.approx((low, high), rel=1e-12)
    plain = interval_estimates({"a": x}, metric=name, reps=REPS, seed=3,
                               method="percentile")["a"]
    assert found.low < plain.low and found.high > plain.high
    assert interval_estimates({"a": x}, metric=name, reps=REPS, seed=3)["a"] == found


@pytest.mark.parametrize("name", METRICS)
def test_bca_interval_matches_stratified_jackknife_reference(name: str) -> None:
    """BCa: z0 from percentileofscore(kind='mean'), acceleration from deleting one run of one
    task at a time (strata = tasks), Efron's accelerated quantile levels."""
    x = _data(seed=4)
    reference = _ref_replicates(x, *_draws(5, REPS, RUNS, TASKS, False), name)
    accel = _ref_stratified_acceleration(x, name)
    found = interval_estimates({"a": x}, metric=name, reps=REPS, seed=5, method="bca")["a"]
    expected = _ref_bca(_ref_metric(x, name), reference, accel)
    assert (found.low, found.high) == pytest.approx(tuple(expected), rel=1e-9)


@pytest.mark.parametrize("name", METRICS)
def test_bca_with_task_bootstrap_uses_delete_one_task_jackknife(name: str) -> None:
    x = _data(seed=6)
    reference = _ref_replicates(x, *_draws(7, REPS, RUNS, TASKS, True), name)
    jk = np.array([_ref_metric(np.delete(x, t, axis=1), name) for t in range(TASKS)])
    found = interval_estimates({"a": x}, metric=name, reps=REPS, seed=7, method="bca",
                               task_bootstrap=True)["a"]
    expected = _ref_bca(_ref_metric(x, name), reference, _ref_efron_acceleration(jk))
    assert (found.low, found.high) == pytest.approx(tuple(expected), rel=1e-9)


@pytest.mark.parametrize("shape", [(6, 5), (4, 1), (3, 3), (7, 4), (2, 2), (9, 7)])
def test_iqm_deletion_values_match_brute_force(shape: tuple[int, int]) -> None:
    """The prefix-sum IQM jackknife equals trim_mean of the scores with each one deleted,
    including integer scores full of ties."""
    for x in (_data(*shape), np.random.default_rng(1).integers(0, 3, size=shape) * 1.0):
        flat = x.ravel()
        brute = np.array([stats.trim_mean(np.delete(flat, i), 0.25) for i in range(flat.size)])
        np.testing.assert_allclose(_cell_jackknife(x, "iqm", 1.0).ravel(), brute, rtol=1e-12)


# --- scipy.stats.bootstrap -------------------------------------------------

SCIPY_STATISTICS = {
    "mean": lambda s, axis: np.mean(s, axis=axis),
    "iqm": lambda s, axis: stats.trim_mean(s, 0.25, axis=axis),
    "optimality_gap": lambda s, axis: 1 - np.mean(np.minimum(s, 1), axis=axis),
}


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("name", list(SCIPY_STATISTICS))
def test_single_task_equals_scipy_bootstrap(name: str, method: str) -> None:
    """One task: the stratified bootstrap is the ordinary bootstrap and draws the same
    stream as scipy.stats.bootstrap, so percentile and BCa intervals agree exactly."""
    runs = np.random.default_rng(8).lognormal(0.0, 0.8, size=15)
    ref = stats.bootstrap((runs,), SCIPY_STATISTICS[name], n_resamples=2000, vectorized=True,
                          method="BCa" if method == "bca" else "percentile",
                          rng=np.random.default_rng(9))
    found = interval_estimates({"a": runs[:, None]}, metric=name, reps=2000, seed=9,
                               method=method)["a"]
    ref_ci = ref.confidence_interval
    assert (found.low, found.high) == pytest.approx((ref_ci.low, ref_ci.high), rel=1e-9)
    assert found.se == pytest.approx(ref.standard_error, rel=1e-9)


def test_several_tasks_agree_with_scipy_multi_sample_bca() -> None:
    """scipy's BCa for independent samples uses the same stratified acceleration; with
    different random streams the bounds agree within Monte-Carlo error."""
    x = _data(runs=8, tasks=3, seed=10)
    reps = 20_000
    ref = stats.bootstrap(
        tuple(x.T), lambda *cols, axis: np.mean([c.mean(axis=axis) for c in cols], axis=0),
        n_resamples=reps, vectorized=True, method="BCa", rng=np.random.default_rng(11),
    )
    found = interval_estimates({"a": x}, metric="mean", reps=reps, seed=12, method="bca")["a"]
    # Measured over 10 seeds: a bound's Monte-Carlo SD is ~0.04 bootstrap SEs at 20k reps
    # (~0.055 for the difference of two runs); allow 4.5 of those.
    tolerance = 0.25 * found.se
    assert abs(found.low - ref.confidence_interval.low) < tolerance
    assert abs(found.high - ref.confidence_interval.high) < tolerance


def test_stratified_acceleration_scales_each_stratum_by_its_size() -> None:
    """Strata of different sizes (x and y runs in probability_of_improvement) weigh
    n^-3 and n^-2; equal sizes reduce to Efron's formula on all deletion values."""
    rng = np.random.default_rng(13)
    a, b = rng.normal(size=(4, 2)), rng.normal(size=(7, 3))
    ua, ub = 3 * (a.mean(0) - a), 6 * (b.mean(0) - b)
    num = np.sum(ua**3) / 4**3 + np.sum(ub**3) / 7**3
    den = np.sum(ua**2) / 4**2 + np.sum(ub**2) / 7**2
    assert float(_acceleration(a, b)) == pytest.approx(num / (6 * den**1.5))
    d = a - a.mean(0)
    assert float(_acceleration(a)) == pytest.approx(
        np.sum(-(d**3)) / (6 * np.sum(d**2) ** 1.5)
    )
    assert float(_acceleration(np.ones((5, 2)))) == 0.0


# --- API behaviour ---------------------------------------------------------


def test_same_seed_same_intervals_different_seed_different() -> None:
    scores = {"a": _data(seed=14), "b": _data(seed=15)}
    first = interval_estimates(scores, metric=METRICS, reps=500, seed=1)
    assert first == interval_estimates(scores, metric=METRICS, reps=500, seed=1)
    other = interval_estimates(scores, metric=METRICS, reps=500, seed=2)
    assert first["a"]["iqm"].low != other["a"]["iqm"].low
    assert first["a"]["iqm"].point == other["a"]["iqm"].point


def test_generator_seed_is_the_only_randomness() -> None:
    """A Generator seed: equal generators give equal intervals; global state is untouched."""
    scores = {"a": _data(seed=16)}
    np.random.seed(0)
    before = np.random.random()
    np.random.seed(0)
    one = interval_estimates(scores, reps=500, seed=np.random.default_rng(3))
    two = interval_estimates(scores, reps=500, seed=np.random.default_rng(3))
    assert one == two
    assert np.random.random() == before


def test_algorithms_share_draws_so_others_do_not_change_an_interval() -> None:
    """Each algorithm is resampled from a fresh generator built from the seed."""
    a, b = _data(seed=17), _data(seed=18)
    alone = interval_estimates({"a": a}, reps=500, seed=4)["a"]
    assert interval_estimates({"b": b, "a": a}, reps=500, seed=4)["a"] == alone


def test_all_metrics_at_once_equal_one_at_a_time() -> None:
    """metric=(...) returns {algorithm: {metric: Interval}} from the same resamples."""
    scores = {"a": _data(seed=19), "b": _data(runs=8, seed=20)}
    together = interval_estimates(scores, metric=METRICS, reps=400, seed=5, method="bca")
    for name in METRICS:
        alone = interval_estimates(scores, metric=name, reps=400, seed=5, method="bca")
        assert {k: v[name] for k, v in together.items()} == alone


def test_chunking_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """Draws are the same in small chunks as in one (numpy's stream is chunk-invariant)."""
    scores = {"a": _data(seed=21)}
    whole = interval_estimates(scores, metric=METRICS, reps=1000, seed=6)
    monkeypatch.setattr(_bootstrap, "CHUNK_CELLS", 7 * RUNS * TASKS)
    assert interval_estimates(scores, metric=METRICS, reps=1000, seed=6) == whole


def test_callable_metric_percentile_equals_builtin_and_bca_uses_row_jackknife() -> None:
    """A callable is evaluated per replication on the same draws; its BCa jackknife deletes
    one run index from every task (arch/rliable), as a callable needs a full array."""

    def trimmed(sample: np.ndarray) -> float:
        return stats.trim_mean(sample, 0.25, axis=None)

    x = _data(seed=22)
    scores = {"a": x}
    builtin = interval_estimates(scores, metric="iqm", reps=REPS, seed=8)["a"]
    custom = interval_estimates(scores, metric=trimmed, reps=REPS, seed=8)["a"]
    assert (custom.low, custom.high) == pytest.approx((builtin.low, builtin.high), rel=1e-12)
    both = interval_estimates(scores, metric=["iqm", trimmed], reps=REPS, seed=8)["a"]
    assert set(both) == {"iqm", "trimmed"}

    bca = interval_estimates(scores, metric=trimmed, reps=REPS, seed=8, method="bca")["a"]
    reference = _ref_replicates(x, *_draws(8, REPS, RUNS, TASKS, False), trimmed)
    jk = np.array([trimmed(np.delete(x, r, axis=0)) for r in range(RUNS)])
    expected = _ref_bca(trimmed(x), reference, _ref_efron_acceleration(jk))
    assert (bca.low, bca.high) == pytest.approx(tuple(expected), rel=1e-9)


def test_optimality_gap_threshold_is_passed_through() -> None:
    x = _data(seed=23)
    found = interval_estimates({"a": x}, metric="optimality_gap", reps=200, gamma=0.5)["a"]
    assert found.point == pytest.approx(0.5 - np.mean(np.minimum(x, 0.5)))


@pytest.mark.parametrize("ci", [0.8, 0.99])
def test_ci_level_is_used(ci: float) -> None:
    x = _data(seed=24)
    reference = _ref_replicates(x, *_draws(9, REPS, RUNS, TASKS, False), "mean")
    found = interval_estimates({"a": x}, metric="mean", reps=REPS, seed=9, ci=ci,
                               method="percentile")["a"]
    expected = np.quantile(reference, [(1 - ci) / 2, (1 + ci) / 2])
    assert (found.low, found.high) == pytest.approx(tuple(expected), rel=1e-12)
    assert found.ci == ci


# --- honesty guards --------------------------------------------------------


@pytest.mark.parametrize("runs", [2, 3, 4])
def test_fewer_than_five_runs_warns(runs: int) -> None:
    """The default (expanded) warns that few runs make a wide, fragile interval; percentile
    warns that its interval is too narrow and names method='expanded'."""
    with pytest.warns(StatsWarning, match=f"only {runs} runs per task") as record:
        found = interval_estimates({"a": _data(runs=runs)}, reps=200)["a"]
    assert found.low < found.high
    assert "expanded bootstrap interval still covers" in str(record[0].message)
    assert record[0].message.kind == "few-runs"
    with pytest.warns(StatsWarning, match="too narrow.*method='expanded'"):
        interval_estimates({"a": _data(runs=runs)}, reps=200, method="percentile")


def test_five_runs_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        interval_estimates({"a": _data(runs=5)}, metric=METRICS, reps=200, method="bca")


@pytest.mark.parametrize("task_bootstrap", [False, True])
def test_one_run_gives_an_infinite_interval_and_warns(task_bootstrap: bool) -> None:
    """One run cannot show run-to-run noise: no interval, as mean_interval with one run."""
    x = _data(runs=1)
    with pytest.warns(StatsWarning, match="one run per task"):
        found = interval_estimates({"a": x}, metric=METRICS, reps=200,
                                   task_bootstrap=task_bootstrap)["a"]
    for name in METRICS:
        assert found[name].point == pytest.approx(_ref_metric(x, name))
        assert (found[name].low, found[name].high) == (-math.inf, math.inf)
        assert found[name].se == math.inf and found[name].n == 1


def test_undefined_bca_gives_nan_and_warns() -> None:
    """Every replicate above the point (a statistic that is 0 only on the data itself)."""
    x = _data(seed=25)

    def only_original_is_zero(sample: np.ndarray) -> float:
        return float(not np.array_equal(sample, x))

    with pytest.warns(StatsWarning, match="BCa interval is undefined"):
        found = interval_estimates({"a": x}, metric=only_original_is_zero, reps=100,
                                   method="bca")["a"]
    assert math.isnan(found.low) and math.isnan(found.high)


# --- invalid input ---------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metric": "iq"}, "unknown metric 'iq'"),
        ({"metric": []}, "metric is empty"),
        ({"metric": ["iqm", "iqm"]}, "two metrics are named"),
        ({"metric": 3}, "neither"),
        ({"method": "bc"}, "choose 'percentile', 'bca' or 'expanded'"),
        ({"reps": 1}, "reps=1"),
        ({"reps": 100.0}, "reps=100.0"),
        ({"ci": 95}, "ci=95"),
        ({"seed": -1}, "seed=-1"),
        ({"seed": None}, "seed=None"),
        ({"seed": 1.5}, "seed=1.5"),
        ({"gamma": float("inf")}, "gamma"),
    ],
)
def test_invalid_arguments_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        interval_estimates({"a": _data()}, **{"reps": 100, **kwargs})


@pytest.mark.parametrize(
    ("scores", "match"),
    [
        ({}, "scores is empty"),
        (np.ones((3, 2)), "must be a dict"),
        ({"a": np.ones(4)}, r"scores\['a'\] has shape \(4,\)"),
        ({"a": np.array([[1.0, np.nan]] * 3)}, "NaN"),
    ],
)
def test_invalid_scores_raise(scores, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        interval_estimates(scores, reps=100)


def test_task_bootstrap_needs_two_tasks() -> None:
    with pytest.raises(ValueError, match="at least 2 tasks"):
        interval_estimates({"a": _data(tasks=1)}, reps=100, task_bootstrap=True)


def test_callable_returning_an_array_raises() -> None:
    with pytest.raises(ValueError, match="must return one number"):
        interval_estimates({"a": _data()}, metric=lambda s: s.mean(axis=0), reps=100)


# --- probability of improvement -------------------------------------------


def _ref_poi(x: np.ndarray, y: np.ndarray) -> float:
    per_task = [stats.mannwhitneyu(x[:, t], y[:, t], alternative="greater").statistic
                / (x.shape[0] * y.shape[0]) for t in range(x.shape[1])]
    return float(np.mean(per_task))


@pytest.mark.parametrize("method", ["percentile", "bca", "expanded"])
def test_probability_of_improvement_matches_loop_reference(method: str) -> None:
    """Runs of x and y resampled independently within each task (rliable's
    StratifiedIndependentBootstrap); BCa jackknife over runs of x and of y per task."""
    rng = np.random.default_rng(26)
    runs_x, runs_y, tasks, reps = 5, 7, 4, 150
    x = np.round(rng.normal(0.3, 1, (runs_x, tasks)), 1)  # rounded: ties count 1/2
    y = np.round(rng.normal(0.0, 1, (runs_y, tasks)), 1)
    draws = np.random.default_rng(10)
    idx_x = draws.integers(0, runs_x, size=(reps, runs_x, tasks))
    idx_y = draws.integers(0, runs_y, size=(reps, runs_y, tasks))
    reference = np.array([
        _ref_poi(np.take_along_axis(x, idx_x[b], 0), np.take_along_axis(y, idx_y[b], 0))
        for b in range(reps)
    ])
    found = probability_of_improvement(x, y, reps=reps, seed=10, method=method)
    assert found.point == pytest.approx(_ref_poi(x, y), rel=1e-12)
    assert found.n == 5
    if method == "percentile":
        expected = np.quantile(reference, [0.025, 0.975])
    elif method == "expanded":
        # Hesterberg's levels with n = min(runs_x, runs_y) and the tasks as strata.
        level = stats.norm.cdf(-math.sqrt(5 / 4) * stats.t.ppf(0.975, tasks * 4))
        expected = np.quantile(reference, [level, 1 - level])
        assert probability_of_improvement(x, y, reps=reps, seed=10) == found  # the default
    else:
        # Delete run r of x (or of y) in task t only; the other tasks keep all runs.
        num = den = 0.0
        for side, n in (("x", runs_x), ("y", runs_y)):
            for t in range(tasks):
                jk = []
                for r in range(n):
                    xt = np.delete(x[:, [t]], r, axis=0) if side == "x" else x[:, [t]]
                    yt = np.delete(y[:, [t]], r, axis=0) if side == "y" else y[:, [t]]
                    per_task = [_ref_poi(xt, yt) if s == t else _ref_poi(x[:, [s]], y[:, [s]])
                                for s in range(tasks)]
                    jk.append(np.mean(per_task))
                jk = np.array(jk)
                u = (n - 1) * (jk.mean() - jk)
                num += np.sum(u**3) / n**3
                den += np.sum(u**2) / n**2
        expected = _ref_bca(_ref_poi(x, y), reference, num / (6 * den**1.5))
    assert (found.low, found.high) == pytest.approx(tuple(expected), rel=1e-9)


def test_probability_of_improvement_reproducible_and_guarded() -> None:
    x, y = _data(seed=27), _data(seed=28)
    assert probability_of_improvement(x, y, reps=300, seed=1) == probability_of_improvement(
        x, y, reps=300, seed=1)
    assert probability_of_improvement(x, y, reps=300, seed=1) != probability_of_improvement(
        x, y, reps=300, seed=2)
    with pytest.warns(StatsWarning, match="only 3 runs"):
        probability_of_improvement(x[:3], y, reps=100)
    with pytest.warns(StatsWarning, match="one run"):
        found = probability_of_improvement(x, y[:1], reps=100)
    assert (found.low, found.high) == (-math.inf, math.inf)
    with pytest.raises(ValueError, match="same tasks"):
        probability_of_improvement(x, y[:, :2], reps=100)
    with pytest.raises(ValueError, match="method"):
        probability_of_improvement(x, y, reps=100, method="basic")
