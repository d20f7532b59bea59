"""Combining and correcting several estimates: p-value adjustment, adjusted intervals,
macro averages.

Whenever an analysis makes more than one comparison, both its p-values and its
confidence intervals are adjusted for the family (`adjust`), and the result
names the family size and the method so a report can say what was corrected.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as sps

from labcoat.stats._checks import StatsWarning, check_ci
from labcoat.stats._items import mcnemar_interval
from labcoat.stats._types import Difference


def _p_array(p_values: Sequence[float]) -> np.ndarray:
    p = np.asarray(p_values, dtype=float).ravel()
    bad = ~((p >= 0) & (p <= 1))  # also catches NaN
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"p-values must lie in [0, 1]: p[{i}] = {p[i]} "
                         f"({int(bad.sum())} of {p.size} outside)")
    return p


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm 1979), in the input order.

    Controls the family-wise error rate when several variants are each
    compared with the control.
    """
    p = _p_array(p_values)
    m = p.size
    order = np.argsort(p)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    result = np.empty(m)
    result[order] = adjusted
    return result.tolist()


def bonferroni(p_values: Sequence[float]) -> list[float]:
    """Bonferroni adjusted p-values min(1, m * p), in the input order (FWER control)."""
    p = _p_array(p_values)
    return np.minimum(1.0, p * p.size).tolist()


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (Benjamini & Hochberg 1995), in the input order.

    p_values: (m,). Adjusted p_(i) = min over j >= i of m p_(j) / j (sorted
    ascending); rejecting where adjusted <= alpha controls the false discovery
    rate at alpha for independent or positively dependent tests.
    """
    p = _p_array(p_values)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    result = np.empty(m)
    result[order] = adjusted
    return result.tolist()


def _unadjusted(p_values: Sequence[float]) -> list[float]:
    return _p_array(p_values).tolist()


def _simultaneous_level(p_adjusted: list[float], alpha: float, m: int) -> float:
    return 1 - alpha / m  # Bonferroni intervals: each at 1 - alpha/m


def _fcr_level(p_adjusted: list[float], alpha: float, m: int) -> float:
    rejected = sum(q <= alpha for q in p_adjusted)  # R, Benjamini & Yekutieli (2005)
    return 1 - max(rejected, 1) * alpha / m


def _family_level(p_adjusted: list[float], alpha: float, m: int) -> float:
    return 1 - alpha


@dataclass(frozen=True)
class Correction:
    """One multiple-comparison correction, everything labcoat needs of it in one place:
    the design's `correction:` key, reports, `adjust` and power planning all read
    CORRECTIONS. Adding a method is one entry here (and a test against statsmodels'
    `multipletests`, as tests/stats/test_multiple.py does for the others)."""

    name: str
    """In reports: "Holm-adjusted p", "Holm over 3 comparisons"."""
    adjust_p: Callable[[Sequence[float]], list[float]]
    """(m,) p-values -> (m,) adjusted p-values, in the input order."""
    level: Callable[[list[float], float, int], float]
    """(adjusted p-values, family alpha, m) -> the level of each adjusted interval."""
    interval: str
    """The kind of adjusted interval, in words (a report footnote)."""
    divides_alpha: bool
    """Power is planned at alpha / m (a guaranteed lower bound, see `family_alpha`)."""
    plan_note: str = ""
    """Said after a power plan at alpha / m, e.g. that it is conservative for BH."""


CORRECTIONS: dict[str, Correction] = {
    "holm": Correction("Holm", holm, _simultaneous_level,
                       "simultaneous Bonferroni CI", True),
    "bh": Correction("Benjamini-Hochberg", benjamini_hochberg, _fcr_level,
                     "FCR-adjusted CI (Benjamini & Yekutieli 2005)", True, " (conservative)"),
    "bonferroni": Correction("Bonferroni", bonferroni, _simultaneous_level,
                             "simultaneous Bonferroni CI", True),
    "none": Correction("unadjusted", _unadjusted, _family_level, "", False),
}
METHODS = tuple(CORRECTIONS)


def correction(method: str) -> Correction:
    """The correction named `method`; the error lists the known ones."""
    if method not in CORRECTIONS:
        raise ValueError(f"method={method!r} is not known; choose one of {', '.join(METHODS)}")
    return CORRECTIONS[method]


@dataclass(frozen=True)
class Adjusted:
    """One comparison of a family, with its p-value and interval adjusted for the family.

    difference: the comparison with p_value = p_adjusted and (low, high) the
        adjusted interval at level ci_level (its `ci` field says so too).
    original: the comparison as it was passed in, unadjusted.
    method: "holm", "bh", "bonferroni" or "none"; family_size: m comparisons.
    family_ci: the level asked of the family (1 - alpha); ci_level: the level
        each adjusted interval was computed at (see `adjust`).
    """

    difference: Difference
    original: Difference
    p_adjusted: float
    method: str
    family_size: int
    ci_level: float
    family_ci: float

    @property
    def estimate(self) -> float:
        return self.difference.estimate

    @property
    def low(self) -> float:
        return self.difference.low

    @property
    def high(self) -> float:
        return self.difference.high

    def excludes_zero(self) -> bool:
        return self.difference.excludes_zero()

    @property
    def note(self) -> str:
        """How the family was corrected, in words, for a report footnote."""
        m, method = self.family_size, CORRECTIONS[self.method]
        if self.method == "none":
            return f"unadjusted: one of {m} comparisons, {100 * self.ci_level:.4g}% CI"
        return (f"{method.name}-adjusted p over a family of {m} comparisons; "
                f"{100 * self.ci_level:.4g}% {method.interval} for family level "
                f"{100 * self.family_ci:.4g}%")


def adjust(differences: Sequence[Difference], method: str = "holm", *,
           ci: float | None = None) -> list[Adjusted]:
    """Adjust the p-values and intervals of a family of m comparisons, in the input order.

    ci: the family level 1 - alpha (default: the differences' common `ci`).
    p-values: Holm (1979), Benjamini-Hochberg (1995), Bonferroni, or none.
    Intervals, rebuilt as estimate +- q * se with the t quantile at each
    difference's df (normal when df is infinite) at level:
      - "bonferroni" and "holm": 1 - alpha/m, simultaneous Bonferroni intervals.
        For Holm this is the usual conservative choice: Holm's step-down
        intervals (Strassburger & Bretz 2008) shrink to the null boundary for
        rejected hypotheses, which says little, so an interval may still cover 0
        for a comparison Holm rejects (Holm rejects at least what Bonferroni does).
      - "bh": 1 - R alpha/m with R the number of BH rejections at alpha: the
        false-coverage-rate intervals of Benjamini & Yekutieli (2005). With
        normal or t tests they exclude 0 exactly for the BH rejections. The same
        level is used for the unselected comparisons (and 1 - alpha/m when
        R = 0), so all intervals in the family are comparable.
      - "none": the family level, unadjusted.
    The adjusted Wald intervals of 0/1 scores (Agresti-Min, Agresti-Caffo) are widened
    about their own centre by the ratio of the quantiles. Any other difference whose
    interval is not estimate +- q * se (e.g. a bootstrap interval) gets a symmetric one
    from its se, with a StatsWarning.
    """
    chosen = correction(method)
    diffs = list(differences)
    if not diffs:
        return []
    if ci is None:
        levels = sorted({d.ci for d in diffs})
        if len(levels) > 1:
            raise ValueError(
                f"the differences have different CI levels {levels}; pass ci= to set the "
                "family level"
            )
        ci = levels[0]
    check_ci(ci)
    m = len(diffs)
    alpha = 1 - ci
    p_adj = chosen.adjust_p([d.p_value for d in diffs])
    level = chosen.level(p_adj, alpha, m)
    result = []
    for i, (d, q) in enumerate(zip(diffs, p_adj, strict=True)):
        low, high = _interval(d, level, i)
        adjusted = replace(d, low=low, high=high, p_value=float(q), ci=level)
        result.append(Adjusted(adjusted, d, float(q), method, m, level, ci))
    return result


def _quantile(level: float, df: float) -> float:
    upper = 0.5 + level / 2
    return float(sps.t.ppf(upper, df) if math.isfinite(df) else sps.norm.ppf(upper))


# Adjusted Wald intervals of 0/1 scores (stats._items): centre +- z * se of a table with
# pseudo-counts added, so the interval is symmetric about its own centre, not the estimate.
ADJUSTED_WALD = ("paired-agresti-min", "unpaired-agresti-caffo")


def _interval(d: Difference, level: float, index: int) -> tuple[float, float]:
    if math.isnan(d.se) or d.se < 0:
        raise ValueError(f"difference {index} ({d.method}) has se={d.se}; need a finite SE >= 0")
    if "paired-mcnemar" in d.method and len(d.counts) == 3:
        # The same method at the new level: Tango's interval, reaching 0 unless the exact
        # McNemar test rejects at 1 - level.
        _, low, high = mcnemar_interval(*d.counts, ci=level)
        return low, high
    if d.se == 0 or math.isinf(d.se):
        return (d.estimate, d.estimate) if d.se == 0 else (-math.inf, math.inf)
    if d.method in ADJUSTED_WALD:  # rescale about its centre (exact unless cut at +-1)
        centre, half = (d.low + d.high) / 2, (d.high - d.low) / 2
        half *= _quantile(level, d.df) / _quantile(d.ci, d.df)
        return max(-1.0, centre - half), min(1.0, centre + half)
    half = _quantile(d.ci, d.df) * d.se
    # 1e-3 tolerates hand-rounded quantiles (1.96 for 1.95996...); bootstrap and other
    # asymmetric intervals differ by far more.
    if not (math.isclose(d.high - d.estimate, half, rel_tol=1e-3)
            and math.isclose(d.estimate - d.low, half, rel_tol=1e-3)):
        warnings.warn(
            f"difference {index} ({d.method}) has an interval [{d.low:.4g}, {d.high:.4g}] "
            f"that is not estimate +- quantile * se (e.g. a bootstrap interval); its adjusted "
            f"interval is rebuilt from se={d.se:.4g} as a "
            f"{'t' if math.isfinite(d.df) else 'normal'} interval",
            StatsWarning, stacklevel=3,
        )
    new_half = _quantile(level, d.df) * d.se
    return d.estimate - new_half, d.estimate + new_half


def macro_average(differences: Sequence[Difference], ci: float = 0.95) -> Difference:
    """Unweighted mean of independent per-task differences (a macro average).

    SE = sqrt(sum se_t^2) / T, since tasks use disjoint items; normal interval. One task
    is its own average: its difference comes back unchanged (at level ci), so a small-n
    exact test (paired 0/1 items: McNemar) is not replaced by a normal one.
    """
    check_ci(ci)
    if not differences:
        raise ValueError("macro_average needs at least one per-task difference")
    if len(differences) == 1 and differences[0].ci == ci:
        only = differences[0]
        return replace(only, method=f"macro({only.method})")
    t = len(differences)
    estimate = float(np.mean([d.estimate for d in differences]))
    se = float(np.sqrt(sum(d.se**2 for d in differences)) / t)
    z = float(sps.norm.ppf(0.5 + ci / 2))
    p = float(2 * sps.norm.sf(abs(estimate / se))) if se > 0 else (1.0 if estimate == 0 else 0.0)
    return Difference(estimate, estimate - z * se, estimate + z * se, se, p,
                      f"macro({differences[0].method})", sum(d.n for d in differences), ci=ci)
