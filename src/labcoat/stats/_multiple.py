"""Combining and correcting several estimates."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from labcoat.stats._checks import check_ci
from labcoat.stats._types import Difference


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm 1979), in the input order.

    Controls the family-wise error rate when several variants are each
    compared with the control.
    """
    p = np.asarray(p_values, dtype=float)
    if not np.all((p >= 0) & (p <= 1)):  # also catches NaN
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    m = p.size
    order = np.argsort(p)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    result = np.empty(m)
    result[order] = adjusted
    return result.tolist()


def macro_average(differences: Sequence[Difference], ci: float = 0.95) -> Difference:
    """Unweighted mean of independent per-task differences (a macro average).

    SE = sqrt(sum se_t^2) / T, since tasks use disjoint items; normal interval.
    """
    check_ci(ci)
    if not differences:
        raise ValueError("macro_average needs at least one per-task difference")
    t = len(differences)
    estimate = float(np.mean([d.estimate for d in differences]))
    se = float(np.sqrt(sum(d.se**2 for d in differences)) / t)
    z = float(sps.norm.ppf(0.5 + ci / 2))
    p = float(2 * sps.norm.sf(abs(estimate / se))) if se > 0 else (1.0 if estimate == 0 else 0.0)
    return Difference(estimate, estimate - z * se, estimate + z * se, se, p,
                      f"macro({differences[0].method})", sum(d.n for d in differences), ci=ci)
