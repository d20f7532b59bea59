"""Synthetic scaling-law data shared by the scaling tests (as fixtures)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

# Besiroglu et al. 2024 (Epoch), their refit of Hoffmann et al.'s approach 3 on
# data extracted from Hoffmann et al.'s figure 4.
EPOCH = {"E": 1.8172, "A": 482.01, "alpha": 0.3478, "B": 2085.43, "beta": 0.3658}


def chinchilla_loss(N: np.ndarray, D: np.ndarray, p: dict[str, float]) -> np.ndarray:
    return p["E"] + p["A"] * N ** -p["alpha"] + p["B"] * D ** -p["beta"]


def chinchilla_grid(sizes: int = 8, n_min: float = 7e7, n_max: float = 1.6e10,
                    ratios: tuple[float, ...] = (5, 10, 20, 40, 80)
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(N, D): `sizes` model sizes, each trained at several tokens-per-parameter ratios
    (Chinchilla's 70M-16B parameter range)."""
    n = np.repeat(np.geomspace(n_min, n_max, sizes), len(ratios))
    d = n * np.tile(np.asarray(ratios, dtype=float), sizes)
    return n, d


@pytest.fixture(scope="session")
def epoch() -> dict[str, float]:
    return dict(EPOCH)


@pytest.fixture(scope="session")
def law() -> Callable[..., np.ndarray]:
    return chinchilla_loss


@pytest.fixture(scope="session")
def grid() -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    return chinchilla_grid
