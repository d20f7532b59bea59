"""pass@k and pass^k of an item answered n times, c of them correctly.

pass@k: the chance that at least one of k answers drawn without replacement from the n is
correct, Chen et al. 2021's unbiased estimator ("Evaluating Large Language Models Trained
on Code", arXiv:2107.03374, eq. 1): 1 - C(n-c, k) / C(n, k).
pass^k: the chance that all k are correct (Yao et al. 2024, tau-bench, arXiv:2406.12045):
C(c, k) / C(n, k). pass@k near 1 with pass^k near 0 is a flaky item: the model can answer
it, but not reliably.

Both are ratios of binomial coefficients, computed here in exact integer arithmetic
(Python ints) and rounded once to a float, so neither cancellation in 1 - x nor the
product of k-term ratios loses digits: the result is the correctly rounded value of the
estimator (Chen et al.'s numpy product, 1 - prod(1 - k / arange(n-c+1, n+1)), agrees to
about 1e-15).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
from numpy.typing import ArrayLike


def _check(n: int, c: int, k: int) -> None:
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or int(value) != value:
            raise ValueError(f"{name}={value!r} must be a whole number")
    if n < 1:
        raise ValueError(f"n={n} must be at least 1 answer")
    if not 0 <= c <= n:
        raise ValueError(f"c={c} correct answers must be between 0 and n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and n={n} (the estimator needs k <= n "
                         "answers per item)")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. 2021's unbiased pass@k of one item: 1 - C(n-c, k) / C(n, k)."""
    _check(n, c, k)
    n, c, k = int(n), int(c), int(k)
    total = comb(n, k)
    return float(Fraction(total - comb(n - c, k), total))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one item (all k answers correct): C(c, k) / C(n, k)."""
    _check(n, c, k)
    n, c, k = int(n), int(c), int(k)
    return float(Fraction(comb(c, k), comb(n, k)))


def pass_at_k_items(n: ArrayLike, c: ArrayLike, k: int) -> np.ndarray:
    """`pass_at_k` of each item: n, c (n_items,) answers and correct ones -> (n_items,)."""
    return np.array([pass_at_k(a, b, k) for a, b in zip(_ints(n), _ints(c), strict=True)],
                    dtype=float)


def pass_hat_k_items(n: ArrayLike, c: ArrayLike, k: int) -> np.ndarray:
    """`pass_hat_k` of each item: n, c (n_items,) -> (n_items,)."""
    return np.array([pass_hat_k(a, b, k) for a, b in zip(_ints(n), _ints(c), strict=True)],
                    dtype=float)


def _ints(values: ArrayLike) -> list[int]:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"expected a (n_items,) array of counts, got shape {array.shape}")
    return [int(v) if float(v) == int(v) else v for v in array.tolist()]
