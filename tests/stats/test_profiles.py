"""Performance profiles (Agarwal et al. 2021) against rliable's formulas and a loop bootstrap.

rliable: score distribution at tau = np.mean(scores > tau) over all runs and tasks;
average-score distribution = np.mean(np.mean(scores, axis=0) > tau).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from labcoat.stats._checks import StatsWarning
from labcoat.stats._profiles import Profile, performance_profile

RUNS, TASKS, REPS = 6, 5, 200
TAUS = np.linspace(0.0, 2.0, 21)


def _data(runs: int = RUNS, tasks: int = TASKS, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(-0.3, 0.6, size=(runs, tasks))


def _ref_profile(sample: np.ndarray, kind: str) -> np.ndarray:
    if kind == "runs":
        return np.array([np.mean(sample > tau) for tau in TAUS])
    return np.array([np.mean(np.mean(sample, axis=0) > tau) for tau in TAUS])


def _ref_replicates(x: np.ndarray, kind: str, seed: int, task_bootstrap: bool) -> np.ndarray:
    """A loop over replications with the draws performance_profile makes (one chunk)."""
    rng = np.random.default_rng(seed)
    run_idx = rng.integers(0, RUNS, size=(REPS, RUNS, TASKS))
    task_idx = rng.integers(0, TASKS, size=(REPS, TASKS)) if task_bootstrap else None
    out = []
    for b in range(REPS):
        sample = np.empty((RUNS, TASKS))
        for t in range(TASKS):
            source = t if task_idx is None else task_idx[b, t]
            sample[:, t] = x[run_idx[b, :, t], source]
        out.append(_ref_profile(sample, kind))
    return np.array(out)


@pytest.mark.parametrize("task_bootstrap", [False, True])
@pytest.mark.parametrize("kind", ["runs", "task_means"])
def test_profile_and_percentile_band_match_loop_reference(kind: str, task_bootstrap: bool) -> None:
    x = _data()
    found = performance_profile({"a": x}, TAUS, kind=kind, reps=REPS, seed=3,
                                task_bootstrap=task_bootstrap)["a"]
    assert isinstance(found, Profile)
    np.testing.assert_allclose(found.point, _ref_profile(x, kind), rtol=1e-12)
    low, high = np.quantile(_ref_replicates(x, kind, 3, task_bootstrap), [0.025, 0.975], axis=0)
    np.testing.assert_allclose(found.low, low, rtol=1e-12)
    np.testing.assert_allclose(found.high, high, rtol=1e-12)
    np.testing.assert_array_equal(found.taus, TAUS)
    assert found.n == RUNS and found.ci == 0.95


def _ref_bca_levels(point, replicates, accel):
    z0 = stats.norm.ppf(stats.percentileofscore(replicates, point, kind="mean") / 100)
    z = stats.norm.ppf(0.025)
    return [stats.norm.cdf(z0 + (z0 + q) / (1 - accel * (z0 + q))) for q in (z, -z)]


@pytest.mark.parametrize("kind", ["runs", "task_means"])
def test_bca_band_matches_stratified_jackknife_reference(kind: str) -> None:
    """Acceleration at each tau from deleting one run of one task (strata = tasks)."""
    x = _data(seed=4)
    found = performance_profile({"a": x}, TAUS, kind=kind, reps=REPS, seed=5, method="bca")["a"]
    replicates = _ref_replicates(x, kind, 5, False)
    point = _ref_profile(x, kind)
    for k, tau in enumerate(TAUS):
        num = den = 0.0
        for t in range(TASKS):
            jk = []
            for r in range(RUNS):
                columns = [np.delete(x[:, s], r) if s == t else x[:, s] for s in range(TASKS)]
                if kind == "runs":
                    jk.append(np.mean([np.mean(c > tau) for c in columns]))
                else:
                    jk.append(np.mean([c.mean() > tau for c in columns]))
            u = (RUNS - 1) * (np.mean(jk) - np.array(jk))
            num += np.sum(u**3) / RUNS**3
            den += np.sum(u**2) / RUNS**2
        accel = num / (6 * den**1.5) if den > 0 else 0.0
        levels = _ref_bca_levels(point[k], replicates[:, k], accel)
        expected = np.quantile(replicates[:, k], levels)
        assert (found.low[k], found.high[k]) == pytest.approx(tuple(expected), rel=1e-9, abs=1e-12)


def test_profile_is_reproducible_and_seed_dependent() -> None:
    scores = {"a": _data(seed=6), "b": _data(seed=7)}
    one = performance_profile(scores, TAUS, reps=300, seed=1)
    two = performance_profile(scores, TAUS, reps=300, seed=1)
    other = performance_profile(scores, TAUS, reps=300, seed=2)
    for name in scores:
        np.testing.assert_array_equal(one[name].low, two[name].low)
        np.testing.assert_array_equal(one[name].high, two[name].high)
    assert not np.array_equal(one["a"].low, other["a"].low)


def test_profile_extremes_are_exact() -> None:
    """Below every score the fraction is 1, above every score 0, with zero-width bands."""
    x = _data(seed=8)
    taus = [x.min() - 1, x.max() + 1]
    for method in ("percentile", "bca"):
        found = performance_profile({"a": x}, taus, reps=100, method=method)["a"]
        np.testing.assert_array_equal(found.point, [1.0, 0.0])
        np.testing.assert_array_equal(found.low, [1.0, 0.0])
        np.testing.assert_array_equal(found.high, [1.0, 0.0])


def test_profile_guards() -> None:
    with pytest.warns(StatsWarning, match="only 3 runs"):
        performance_profile({"a": _data(runs=3)}, TAUS, reps=100)
    with pytest.warns(StatsWarning, match="one run"):
        found = performance_profile({"a": _data(runs=1)}, TAUS, reps=100)["a"]
    assert np.all(found.low == -math.inf) and np.all(found.high == math.inf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)
        performance_profile({"a": _data(runs=5)}, TAUS, reps=100, method="bca")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"taus": []}, "taus has shape"),
        ({"taus": [[0.1, 0.2]]}, "taus has shape"),
        ({"taus": [0.1, float("nan")]}, "NaN"),
        ({"kind": "average"}, "choose 'runs' or 'task_means'"),
        ({"method": "basic"}, "method"),
        ({"ci": 1.0}, "ci=1.0"),
        ({"reps": 0}, "reps=0"),
    ],
)
def test_invalid_arguments_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        performance_profile({"a": _data()}, **{"taus": TAUS, "reps": 100, **kwargs})
