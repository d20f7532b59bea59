"""The verdict rule (`stats.verdict`) and its equivalence test (`stats.equivalence_p`):
TOST against statsmodels' ttost_ind / ttost_paired on seeded data, every decision on a
case checkable by hand (normal law, df = inf, so p-values are Phi of round numbers), the
family's alpha / m for TOST, and the input checks."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from labcoat import stats
from labcoat.stats import DECISIONS, Difference, equivalence_p, verdict

Z = float(sps.norm.ppf(0.975))  # 1.95996...: the 95% normal quantile


def diff(estimate: float, se: float, *, df: float = math.inf, ci: float = 0.95,
         aliases: tuple[str, ...] = ()) -> Difference:
    """A Difference whose interval and two-sided p-value follow from estimate and se."""
    law = sps.norm if math.isinf(df) else sps.t(df)
    half = float(law.ppf(0.5 + ci / 2)) * se
    p = float(2 * law.sf(abs(estimate) / se))
    return Difference(estimate, estimate - half, estimate + half, se, p, "hand", df=df, ci=ci,
                      aliases=aliases)


def quiet(f, *args, **kwargs):
    """Call f with labcoat's few-runs warnings silenced (the data sets here are small)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)
        return f(*args, **kwargs)


# --- equivalence_p against statsmodels ------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("delta", [0.3, 1.0, 2.5])
def test_equivalence_p_matches_statsmodels_welch(seed: int, delta: float) -> None:
    """labcoat's difference is b - a, so welch(a, b) is ttost_ind(b, a) (x1 - x2)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(0.0, 1.0, size=rng.integers(3, 9))
    b = rng.normal(0.4, 2.0, size=rng.integers(3, 9))  # unequal sizes and variances
    expected = ttost_ind(b, a, -delta, delta, usevar="unequal")[0]
    got = equivalence_p(quiet(stats.welch, a, b), delta)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("delta", [0.3, 1.0, 2.5])
def test_equivalence_p_matches_statsmodels_paired(seed: int, delta: float) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 10))
    shared = rng.normal(0.0, 1.0, n)  # a seed effect both arms share
    a = shared + rng.normal(0.0, 0.5, n)
    b = shared + rng.normal(0.2, 0.5, n)
    expected = ttost_paired(b, a, -delta, delta)[0]
    got = equivalence_p(quiet(stats.paired_t, a, b), delta)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-14)


def test_equivalence_p_uses_the_t_law_not_the_normal() -> None:
    """At 3 seeds per arm the t and normal tails differ by far more than rounding: the
    statsmodels match above would fail with the normal law. Hand check: estimate 0,
    se 0.5, delta 1, df 4: both one-sided p-values are P(T_4 > 2)."""
    d = diff(0.0, 0.5, df=4.0)
    assert equivalence_p(d, 1.0) == pytest.approx(float(sps.t(4).sf(2.0)), rel=1e-12)
    assert equivalence_p(d, 1.0) > 2 * float(sps.norm.sf(2.0))


def test_equivalence_p_hand_checked_normal() -> None:
    """estimate 0.1, se 0.1, delta 0.5: p_above = P(Z > 6), p_below = P(Z < -4); the
    larger is Phi(-4). Symmetric in the sign of the estimate."""
    assert equivalence_p(diff(0.1, 0.1), 0.5) == pytest.approx(sps.norm.cdf(-4.0), rel=1e-12)
    assert equivalence_p(diff(-0.1, 0.1), 0.5) == pytest.approx(sps.norm.cdf(-4.0), rel=1e-12)
    assert equivalence_p(diff(0.0, 0.5), 1.0) == pytest.approx(sps.norm.cdf(-2.0), rel=1e-12)
    # Estimate exactly at the margin: one of the two tests is at its null boundary, p = 1/2.
    assert equivalence_p(diff(1.0, 0.2), 1.0) == pytest.approx(0.5, rel=1e-12)


def test_equivalence_p_with_zero_se() -> None:
    exact = Difference(0.3, 0.3, 0.3, 0.0, 0.0, "hand")
    assert equivalence_p(exact, 0.5) == 0.0
    assert equivalence_p(exact, 0.3) == 1.0  # |effect| = delta is not inside (-delta, delta)
    assert equivalence_p(exact, 0.2) == 1.0


# --- each decision, by hand ------------------------------------------------------------


def test_no_effect_when_not_significant_and_tost_rejects() -> None:
    """0.1 +- 1.96 * 0.1 = [-0.096, 0.296]: not significant (p = 0.317); the 90% interval
    [-0.064, 0.264] lies inside +-0.5 (TOST p = Phi(-4) = 3.2e-5)."""
    d = diff(0.1, 0.1)
    assert d.p_value == pytest.approx(2 * sps.norm.sf(1.0))
    v = verdict(d, smallest_effect=0.5)
    assert v.decision == "no-effect"
    assert v.equivalence_p == pytest.approx(sps.norm.cdf(-4.0), rel=1e-12)
    assert "TOST" in v.reason and "0.5" in v.reason


def test_inconclusive_when_tost_fails_or_no_delta() -> None:
    d = diff(0.1, 0.1)
    # delta 0.2: TOST p = P(Z < -1) = 0.16: the interval still holds +-0.2.
    v = verdict(d, smallest_effect=0.2)
    assert v.decision == "inconclusive"
    assert v.equivalence_p == pytest.approx(sps.norm.cdf(-1.0), rel=1e-12)
    # No delta: the same data can never be "no-effect".
    v = verdict(d)
    assert v.decision == "inconclusive" and math.isnan(v.equivalence_p)


def test_supported_and_negligible() -> None:
    """0.3 +- 1.96 * 0.05 = [0.202, 0.398], p = 2 P(Z > 6): significant, increase."""
    d = diff(0.3, 0.05)
    assert verdict(d).decision == "supported"  # no delta: never negligible
    assert verdict(d, smallest_effect=0.35).decision == "supported"  # 0.398 >= 0.35
    v = verdict(d, smallest_effect=0.5)  # 0.398 < 0.5: real, too small to matter
    assert v.decision == "negligible"
    assert "0.5" in v.reason
    # The far end just above delta: supported (the interval still holds effects >= delta).
    assert verdict(d, smallest_effect=0.3 + Z * 0.05 - 1e-9).decision == "supported"
    assert verdict(d, smallest_effect=0.3 + Z * 0.05 + 1e-9).decision == "negligible"


def test_refuted_when_significant_the_other_way() -> None:
    d = diff(-0.3, 0.05)
    assert verdict(d).decision == "refuted"
    # An opposite effect reaching past -delta is refuted: [-0.398, -0.202] reaches -0.35.
    assert verdict(d, smallest_effect=0.35).decision == "refuted"
    # A tiny opposite effect whose whole interval lies inside +-delta is negligible, as a
    # tiny effect the predicted way is (issue 30; it used to be "refuted", the defect).
    v = verdict(d, smallest_effect=0.5)
    assert v.decision == "negligible" and "against the prediction" in v.reason


@pytest.mark.parametrize("sign", [+1, -1])
def test_a_tiny_effect_reads_the_same_whichever_its_sign(sign: int) -> None:
    """Issue 30: a drop of 0.002 with smallest effect 0.02 was REFUTED while a rise of 0.002
    was NEGLIGIBLE. Seeds with a 0.002 shift and SD 0.0005: scipy's Welch test says
    significant and its 95% interval lies inside +-0.02, so both signs are negligible."""
    base = np.array([0.500, 0.5005, 0.4995, 0.5010, 0.4990, 0.5000, 0.5002, 0.4998])
    shifted = base[::-1] + sign * 0.002
    ref = sps.ttest_ind(shifted, base, equal_var=False)
    ref_ci = ref.confidence_interval(0.95)
    assert ref.pvalue < 0.05 and -0.02 < ref_ci.low and ref_ci.high < 0.02
    d = quiet(stats.welch, base, shifted)
    assert (d.low, d.high, d.p_value) == pytest.approx((ref_ci.low, ref_ci.high, ref.pvalue))
    for direction in ("increase", "decrease"):
        assert verdict(d, direction=direction, smallest_effect=0.02).decision == "negligible"
    # Without a smallest effect the sign decides, as before.
    assert verdict(d).decision == ("supported" if sign > 0 else "refuted")


def test_direction_decrease_mirrors_increase() -> None:
    """For "decrease" the interval's end toward -delta is low: -0.398 > -0.5, negligible."""
    assert verdict(diff(-0.3, 0.05), direction="decrease").decision == "supported"
    assert verdict(diff(-0.3, 0.05), direction="decrease",
                   smallest_effect=0.5).decision == "negligible"
    assert verdict(diff(-0.3, 0.05), direction="decrease",
                   smallest_effect=0.35).decision == "supported"
    assert verdict(diff(0.3, 0.05), direction="decrease",
                   smallest_effect=0.5).decision == "negligible"  # inside +-0.5: either sign
    assert verdict(diff(0.3, 0.05), direction="decrease",
                   smallest_effect=0.35).decision == "refuted"
    assert verdict(diff(-0.1, 0.1), direction="decrease",
                   smallest_effect=0.5).decision == "no-effect"


def test_aliased_when_significant_and_aliases_given() -> None:
    for estimate in (0.3, -0.3):  # either direction
        v = verdict(diff(estimate, 0.05, aliases=("B*C",)), aliases=("B*C",))
        assert v.decision == "aliased"
        assert "B*C" in v.reason and "fold-over" in v.reason
    v = verdict(diff(0.3, 0.05), aliases=("B*C", "-D*E"))
    assert v.decision == "aliased" and "B*C and -D*E" in v.reason
    # Aliased even where the unaliased estimate would be "negligible".
    assert verdict(diff(0.3, 0.05), aliases=("B*C",), smallest_effect=0.5).decision == "aliased"
    # Without aliases the same difference is plainly supported.
    assert verdict(diff(0.3, 0.05), aliases=()).decision == "supported"
    # Not significant: not "aliased" (there is no effect to attribute).
    assert verdict(diff(0.1, 0.1), aliases=("B*C",)).decision == "inconclusive"


def test_without_delta_never_no_effect_or_negligible() -> None:
    """Over a grid of estimates (tiny to large, both signs) and SEs, and both directions."""
    seen = set()
    for estimate in np.linspace(-1.0, 1.0, 41):
        for se in (1e-4, 0.01, 0.1, 1.0):
            for direction in ("increase", "decrease"):
                decision = verdict(diff(float(estimate), se), direction=direction).decision
                assert decision not in ("no-effect", "negligible")
                seen.add(decision)
    assert seen == {"supported", "refuted", "inconclusive"}


def test_every_decision_is_listed() -> None:
    cases = [verdict(diff(0.3, 0.05)), verdict(diff(0.3, 0.05), smallest_effect=0.5),
             verdict(diff(-0.3, 0.05)), verdict(diff(0.1, 0.1), smallest_effect=0.5),
             verdict(diff(0.3, 0.05), aliases=("AB",)), verdict(diff(0.1, 0.1))]
    assert sorted(v.decision for v in cases) == sorted(DECISIONS)


# --- the family ------------------------------------------------------------------------


def test_tost_runs_at_alpha_over_family_size() -> None:
    """estimate 0, se 0.5, delta 1: TOST p = Phi(-2) = 0.0228, between 0.05/3 and 0.05."""
    d = diff(0.0, 0.5)
    p = float(sps.norm.cdf(-2.0))
    assert 0.05 / 3 < p < 0.05
    one = verdict(d, smallest_effect=1.0, family_size=1)
    three = verdict(d, smallest_effect=1.0, family_size=3)
    assert one.decision == "no-effect"
    assert three.decision == "inconclusive"
    assert one.equivalence_p == three.equivalence_p == pytest.approx(p, rel=1e-12)
    # se 1/3: TOST p = Phi(-3) = 0.00135 < 0.05/3: no-effect in the family too.
    v = verdict(diff(0.0, 1 / 3), smallest_effect=1.0, family_size=3)
    assert v.decision == "no-effect" and "(alpha 0.05/3)" in v.reason


def test_holm_adjusted_family_as_the_report_judges_it() -> None:
    """Three comparisons, p = 0.04, 0.5, 0.6 unadjusted: the first is "supported" alone,
    but Holm makes it 3 * 0.04 = 0.12, so in the family it is not."""
    z = float(sps.norm.isf(0.02))  # two-sided p 0.04
    family = [diff(z * 0.1, 0.1), diff(float(sps.norm.isf(0.25)) * 0.1, 0.1),
              diff(float(sps.norm.isf(0.3)) * 0.1, 0.1)]
    assert verdict(family[0]).decision == "supported"
    adjusted = stats.adjust(family, "holm")
    assert adjusted[0].difference.p_value == pytest.approx(0.12)
    judged = [verdict(a.difference, family_size=3) for a in adjusted]
    assert [v.decision for v in judged] == ["inconclusive"] * 3


def test_report_path_on_seeds() -> None:
    """welch on seeds -> Holm -> verdict with family_size=3, as _adjust_and_judge calls it:
    a clear winner stays supported, an identical arm with a tight spread is no-effect."""
    a = np.array([10.0, 10.1, 9.9, 10.05, 9.95])
    big = a + 1.0  # +1 exactly, sd 0.079: t = 1 / 0.05, p ~ 1e-8
    same = a[::-1] + np.array([0.01, -0.01, 0.0, 0.01, -0.01])
    noisy = np.array([8.0, 12.0, 9.0, 11.0, 10.5])
    diffs = [quiet(stats.welch, a, b) for b in (big, same, noisy)]
    adjusted = stats.adjust(diffs, "holm")
    decisions = [verdict(x.difference, smallest_effect=0.5, family_size=3).decision
                 for x in adjusted]
    assert decisions == ["supported", "no-effect", "inconclusive"]


# --- input checks ----------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {"direction": "up"}, {"direction": "Increase"},
    {"alpha": 0.0}, {"alpha": 1.0}, {"alpha": -0.05}, {"alpha": 5.0}, {"alpha": math.nan},
    {"family_size": 0}, {"family_size": -2}, {"family_size": 1.5}, {"family_size": True},
    {"smallest_effect": -0.1}, {"smallest_effect": math.nan}, {"smallest_effect": math.inf},
])
def test_bad_inputs_raise(kwargs: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        verdict(diff(0.1, 0.1), **kwargs)


@pytest.mark.parametrize("delta", [0.0, -1.0, math.nan, math.inf])
def test_equivalence_p_rejects_bad_delta(delta: float) -> None:
    with pytest.raises(ValueError, match="smallest_effect"):
        equivalence_p(diff(0.1, 0.1), delta)


# --- found by these tests, fixed in 53cc75d (they were strict xfails) -----------------


def test_aliased_estimate_is_never_no_effect() -> None:
    """A resolution-III estimate is A + BC: a true A = +2 cancelled by BC = -2 looks like
    no effect, so an aliased sum inside +-delta must not be read as "no-effect" on A."""
    d = diff(0.1, 0.1, aliases=("B*C",))  # A + BC: not significant, inside +-0.5
    v = verdict(d, smallest_effect=0.5, aliases=("B*C",))
    assert v.decision == "aliased"
    assert "B*C" in v.reason and "inside +-0.5" in v.reason
    assert v.equivalence_p == pytest.approx(sps.norm.cdf(-4.0), rel=1e-12)
    # TOST fails (p = Phi(-1) = 0.16 at delta 0.2): nothing to attribute, inconclusive.
    assert verdict(d, smallest_effect=0.2, aliases=("B*C",)).decision == "inconclusive"
    # In a family TOST runs at alpha/m for aliased sums too: Phi(-2) = 0.023 > 0.05/3.
    d = diff(0.0, 0.5, aliases=("B*C",))
    assert verdict(d, smallest_effect=1.0, aliases=("B*C",)).decision == "aliased"
    assert verdict(d, smallest_effect=1.0, aliases=("B*C",),
                   family_size=3).decision == "inconclusive"


@pytest.mark.parametrize("case", ["zero", "negative-aliased"])
def test_verdict_rejects_every_bad_smallest_effect(case: str) -> None:
    if case == "zero":
        args: dict = {"smallest_effect": 0.0}
        d = diff(0.1, 0.1)
    else:
        args = {"smallest_effect": -1.0, "aliases": ("B*C",)}
        d = diff(0.3, 0.05)
    with pytest.raises(ValueError, match="smallest_effect"):
        verdict(d, **args)


def test_no_seed_to_seed_variation_is_not_evidence():
    # t = d / 0: scipy says t=inf, p=0 as ours does; that is arithmetic, not evidence, so
    # the verdict must not call it supported, and a warning must say why
    with pytest.warns(stats.StatsWarning, match="no seed-to-seed variation"):
        diff = stats.welch([1.0] * 5, [2.0] * 5)
    assert sps.ttest_ind([2.0] * 5, [1.0] * 5, equal_var=False).pvalue == diff.p_value == 0
    assert verdict(diff).decision == "inconclusive"
    with pytest.warns(stats.StatsWarning, match="no seed-to-seed variation"):
        paired = stats.paired_t([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0, 6.0])
    assert verdict(paired).decision == "inconclusive"
