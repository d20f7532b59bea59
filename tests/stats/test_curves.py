"""Learning-curve comparison per run, and the pseudoreplication trap of Henderson et al.
(2018) reproduced on simulated curves."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import signal, stats

from labcoat.stats._checks import StatsWarning
from labcoat.stats._curves import compare_curves, summarize_curves
from labcoat.stats._seeds import welch

# --- summaries ---------------------------------------------------------------------


def test_summaries_by_hand() -> None:
    """Curves [0, 1, 2] and [2, 2, 2] at steps 0, 1, 3: means 1 and 2, finals 2 and 2,
    trapezoid areas 0.5 + 3 = 3.5 and 2 * 3 = 6."""
    curves = np.array([[0.0, 1.0, 2.0], [2.0, 2.0, 2.0]])
    assert summarize_curves(curves, "mean").tolist() == [1.0, 2.0]
    assert summarize_curves(curves, "final").tolist() == [2.0, 2.0]
    assert summarize_curves(curves, "auc", steps=[0, 1, 3]).tolist() == [3.5, 6.0]
    assert summarize_curves(curves, "auc").tolist() == [2.0, 4.0]  # unit spacing


@pytest.mark.parametrize("summary", ["mean", "final", "auc"])
def test_compare_curves_is_welch_on_per_run_summaries(summary: str) -> None:
    """The result equals scipy's Welch t test on one summary number per run."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (6, 30)), rng.normal(0.3, 1, (7, 30))
    per_run = {"mean": lambda x: x.mean(axis=1), "final": lambda x: x[:, -1],
               "auc": lambda x: ((x[:, 1:] + x[:, :-1]) / 2).sum(axis=1)}[summary]
    ref = stats.ttest_ind(per_run(b), per_run(a), equal_var=False)
    result = compare_curves(a, b, summary=summary)
    assert result.p_value == pytest.approx(ref.pvalue)
    assert result.estimate == pytest.approx(per_run(b).mean() - per_run(a).mean())
    assert result.n == 13  # runs, not 13 * 30 steps
    assert result.method == f"welch(per-run {summary})"


@pytest.mark.parametrize(
    ("a", "b", "kwargs", "match"),
    [(np.zeros(10), np.zeros((5, 10)), {}, r"\(runs, steps\)"),
     (np.zeros((5, 10)), np.zeros((5, 12)), {}, "same steps"),
     (np.zeros((1, 10)), np.zeros((5, 10)), {}, "at least 2 runs"),
     (np.full((5, 3), np.nan), np.zeros((5, 3)), {}, "NaN"),
     (np.zeros((5, 3)), np.zeros((5, 3)), {"summary": "max"}, "mean, final, auc"),
     (np.zeros((5, 3)), np.zeros((5, 3)), {"summary": "auc", "steps": [0, 2, 1]}, "steps")],
)
def test_compare_curves_rejects_bad_shapes_and_options(a: np.ndarray, b: np.ndarray,
                                                       kwargs: dict, match: str) -> None:
    """Flattened 1-D input, mismatched steps, one run, NaN, unknown summary, unordered steps."""
    with pytest.raises(ValueError, match=match):
        compare_curves(a, b, **kwargs)


def test_compare_curves_warns_with_few_runs() -> None:
    """3 runs per group: the few-runs StatsWarning reaches the caller."""
    rng = np.random.default_rng(1)
    with pytest.warns(StatsWarning, match="3 runs"):
        compare_curves(rng.normal(size=(3, 5)), rng.normal(size=(5, 5)))


# --- the Henderson et al. (2018) trap ------------------------------------------------
#
# Henderson et al., "Deep Reinforcement Learning that Matters" (AAAI 2018, Fig. 5): ten
# runs of one TRPO configuration on HalfCheetah, split into two groups of 5 seeds, gave
# learning curves that a significance test called different (they report p = 0.0016).
# We do not replay their data; we reproduce the mechanism with curves whose statistics
# make it inevitable:
#   - a seed offset: each run sits above or below the shared learning curve for its whole
#     life (initialization and early exploration decide where a run settles), SD 1;
#   - autocorrelated noise: AR(1) with rho = 0.95 and SD 0.5, so neighbouring steps share
#     most of their noise.
# Both groups come from the same process. A step-level Welch test sees 5 * 200 = 1,000
# "samples" per group, but its information is really about 5 offsets per group, so the
# difference of two 5-run offset means (SD sqrt(2/5) ~ 0.63) looks like ~9 naive SEs.
# compare_curves summarizes each run to its mean and compares 5 numbers with 5: a valid
# test, which rejects about 5% of the time.

STEPS, RUNS, RHO = 200, 5, 0.95


def _same_algorithm_curves(rng: np.random.Generator) -> np.ndarray:
    """(RUNS, STEPS) learning curves of one algorithm: shared curve + seed offset + AR(1)."""
    learning = 1 - np.exp(-np.arange(STEPS) / 30)
    offsets = rng.normal(0.0, 1.0, (RUNS, 1))
    shocks = rng.normal(0.0, 0.5 * np.sqrt(1 - RHO**2), (RUNS, STEPS))
    shocks[:, 0] = rng.normal(0.0, 0.5, RUNS)  # start the AR(1) at its stationary SD
    noise = signal.lfilter([1.0], [1.0, -RHO], shocks, axis=1)
    return learning + offsets + noise


def test_step_level_test_finds_a_difference_between_identical_algorithms() -> None:
    """One fixed experiment: flattened steps give p < 1e-6, compare_curves gives p > 0.2,
    and welch with run ids warns that the values are not independent."""
    rng = np.random.default_rng(0)
    a, b = _same_algorithm_curves(rng), _same_algorithm_curves(rng)
    naive = welch(a.ravel(), b.ravel())
    proper = compare_curves(a, b)
    assert naive.p_value < 1e-6
    assert proper.p_value > 0.2
    runs = np.repeat(np.arange(RUNS), STEPS)
    with pytest.warns(StatsWarning, match="1000 values from only 5 runs"):
        welch(a.ravel(), b.ravel(), runs_a=runs, runs_b=runs)


def test_trap_is_reliable_and_per_run_test_keeps_its_level() -> None:
    """Over 300 simulated experiments with no true difference, the step-level test rejects
    at 0.05 most of the time (about 88%), compare_curves about 5% (binomial SD 1.3%)."""
    rng = np.random.default_rng(1)
    naive, proper = [], []
    for _ in range(300):
        a, b = _same_algorithm_curves(rng), _same_algorithm_curves(rng)
        naive.append(welch(a.ravel(), b.ravel()).p_value < 0.05)
        proper.append(compare_curves(a, b).p_value < 0.05)
    assert np.mean(naive) > 0.75
    assert np.mean(proper) < 0.10


def test_compare_curves_detects_a_real_difference() -> None:
    """The per-run test is not merely timid: a true gap of 3 offset SDs is found."""
    rng = np.random.default_rng(2)
    a = _same_algorithm_curves(rng)
    b = _same_algorithm_curves(rng) + 3.0
    assert compare_curves(a, b).p_value < 0.05  # power about 0.99 at this gap
