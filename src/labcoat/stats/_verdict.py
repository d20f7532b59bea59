"""The verdict on a hypothesis from one (family-adjusted) comparison: the report's last line.

A p-value alone cannot tell "no effect" from "not enough data". With a declared
smallest effect worth having, delta, the verdict reads the interval against
+-delta as well as against 0 (Lakens 2017, "Equivalence Tests"; Schuirmann
1987's two one-sided tests, TOST):

- significant, and the whole interval lies inside (-delta, +delta): the effect is
  real and too small to matter: "negligible", whichever its sign (a drop of 0.002
  and a rise of 0.002 against delta = 0.02 read alike);
- otherwise significant in the predicted direction: "supported";
- otherwise significant the other way: "refuted" (the interval reaches an effect of
  at least delta against the prediction);
- not significant, and TOST rejects |effect| >= delta: "no-effect" (no effect of
  at least delta);
- otherwise "inconclusive": more data would narrow the interval.

A factorial main effect aliased with an interaction (a resolution-III fraction)
estimates their sum, so a significant one is "aliased", never plainly supported;
nor is a sum inside +-delta "no-effect" (A = +2 and BC = -2 cancel): it is
"aliased" too, the reason saying what the sum does show.

In a family of m comparisons the interval and p-value are the adjusted ones
(`stats.adjust`), and TOST runs at alpha / m (Bonferroni, conservative under
any dependence), so every decision keeps its error rate at alpha family-wide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

from labcoat.stats._types import Difference

DECISIONS = ("supported", "negligible", "refuted", "no-effect", "aliased", "inconclusive")
Direction = Literal["increase", "decrease"]


@dataclass(frozen=True)
class Verdict:
    """decision: one of DECISIONS (see the module docstring). reason: one sentence.
    equivalence_p: TOST p-value for |effect| >= smallest_effect (nan without one)."""

    decision: str
    reason: str
    equivalence_p: float = float("nan")


def equivalence_p(diff: Difference, smallest_effect: float) -> float:
    """TOST p-value of H0: |effect| >= smallest_effect against |effect| < smallest_effect.

    The larger of the two one-sided p-values, each from the difference's t law
    (df = diff.df; normal when infinite): equivalence at level alpha holds exactly
    when the 1 - 2 alpha interval lies inside (-delta, +delta) (Schuirmann 1987).
    Equals statsmodels' ttost_ind / ttost_paired on the same data.
    """
    delta = float(smallest_effect)
    if not (math.isfinite(delta) and delta > 0):
        raise ValueError(f"smallest_effect={smallest_effect!r} must be a finite number > 0")
    if diff.se == 0:
        return 0.0 if abs(diff.estimate) < delta else 1.0
    df = diff.df if math.isfinite(diff.df) else np.inf  # scipy's t with df=inf is normal
    p_above = float(sps.t.sf((diff.estimate + delta) / diff.se, df))  # H0: effect <= -delta
    p_below = float(sps.t.cdf((diff.estimate - delta) / diff.se, df))  # H0: effect >= +delta
    return max(p_above, p_below)


def verdict(diff: Difference, *, alpha: float = 0.05, direction: Direction = "increase",
            smallest_effect: float | None = None, family_size: int = 1,
            aliases: tuple[str, ...] = (), over: str = "", adjusted: str = "") -> Verdict:
    """Judge the comparison `diff` (variant - control; p-value and CI already adjusted for
    a family of `family_size` comparisons) against the hypothesis.

    direction: the predicted sign of the effect. smallest_effect: delta in the metric's
    units, or None (then "no-effect" and "negligible" are never said). aliases: effects
    the estimate is confounded with (factorial fractions). over: what the test counted,
    e.g. "5 seeds per arm"; adjusted: e.g. " Holm-adjusted", both for the reason.
    """
    if direction not in ("increase", "decrease"):
        raise ValueError(f"direction={direction!r} must be 'increase' or 'decrease'")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must be in (0, 1), e.g. 0.05")
    if isinstance(family_size, bool) or int(family_size) != family_size or family_size < 1:
        raise ValueError(f"family_size={family_size!r} must be a whole number >= 1")
    if smallest_effect is not None and not (math.isfinite(smallest_effect)
                                            and smallest_effect > 0):
        raise ValueError(f"smallest_effect={smallest_effect!r} must be a finite number > 0, "
                         "or None")
    wanted = 1 if direction == "increase" else -1
    p = diff.p_value
    over = f" over {over}" if over else ""
    effect = (f"difference {diff.estimate:+.4g},{adjusted} {100 * diff.ci:.3g}% CI "
              f"[{diff.low:+.4g}, {diff.high:+.4g}]{over}, p={p:.3g}{adjusted}")
    significant = p < alpha
    sign = (diff.estimate > 0) - (diff.estimate < 0)
    tost = equivalence_p(diff, smallest_effect) if smallest_effect else float("nan")
    level = alpha / family_size
    if diff.se == 0 and diff.method in ("welch", "paired-t"):
        return Verdict("inconclusive", (
            f"{effect}, but the seeds show no variation at all: seed noise was not measured, "
            "so the test cannot judge (does the script use its seed?)"), tost)
    if aliases and (significant or tost < level):
        joined = " and ".join(aliases)
        way = "the predicted" if sign == wanted else "the opposite"
        shows = (f"< {alpha:g}, in {way} direction" if significant else
                 f">= {alpha:g}, inside +-{smallest_effect:g} (TOST p={tost:.3g})")
        return Verdict("aliased", (
            f"{effect} {shows}, but this fraction aliases the effect with {joined}: the "
            f"estimate is their sum, so it speaks for this effect only if {joined} is "
            "negligible; run the fold-over (the other half-fraction) to separate them"), tost)
    # Symmetric in the sign: a significant effect whose whole interval lies inside
    # +-delta is negligible in either direction (issue 30: a drop of 0.002 was "refuted"
    # where a rise of 0.002 was "negligible").
    if significant and smallest_effect and -smallest_effect < diff.low \
            and diff.high < smallest_effect:
        way = "in the predicted direction" if sign == wanted else "against the prediction"
        return Verdict("negligible", (
            f"{effect} < {alpha:g}: a real effect {way}, but the whole interval lies inside "
            f"+-{smallest_effect:g}, the smallest effect worth having"), tost)
    if significant and sign == wanted:
        return Verdict("supported", f"{effect} < {alpha:g}, in the predicted direction", tost)
    if significant:
        return Verdict("refuted", f"{effect} < {alpha:g}, opposite to the predicted direction",
                       tost)
    if smallest_effect and tost < level:
        per = f" (alpha {alpha:g}/{family_size})" if family_size > 1 else ""
        return Verdict("no-effect", (
            f"{effect} >= {alpha:g}; no effect of at least {smallest_effect:g}: equivalence "
            f"test (TOST) p={tost:.3g} < {level:.3g}{per}, the "
            f"{100 * (1 - 2 * level):.3g}% interval lies inside +-{smallest_effect:g}"), tost)
    more = ("more data would narrow the interval" if not smallest_effect else
            f"the interval still holds effects of +-{smallest_effect:g} (TOST p={tost:.3g}); "
            "more data would narrow it")
    return Verdict("inconclusive",
                   f"{effect} >= {alpha:g}: the data cannot tell the arms apart; {more}", tost)
