"""Influence against its references on a model small enough to retrain: true leave-one-out
(scikit-learn refits an L2-regularised logistic regression without each training
example), Captum's TracInCP on the same checkpoints, and Kronfluence's EK-FAC."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr
from sklearn.linear_model import LogisticRegression

from labcoat.errors import LabcoatError
from labcoat.inside._tracin import CheckpointWeights, chunks, self_influence, tracin
from torch_threads import one_thread  # noqa: F401  (one torch thread per test)

N, D, LAMBDA, TESTS = 100, 5, 0.05, 6


def _loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    x, y = batch
    return F.binary_cross_entropy_with_logits(model(x).squeeze(-1), y, reduction="none")


def _fit(x: np.ndarray, y: np.ndarray) -> LogisticRegression:
    """argmin mean log-loss + LAMBDA/2 |w|^2 (sklearn's C multiplies the summed loss)."""
    return LogisticRegression(C=1 / (LAMBDA * len(y)), tol=1e-12, max_iter=10_000).fit(x, y)


@pytest.fixture(scope="module")
def problem() -> dict:
    """Data, the true leave-one-out effects and an SGD run's checkpoints, built once."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=D)
    x, xt = rng.normal(size=(N, D)), rng.normal(size=(TESTS, D))
    y = (rng.random(N) < 1 / (1 + np.exp(-1.5 * x @ w))).astype(int)
    yt = (rng.random(TESTS) < 1 / (1 + np.exp(-1.5 * xt @ w))).astype(int)

    def test_loss(m: LogisticRegression) -> np.ndarray:
        return -np.log(m.predict_proba(xt)[np.arange(TESTS), yt])

    full = _fit(x, y)
    base = test_loss(full)
    # (N, TESTS): how much each test loss rises when training example i is left out
    loo = np.array([test_loss(_fit(np.delete(x, i, 0), np.delete(y, i))) - base
                    for i in range(N)])
    train = (torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32))
    test = (torch.tensor(xt, dtype=torch.float32), torch.tensor(yt, dtype=torch.float32))
    # The same objective trained by SGD, keeping every 6th epoch's weights for TracIn.
    torch.manual_seed(0)
    model = torch.nn.Linear(D, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    checkpoints = []
    for epoch in range(60):
        for b in torch.randperm(N).split(10):
            opt.zero_grad()
            loss = _loss(model, (train[0][b], train[1][b])).mean()
            (loss + LAMBDA / 2 * model.weight.pow(2).sum()).backward()
            opt.step()
        if epoch % 6 == 5:
            checkpoints.append(CheckpointWeights(
                step=epoch, lr=0.1, state={k: v.clone() for k, v in model.state_dict().items()}))
    optimum = torch.nn.Linear(D, 1)
    with torch.no_grad():
        optimum.weight.copy_(torch.tensor(full.coef_))
        optimum.bias.copy_(torch.tensor(full.intercept_))
    return {"loo": loo, "train": train, "test": test, "model": model,
            "checkpoints": checkpoints, "optimum": optimum}


def _spearman(scores: np.ndarray, loo: np.ndarray) -> list[float]:
    return [float(spearmanr(scores[j], loo[:, j]).statistic) for j in range(TESTS)]


def test_tracin_agrees_with_leave_one_out(problem: dict) -> None:
    scores = tracin(problem["model"], problem["checkpoints"], _loss,
                    chunks(problem["train"], 32), problem["test"])
    assert scores.shape == (TESTS, N)
    rhos = _spearman(scores, problem["loo"])
    assert min(rhos) >= 0.75, rhos  # measured: 0.95-0.98


def test_ekfac_agrees_with_leave_one_out(problem: dict) -> None:
    pytest.importorskip("kronfluence", reason="needs the inside extra")
    from labcoat.inside._ekfac import ekfac

    # At the optimum, damping = the L2 strength: the regulariser's share of the Hessian.
    scores = ekfac(problem["optimum"], None, _loss, problem["train"], problem["test"],
                   damping=LAMBDA)
    rhos = _spearman(scores, problem["loo"])
    assert min(rhos) >= 0.75, rhos  # measured: 0.96-0.99


def test_tracin_equals_captum_tracincp(problem: dict, tmp_path: Path) -> None:
    captum = pytest.importorskip("captum.influence", reason="needs the inside extra")
    paths = []
    for k, ck in enumerate(problem["checkpoints"][:3]):
        paths.append(str(tmp_path / f"ck{k}.pt"))
        torch.save({"state": dict(ck.state), "lr": ck.lr}, paths[-1])

    def load(model: torch.nn.Module, path: str) -> float:
        saved = torch.load(path)
        model.load_state_dict(saved["state"])
        return saved["lr"]

    x, y = problem["train"]
    reference = captum.TracInCP(
        torch.nn.Linear(D, 1), torch.utils.data.TensorDataset(x, y), paths,
        checkpoints_load_func=load, batch_size=25,
        loss_fn=lambda out, target: F.binary_cross_entropy_with_logits(
            out.squeeze(-1), target, reduction="none"))
    expected = reference.influence(problem["test"], show_progress=False).numpy()
    ours = tracin(problem["model"], problem["checkpoints"][:3], _loss,
                  chunks(problem["train"], 16), problem["test"])
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-6)
    ours_self = self_influence(problem["model"], problem["checkpoints"][:3], _loss,
                               chunks(problem["train"], 16))
    theirs_self = reference.self_influence(show_progress=False).numpy()
    np.testing.assert_allclose(ours_self, theirs_self, rtol=1e-4, atol=1e-6)


def test_bad_inputs_end_in_one_message(problem: dict) -> None:
    with pytest.raises(LabcoatError, match="at least one checkpoint"):
        tracin(problem["model"], [], _loss, chunks(problem["train"], 8), problem["test"])
    with pytest.raises(LabcoatError, match="learning rate"):
        CheckpointWeights(step=1, state={}, lr=0.0)
    wrong = [CheckpointWeights(step=3, lr=0.1, state={"weight": torch.zeros(2, D)})]
    with pytest.raises(LabcoatError, match="step 3 does not fit the model"):
        tracin(problem["model"], wrong, _loss, chunks(problem["train"], 8), problem["test"])
    with pytest.raises(LabcoatError, match="no trainable parameter"):
        tracin(problem["model"], problem["checkpoints"], _loss, chunks(problem["train"], 8),
               problem["test"], params=["nope"])
