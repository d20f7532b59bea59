"""Ratings: Bradley-Terry against choix's MLE and a directly coded Davidson likelihood,
Elo by hand, Nash averaging against brute-force support enumeration, and the redundancy
property (a cluster copied 10x leaves the Nash rating, not Bradley-Terry, where it was)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy.optimize import minimize

from labcoat.stats import (
    Battles,
    battles,
    battles_from_scores,
    bradley_terry,
    cluster_game,
    elo,
    nash_average,
    nash_rating,
    redundancy_audit,
)


def arena(seed: int, n: int = 8, m: int = 3000, tie_rate: float = 0.0, clusters: int = 0,
          specialist: float = 0.0) -> tuple[Battles, np.ndarray]:
    """Simulated battles: random pairs, Bradley-Terry outcomes from true strengths (plus,
    with clusters, a per-cluster skill of sd `specialist`); a share of ties."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n)
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n
    c = rng.integers(0, max(clusters, 1), m)
    skill = theta[:, None] + specialist * rng.normal(0, 1, (n, max(clusters, 1)))
    p = 1 / (1 + np.exp(skill[b, c] - skill[a, c]))
    w = np.where(rng.random(m) < p, "model_a", "model_b")
    w = np.where(rng.random(m) < tie_rate, "tie", w)
    names = [f"m{i}" for i in range(n)]
    data = battles([names[i] for i in a], [names[i] for i in b], list(w),
                   clusters=[f"c{k}" for k in c] if clusters else None)
    return data, theta - theta.mean()


def test_bradley_terry_equals_choix_mle() -> None:
    choix = pytest.importorskip("choix")
    data, _ = arena(1)
    fit = bradley_terry(data, bootstrap=0)
    pairs = [(i, j) if o == 1 else (j, i) for i, j, o in zip(data.a, data.b, data.outcome,
                                                          strict=True)]
    ref = choix.ilsr_pairwise(len(data.models), pairs, alpha=0.0, tol=1e-12)
    assert np.abs(fit.strength - (ref - ref.mean())).max() < 1e-4
    assert fit.tie is None


def test_half_ties_equal_choix_with_a_win_each_way() -> None:
    choix = pytest.importorskip("choix")
    data, _ = arena(2, tie_rate=0.3)
    fit = bradley_terry(data, ties="half", bootstrap=0)
    pairs = []  # every outcome twice: a win twice, a tie as one win each way
    for i, j, o in zip(data.a, data.b, data.outcome, strict=True):
        pairs += [(i, j), (i, j)] if o == 1 else [(j, i), (j, i)] if o == 0 else [(i, j), (j, i)]
    ref = choix.ilsr_pairwise(len(data.models), pairs, alpha=0.0, tol=1e-12)
    assert np.abs(fit.strength - (ref - ref.mean())).max() < 1e-4


def test_davidson_equals_a_directly_coded_likelihood() -> None:
    data, _ = arena(3, n=5, m=1500, tie_rate=0.25)
    fit = bradley_terry(data, bootstrap=0)
    n = len(data.models)

    def nll(x: np.ndarray) -> float:  # Davidson (1970) per battle, no shared code
        th, nu = x[:n], np.exp(x[n])
        pa, pb = np.exp(th[data.a]), np.exp(th[data.b])
        tie = nu * np.sqrt(pa * pb)
        den = pa + pb + tie
        like = np.where(data.outcome == 1, pa, np.where(data.outcome == 0, pb, tie)) / den
        return -np.sum(np.log(like)) + (th.sum()) ** 2

    ref = minimize(nll, np.zeros(n + 1), method="BFGS", options={"gtol": 1e-8}).x
    assert np.abs(fit.strength - (ref[:n] - ref[:n].mean())).max() < 1e-4
    assert fit.tie == pytest.approx(np.exp(ref[n]), rel=1e-4)


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    data, truth = arena(4, m=2000)
    one = bradley_terry(data, bootstrap=200, seed=7)
    two = bradley_terry(data, bootstrap=200, seed=7)
    other = bradley_terry(data, bootstrap=200, seed=8)
    assert np.array_equal(one.low, two.low) and np.array_equal(one.rank_high, two.rank_high)
    assert not np.array_equal(one.low, other.low)
    assert np.all(one.low < one.rating) and np.all(one.rating < one.high)
    assert np.all(one.rank_low <= one.rank) and np.all(one.rank <= one.rank_high)
    assert set(one.rank.tolist()) == set(range(1, len(truth) + 1))


def test_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match=r"battle 1: winner 'draw' is not one of model_a"):
        battles(["x", "y"], ["y", "x"], ["model_a", "draw"])
    with pytest.raises(ValueError, match="'x' plays itself"):
        battles(["x"], ["x"], ["tie"])
    data = battles(["x", "y"], ["y", "x"], ["model_a", "model_a"])
    idle = Battles(["x", "y", "z"], data.a, data.b, data.outcome, data.prompt)
    with pytest.raises(ValueError, match="model 'z' has no games"):
        bradley_terry(idle, bootstrap=0)
    top = battles(["x", "x", "y"], ["y", "z", "z"], ["model_a", "model_a", "model_a"])
    with pytest.raises(ValueError, match="'x' never lost.*prior"):
        bradley_terry(top, bootstrap=0)
    assert np.isfinite(bradley_terry(top, prior=0.1, bootstrap=0).strength).all()


def test_elo_by_hand_and_spread_over_orders() -> None:
    data = battles(["x"], ["y"], ["model_a"])
    assert elo(data, orders=1).rating.tolist() == [1002.0, 998.0]  # K=4, expected 0.5
    data, _ = arena(5, n=4, m=400)
    e1, e2 = elo(data, orders=30, seed=1), elo(data, orders=30, seed=1)
    assert np.array_equal(e1.low, e2.low)
    assert np.all(e1.low <= e1.mean) and np.all(e1.mean <= e1.high)
    assert np.all(e1.high - e1.low > 0)  # the order alone moves Elo


def test_battles_from_scores_by_hand() -> None:
    data = battles_from_scores([[1, 0, 1], [0, 0, 1]], ["p", "q"], clusters=["t", "t", "u"])
    assert data.outcome.tolist() == [1.0, 0.5, 0.5]
    assert data.prompt.tolist() == [0, 1, 2]
    assert [data.clusters[c] for c in data.cluster] == ["t", "t", "u"]


def _nash_by_support_enumeration(U: np.ndarray) -> tuple[float, np.ndarray]:
    """The column player's equilibrium of a generic game by trying every pair of equal-size
    supports (von Stengel 2002, section 3): the reference, independent of linprog."""
    rows, cols = U.shape
    for size in range(1, min(rows, cols) + 1):
        for rows_in in combinations(range(rows), size):
            for cols_in in combinations(range(cols), size):
                A = U[np.ix_(rows_in, cols_in)]
                M = np.block([[A, -np.ones((size, 1))], [np.ones((1, size)), np.zeros((1, 1))]])
                try:
                    sol = np.linalg.solve(M, np.r_[np.zeros(size), 1.0])
                    Mp = np.block([[A.T, -np.ones((size, 1))],
                                   [np.ones((1, size)), np.zeros((1, 1))]])
                    p = np.linalg.solve(Mp, np.r_[np.zeros(size), 1.0])[:size]
                except np.linalg.LinAlgError:
                    continue
                q, v = np.zeros(cols), sol[size]
                q[list(cols_in)] = sol[:size]
                pf = np.zeros(rows)
                pf[list(rows_in)] = p
                if q.min() >= -1e-12 and pf.min() >= -1e-12 and (U @ q).max() <= v + 1e-9 \
                        and (pf @ U).min() >= v - 1e-9:
                    return v, q
    raise AssertionError("no equilibrium found")


def test_nash_average_equals_support_enumeration() -> None:
    rng = np.random.default_rng(0)
    for _ in range(5):
        U = rng.normal(size=(4, 6))
        v, q = _nash_by_support_enumeration(U)
        got = nash_average(U)
        assert got.value == pytest.approx(v, abs=1e-8)
        assert np.abs(got.prompt_mix - q).max() < 1e-6
        assert np.abs(got.ratings - U @ q).max() < 1e-8


def test_nash_average_maximises_entropy_over_copies() -> None:
    U = np.array([[1.0, -1.0, -1.0], [-1.0, 1.0, 1.0]])  # columns 2 and 3 are copies
    got = nash_average(U)
    assert got.prompt_mix == pytest.approx([0.5, 0.25, 0.25], abs=1e-9)


def test_duplicated_cluster_moves_nash_not_bradley_terry() -> None:
    data, _ = arena(6, n=5, m=3000, clusters=6, specialist=0.8)
    U = cluster_game(data)
    v, q = _nash_by_support_enumeration(U)
    base = nash_rating(data)
    assert np.abs(base.ratings - U @ q).max() < 1e-6  # the reference, on the original
    copied = data.with_copies(0, 10)
    assert len(copied.a) > len(data.a) * 2  # cluster 0 is now heavy
    assert np.abs(nash_rating(copied).ratings - base.ratings).max() <= 1e-6
    bt = bradley_terry(data, bootstrap=0).rating
    bt_copied = bradley_terry(copied, bootstrap=0).rating
    assert np.abs(bt_copied - bt).max() > 10  # Elo points: Bradley-Terry follows the mix


def test_redundancy_audit_rows() -> None:
    data, _ = arena(7, n=4, m=800, clusters=3, specialist=0.8)
    audit = redundancy_audit(data, orders=3)
    assert [(r.change, r.cluster) for r in audit.rows] == [
        (ch, c) for c in ("c0", "c1", "c2") for ch in ("duplicate", "drop")]
    for row in audit.rows:
        if row.change == "duplicate":
            assert np.abs(row.shift_nash).max() <= 1e-6
        assert np.abs(row.shift_bt).max() > 0


@pytest.mark.slow
def test_bootstrap_coverage_near_nominal_small_count() -> None:
    """30 arenas x 8 models (the benchmark runs 200: benchmarks/ratings_coverage.py); with
    240 intervals the Monte-Carlo SD of the coverage is 1.4 points, hence the wide band."""
    hit = total = 0
    for s in range(30):
        data, truth = arena(100 + s, m=2000)
        fit = bradley_terry(data, bootstrap=150, seed=s)
        true_rating = 1000 + 400 / np.log(10) * truth
        hit += int(np.sum((fit.low <= true_rating) & (true_rating <= fit.high)))
        total += len(truth)
    assert 0.90 <= hit / total <= 0.99
