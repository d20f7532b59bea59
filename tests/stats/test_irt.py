"""2PL item response theory: the fit against girth (an independent package, marginal
maximum likelihood too) and against the truth it was simulated from, abilities against
scipy's integration and optimization, item SEs against a numerical Hessian, and 30
adaptive items against the full bank."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from labcoat import stats as lstats

N_EXAMINEES, N_ITEMS = 1000, 50


def _simulate(rng: np.random.Generator, theta: np.ndarray, a: np.ndarray, b: np.ndarray
              ) -> np.ndarray:
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    return (rng.random(p.shape) < p).astype(float)


@pytest.fixture(scope="module")
def bank() -> dict:
    """1,000 examinees x 50 items from a known 2PL, and the fit (built once)."""
    rng = np.random.default_rng(0)
    a = rng.lognormal(0.0, 0.3, N_ITEMS)
    b = rng.normal(0.0, 1.0, N_ITEMS)
    theta = rng.normal(0.0, 1.0, N_EXAMINEES)
    y = _simulate(rng, theta, a, b)
    return {"a": a, "b": b, "theta": theta, "y": y, "fit": lstats.fit_2pl(y),
            "mml": lstats.fit_2pl(y, prior=None)}


def test_parameters_agree_with_girth(bank):
    girth = pytest.importorskip("girth", reason="the dev extra brings girth (test reference)")
    ref = girth.twopl_mml(bank["y"].T.astype(int))  # girth: (items, examinees)
    for fit in (bank["mml"], bank["fit"]):  # plain MML, and with the default item priors
        assert fit.converged
        r_a = np.corrcoef(fit.discrimination, ref["Discrimination"])[0, 1]
        r_b = np.corrcoef(fit.difficulty, ref["Difficulty"])[0, 1]
        assert r_a >= 0.98 and r_b >= 0.98, (r_a, r_b)
    # Plain MML is girth's estimator: the values agree too, not only their order.
    mml = bank["mml"]
    assert np.abs(mml.discrimination - ref["Discrimination"]).max() < 0.05
    assert np.abs(mml.difficulty - ref["Difficulty"]).max() < 0.05
    # The weak priors move 1,000 examinees' estimates by hundredths.
    assert np.abs(bank["fit"].difficulty - mml.difficulty).max() < 0.05


def test_parameters_recover_the_simulated_truth(bank):
    fit = bank["fit"]
    assert np.corrcoef(fit.discrimination, bank["a"])[0, 1] > 0.9
    assert np.corrcoef(fit.difficulty, bank["b"])[0, 1] > 0.98
    assert np.corrcoef(fit.ability, bank["theta"])[0, 1] > 0.9
    # The SEs say how far the estimates are from the truth: about 95% within 2 SE.
    inside = np.abs(fit.difficulty - bank["b"]) < 1.96 * fit.difficulty_se
    assert inside.mean() > 0.85


def test_item_se_match_the_numerical_hessian_of_the_marginal_likelihood():
    """Small problem: the cross-product SEs against finite differences of the marginal
    log-likelihood (Gauss-Hermite quadrature with 80 nodes, written here) in (a, b)."""
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0.7, 1.8, 6), np.linspace(-1.2, 1.2, 6)
    y = _simulate(rng, rng.normal(size=800), a, b)
    fit = lstats.fit_2pl(y, prior=None, tol=1e-10)
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()

    def loglik(params: np.ndarray) -> float:
        aa, bb = params[:6], params[6:]
        p = 1 / (1 + np.exp(-aa * (nodes[:, None] - bb)))
        per_node = y @ np.log(p).T + (1 - y) @ np.log1p(-p).T
        return float(np.sum(np.log(np.exp(per_node) @ weights)))

    x0 = np.concatenate([fit.discrimination, fit.difficulty])
    h = 1e-4
    hess = np.empty((12, 12))
    for i in range(12):
        for j in range(12):
            e_i, e_j = np.eye(12)[i] * h, np.eye(12)[j] * h
            hess[i, j] = (loglik(x0 + e_i + e_j) - loglik(x0 + e_i - e_j)
                          - loglik(x0 - e_i + e_j) + loglik(x0 - e_i - e_j)) / (4 * h * h)
    se = np.sqrt(np.diag(np.linalg.inv(-hess)))
    np.testing.assert_allclose(fit.discrimination_se, se[:6], rtol=0.2)
    np.testing.assert_allclose(fit.difficulty_se, se[6:], rtol=0.2)


def test_ability_matches_scipy_integration_and_optimization(bank):
    fit = bank["fit"]
    answers = bank["y"][7]
    a, b = fit.discrimination, fit.difficulty

    def likelihood(t: float) -> float:
        p = 1 / (1 + np.exp(-a * (t - b)))
        return float(np.prod(np.where(answers == 1, p, 1 - p)))

    norm = integrate.quad(lambda t: likelihood(t) * stats.norm.pdf(t), -8, 8)[0]
    mean = integrate.quad(lambda t: t * likelihood(t) * stats.norm.pdf(t), -8, 8)[0] / norm
    second = integrate.quad(lambda t: t * t * likelihood(t) * stats.norm.pdf(t), -8, 8)[0] / norm
    eap = lstats.ability(fit, answers)
    assert eap.theta == pytest.approx(mean, abs=2e-3)
    assert eap.se == pytest.approx(np.sqrt(second - mean**2), abs=2e-3)
    mle = lstats.ability(fit, answers, method="mle")
    best = optimize.minimize_scalar(lambda t: -np.log(likelihood(t)), bounds=(-6, 6),
                                    method="bounded", options={"xatol": 1e-9})
    assert mle.theta == pytest.approx(best.x, abs=1e-5)
    p = 1 / (1 + np.exp(-a * (mle.theta - b)))
    assert mle.se == pytest.approx(1 / np.sqrt(np.sum(a**2 * p * (1 - p))), rel=1e-6)


def test_thirty_adaptive_items_estimate_ability_close_to_the_full_bank(bank):
    """200 new examinees answer the fitted 50-item bank; an adaptive test of 30 items (max
    Fisher information at the current EAP) against the EAP from all 50 answers."""
    fit = bank["fit"]
    rng = np.random.default_rng(11)
    theta = rng.normal(size=200)
    y = _simulate(rng, theta, bank["a"], bank["b"])
    full, adaptive, random_30 = [], [], []
    for i in range(theta.size):
        full.append(lstats.ability(fit, y[i]).theta)
        test = lstats.adaptive_test(fit, lambda j, i=i: y[i, j], 30)
        assert len(set(test.items)) == 30 and len(test.path) == 30
        adaptive.append(test.ability.theta)
        chosen = rng.choice(N_ITEMS, 30, replace=False)
        random_30.append(lstats.ability(fit, y[i, chosen], chosen).theta)
    full, adaptive, random_30 = map(np.asarray, (full, adaptive, random_30))
    gap = np.abs(adaptive - full)
    rmse = lambda est: float(np.sqrt(np.mean((est - theta) ** 2)))  # noqa: E731
    # Precision: 30 adaptive items are within 0.1 logits of the full bank's RMSE.
    assert rmse(adaptive) - rmse(full) < 0.1, (rmse(adaptive), rmse(full))
    # Each examinee's estimate: the mean distance to the full bank's is about 0.1 logits
    # (0.115 over 300 examinees in benchmarks/irt.py at these discriminations, a ~ 1).
    assert gap.mean() < 0.15, gap.mean()
    # Adaptive choice beats 30 random items of the same bank.
    assert gap.mean() < np.abs(random_30 - full).mean()


def test_select_items_picks_items_answered_about_half_right(bank):
    fit = bank["fit"]
    chosen = lstats.select_items(fit, 0.8, 5)
    p = fit.probability(0.8)[0]
    info = fit.discrimination**2 * p * (1 - p)
    assert set(chosen) == set(np.argsort(-info)[:5])
    assert np.all(np.abs(p[chosen] - 0.5) < 0.3)
    # Several abilities: summed information; excluded items never come back.
    both = lstats.select_items(fit, [-1.0, 1.0], 10, exclude=[int(chosen[0])])
    assert int(chosen[0]) not in both and len(set(both)) == 10


def test_missing_answers_and_the_fit_is_deterministic():
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.8, 2.0, 12), rng.normal(size=12)
    y = _simulate(rng, rng.normal(size=400), a, b)
    holes = y.copy()
    holes[rng.random(y.shape) < 0.2] = np.nan
    one, two = lstats.fit_2pl(holes), lstats.fit_2pl(holes)
    np.testing.assert_array_equal(one.difficulty, two.difficulty)
    full = lstats.fit_2pl(y)
    assert np.corrcoef(one.difficulty, full.difficulty)[0, 1] > 0.97
    assert set(one.as_dict()) >= {"items", "abilities", "method"}


def test_few_examinees_need_the_prior():
    """Eight models on 60 items (the usual leaderboard shape): plain MML runs off to huge
    discriminations; the default priors keep every item finite and the models in order."""
    rng = np.random.default_rng(2)
    theta = np.linspace(-1.5, 1.5, 8)
    y = _simulate(rng, theta, np.full(60, 1.7), rng.normal(size=60))
    y = y[:, lstats.informative_items(y)]
    assert np.abs(lstats.fit_2pl(y, prior=None, max_iterations=100).discrimination).max() > 10
    fit = lstats.fit_2pl(y)
    assert fit.converged and np.abs(fit.discrimination).max() < 4
    assert stats.spearmanr(fit.ability, theta).statistic > 0.95
    with pytest.raises(ValueError, match="two positive SDs"):
        lstats.fit_2pl(y, prior=(1.0, 0.0))


def test_bad_inputs_say_what_to_do():
    y = np.array([[1, 0, 1], [1, 1, 0], [1, 0, 0]], float)
    with pytest.raises(ValueError, match="same way by every examinee"):
        lstats.fit_2pl(y)
    assert lstats.informative_items(y).tolist() == [False, True, True]
    with pytest.raises(ValueError, match="0, 1 or NaN"):
        lstats.fit_2pl(np.array([[0.5, 1], [0, 1]]))
    with pytest.raises(ValueError, match="n_examinees, n_items"):
        lstats.fit_2pl([1, 0, 1])
    fit = lstats.fit_2pl(y[:, 1:])
    with pytest.raises(ValueError, match="one per item"):
        lstats.ability(fit, [1, 0, 1])
    with pytest.raises(ValueError, match="between 1 and"):
        lstats.adaptive_test(fit, lambda j: 1, 5)
    with pytest.raises(ValueError, match="must be 0 or 1"):
        lstats.adaptive_test(fit, lambda j: 0.5, 1)
