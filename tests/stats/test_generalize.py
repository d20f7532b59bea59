"""Does an effect generalize across tasks: verdicts on hand-built task families, with the
pooled effect checked against random_effects and the power against statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import normal_power

from labcoat.stats._generalize import VERDICTS, generalization, t_power, z_power
from labcoat.stats._meta import random_effects
from labcoat.stats._multiple import adjust
from labcoat.stats._types import Difference


def _diff(estimate: float, se: float) -> Difference:
    """A normal (item-level style) per-task difference with its two-sided p-value."""
    z = stats.norm.ppf(0.975)
    p = float(2 * stats.norm.sf(abs(estimate / se)))
    return Difference(estimate, estimate - z * se, estimate + z * se, se, p, "paired", 500)


def _tasks(estimates: list[float], ses: list[float]) -> dict[str, Difference]:
    return {f"task{i}": _diff(e, s) for i, (e, s) in enumerate(zip(estimates, ses, strict=True))}


BROAD = _tasks([0.05, 0.04, 0.06, 0.05, 0.03, 0.05], [0.01] * 6)
MIXED = _tasks([0.1, 0.1, -0.1, 0.0, 0.01], [0.01] * 5)
HURTS = _tasks([-0.05, -0.04, -0.06, -0.05], [0.01] * 4)
ONE_BIG_WIN = _tasks([0.5, 0.0, -0.05, 0.02, -0.03, 0.01], [0.05, 0.1, 0.1, 0.1, 0.1, 0.1])
NULL_PRECISE = _tasks([0.001, -0.001, 0.0005, 0.0], [0.001] * 4)
NULL_NOISY = _tasks([0.01, -0.02, 0.0, 0.015], [0.05] * 4)


def test_helps_broadly() -> None:
    """Every task up by about 0.05 with SE 0.01: pooled CI above 0, 6 wins, no loss."""
    result = generalization(BROAD, smallest_effect=0.01)
    assert result.verdict == "helps broadly"
    assert (len(result.wins), result.losses, result.ties) == (6, (), ())
    assert result.summary.startswith("helps broadly: pooled effect +0.0467")


def test_helps_some_and_hurts_others() -> None:
    """Two tasks significantly up and one significantly down."""
    result = generalization(MIXED, smallest_effect=0.01)
    assert result.verdict == "helps some tasks and hurts others"
    assert result.wins == ("task0", "task1") and result.losses == ("task2",)
    assert result.ties == ("task3", "task4")
    assert result.pooled.i2 > 0.9  # the spread is real, and reported


def test_hurts_and_direction_flips_it() -> None:
    """All tasks down: "hurts"; the same numbers with lower-is-better "help broadly"."""
    assert generalization(HURTS, smallest_effect=0.01).verdict == "hurts"
    lower_better = generalization(HURTS, smallest_effect=0.01, direction="decrease")
    assert lower_better.verdict == "helps broadly"
    assert len(lower_better.wins) == 4 and "lower is better" in lower_better.summary


def test_helps_some_tasks_when_the_pooled_effect_is_unclear() -> None:
    """One strong win among noisy ties: a win but heterogeneity widens the pooled CI."""
    result = generalization(ONE_BIG_WIN, smallest_effect=0.01)
    assert result.verdict == "helps some tasks"
    assert result.wins == ("task0",) and not result.losses
    assert result.pooled.low < 0 < result.pooled.high


def test_no_detectable_effect_when_the_ci_excludes_the_smallest_effect() -> None:
    """Precise zeros: the pooled CI lies inside (-0.01, 0.01), so "no detectable effect"."""
    result = generalization(NULL_PRECISE, smallest_effect=0.01)
    assert result.verdict == "no detectable effect"
    assert -0.01 < result.pooled.low and result.pooled.high < 0.01
    assert "within ±0.01" in result.summary


def test_not_enough_data_is_never_called_no_effect() -> None:
    """Noisy zeros (SE 0.05 per task) cannot see a 0.01 effect: the verdict says so and
    states the power."""
    result = generalization(NULL_NOISY, smallest_effect=0.01)
    assert result.verdict == "not enough data to tell"
    assert result.power is not None and result.power < 0.8
    assert result.summary.startswith("not enough data to tell (an effect of Δ=0.01 is not "
                                     f"ruled out (equivalence test p={result.equivalence_p:.3g})"
                                     f"; power {result.power:.2f} to detect Δ=0.01)")


def test_without_a_smallest_effect_nothing_significant_is_not_enough_data() -> None:
    """No declared effect size: no power, and never the claim "no detectable effect"."""
    result = generalization(NULL_PRECISE, smallest_effect=None)
    assert result.power is None
    assert result.verdict == "not enough data to tell"
    assert "no smallest effect declared" in result.summary


def test_power_alone_never_declares_no_effect() -> None:
    """Issue 30: high power is not evidence of no effect. Pooled estimate 1.5 SE with
    delta = 3 SE over 4 equal tasks: not significant, and the z power to see delta
    (Phi(3 - 1.96) = 0.85) passed the old rule's 0.8, which said "no detectable effect";
    the pooled interval still reaches past delta, so the equivalence test cannot rule it
    out. This expectation replaces the old one, which was the defect."""
    se = 0.02  # four equal tasks: pooled SE 0.01
    result = generalization(_tasks([0.015] * 4, [se] * 4), smallest_effect=0.03)
    assert result.pooled.se == pytest.approx(0.01)
    assert z_power(0.03, 0.01, 0.05) == pytest.approx(0.851, abs=1e-3)  # the old rule's 0.85
    assert result.pooled.high > 0.03
    assert result.verdict == "not enough data to tell"
    tost = max(stats.t(3).sf((0.015 + 0.03) / 0.01), stats.t(3).cdf((0.015 - 0.03) / 0.01))
    assert result.equivalence_p == pytest.approx(tost)
    assert "not ruled out" in result.reason


@pytest.mark.parametrize(("estimates", "ses"), [
    ([0.10, -0.05, 0.02], [0.01, 0.02, 0.015]),
    ([0.03, -0.02, 0.01, 0.04, -0.03], [0.01, 0.02, 0.015, 0.01, 0.02]),
    ([0.004, 0.005, 0.003], [0.02, 0.03, 0.025]),  # Q < k - 1: HKSJ below DL, modified
])
def test_pooled_interval_and_equivalence_match_statsmodels_hksj(estimates, ses) -> None:
    """The pooled interval is statsmodels' combine_effects(method_re="dl", use_t=True)
    "random effect wls" row (HKSJ, t(k-1)) whenever its SE is not below the DL one, and
    the DL-width t(k-1) interval otherwise (the modified HKSJ); the equivalence p-value is
    the two one-sided t(k-1) tests on that SE."""
    from statsmodels.stats.meta_analysis import combine_effects

    k = len(estimates)
    y, v = np.array(estimates), np.array(ses) ** 2
    result = generalization(_tasks(estimates, ses), smallest_effect=0.15)
    ref = combine_effects(y, v, method_re="dl", use_t=True)
    if ref.tau2 < 0:  # statsmodels' DL does not truncate tau^2 at 0; labcoat does: by hand
        w = 1 / v
        mean, sd_re = float(np.sum(w * y) / np.sum(w)), float(np.sqrt(1 / np.sum(w)))
        sd_hksj = float(np.sqrt(np.sum(w * (y - mean) ** 2) / ((k - 1) * np.sum(w))))
        assert sd_hksj < sd_re  # the case the modification is for
    else:
        mean, sd_re, sd_hksj = ref.mean_effect_re, ref.sd_eff_w_re, ref.sd_eff_w_re_hksj
        row = ref.summary_frame().loc["random effect wls"]
        assert sd_hksj >= sd_re
        assert (result.pooled.low, result.pooled.high) == pytest.approx(
            (row["ci_low"], row["ci_upp"]))
    se = max(float(sd_hksj), float(sd_re))
    q = stats.t.ppf(0.975, k - 1)
    assert result.pooled.estimate == pytest.approx(mean)
    assert (result.pooled.low, result.pooled.high) == pytest.approx((mean - q * se,
                                                                     mean + q * se))
    law = stats.t(k - 1)
    tost = max(law.sf((mean + 0.15) / se), law.cdf((mean - 0.15) / se))
    assert result.equivalence_p == pytest.approx(tost)
    if not (result.wins or result.losses or result.pooled.excludes_zero()):
        assert (result.verdict == "no detectable effect") == (tost < 0.05)


def test_issue_30_no_true_effect_is_not_helps_broadly() -> None:
    """Three tasks, 5 seeds per arm, no true effect: Welch per task, then the DL normal
    interval, as the report pooled them before, excludes 0 on this draw ("helps
    broadly"); the modified HKSJ interval does not."""
    rng = np.random.default_rng(2030)
    for _ in range(2000):
        per_task = {f"t{i}": _quiet_welch(rng.normal(0, 1, 5), rng.normal(0, 1, 5))
                    for i in range(3)}
        y = [d.estimate for d in per_task.values()]
        old = random_effects(y, [d.se**2 for d in per_task.values()])
        if old.low > 0 and all(d.estimate > 0 for d in per_task.values()):
            break
    else:
        raise AssertionError("no draw where the old pooled interval excluded 0")
    result = generalization(per_task, smallest_effect=1.0)
    assert result.verdict != "helps broadly"
    assert result.pooled.low < 0 < result.pooled.high


def _quiet_welch(a, b):
    import warnings

    from labcoat.stats import StatsWarning, welch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StatsWarning)
        return welch(a, b)


@pytest.mark.parametrize(("effect", "se", "alpha"), [(0.01, 0.005, 0.05), (0.02, 0.004, 0.01),
                                                     (0.003, 0.01, 0.05)])
def test_power_matches_statsmodels_normal_power(effect: float, se: float, alpha: float) -> None:
    """Two-sided z-test power equals statsmodels' normal_power(effect / se, nobs=1, alpha)."""
    assert z_power(effect, se, alpha) == pytest.approx(normal_power(effect / se, 1, alpha))


def test_pooled_effect_and_power_come_from_random_effects() -> None:
    """pooled = random_effects(estimates, se^2, method, knapp_hartung="modified") at
    1 - alpha; power is the t(k-1) test's with its SE."""
    result = generalization(MIXED, smallest_effect=0.05, alpha=0.1, tau2_method="pm")
    estimates = [d.estimate for d in MIXED.values()]
    expected = random_effects(estimates, [d.se**2 for d in MIXED.values()], method="pm", ci=0.9,
                              knapp_hartung="modified")
    assert result.pooled == expected
    assert result.power == pytest.approx(t_power(0.05, expected.se, 0.1, 4))


@pytest.mark.parametrize(("effect", "se", "alpha", "df"), [(0.01, 0.005, 0.05, 2),
                                                           (0.02, 0.004, 0.01, 4)])
def test_t_power_matches_statsmodels(effect: float, se: float, alpha: float, df: int) -> None:
    """Two-sided t power equals statsmodels' TTestPower with nobs = 1 and df given."""
    from statsmodels.stats.power import TTestPower

    ref = TTestPower().power(effect / se, nobs=1, alpha=alpha, df=df)
    assert t_power(effect, se, alpha, df) == pytest.approx(ref)


def test_wins_use_family_adjusted_intervals() -> None:
    """A task with raw p = 0.02 among 5 tasks is a win unadjusted, a tie under Holm
    (its 99% Bonferroni-level CI covers 0)."""
    tasks = _tasks([0.0233, 0.0, 0.0, 0.0, 0.0], [0.01] * 5)
    assert tasks["task0"].excludes_zero()
    holm = generalization(tasks, smallest_effect=0.01)
    assert holm.wins == () and "task0" in holm.ties
    assert holm.tasks["task0"] == adjust(list(tasks.values()), "holm", ci=0.95)[0]
    unadjusted = generalization(tasks, smallest_effect=0.01, method="none")
    assert unadjusted.wins == ("task0",)


def test_summary_names_the_adjustment_and_the_heterogeneity() -> None:
    """The sentence carries the family method and level, tau^2 and I^2, and counts."""
    summary = generalization(BROAD, smallest_effect=0.01, method="bh").summary
    assert "Benjamini-Hochberg-adjusted" in summary
    assert "tau^2=" in summary and "I^2=" in summary and "6 won, 0 lost, 0 tied" in summary


def test_small_but_real_effect_is_flagged_as_smaller_than_delta() -> None:
    """A precise 0.002 gain helps broadly, but its whole CI is below delta = 0.01."""
    result = generalization(_tasks([0.002] * 4, [0.0002] * 4), smallest_effect=0.01)
    assert result.verdict == "helps broadly"
    assert "smaller than Δ=0.01" in result.reason


def test_every_verdict_is_a_declared_one() -> None:
    """Each scenario's verdict is in VERDICTS, and together they cover all six."""
    seen = {generalization(t, smallest_effect=d).verdict
            for t, d in [(BROAD, 0.01), (MIXED, 0.01), (HURTS, 0.01), (ONE_BIG_WIN, 0.01),
                         (NULL_PRECISE, 0.01), (NULL_NOISY, 0.01)]}
    assert seen == set(VERDICTS)


@pytest.mark.parametrize(
    ("per_task", "kwargs", "match"),
    [(_tasks([0.1], [0.01]), {}, "at least 2 tasks"),
     ({"a": _diff(0.1, 0.01), "b": Difference(0.1, 0.1, 0.1, 0.0, 0.0, "paired", 3)}, {},
      "'b' has se=0.0"),
     (BROAD, {"direction": "up"}, "increase"),
     (BROAD, {"smallest_effect": -0.01}, "smallest_effect"),
     (BROAD, {"alpha": 5}, "alpha"),
     (BROAD, {"method": "fdr"}, "holm, bh"),
     (BROAD, {"tau2_method": "reml"}, "dl, pm")],
)
def test_generalization_rejects_invalid_input(per_task: dict, kwargs: dict, match: str) -> None:
    """One task, a zero SE, a bad direction, a negative delta, a bad alpha or method raise."""
    arguments = {"smallest_effect": 0.01} | kwargs
    with pytest.raises(ValueError, match=match):
        generalization(per_task, **arguments)


@pytest.mark.parametrize(("per_task", "got"), [
    (np.array([[0.1, 0.2], [0.3, 0.4]]), "got ndarray"),  # a seeds x tasks array
    ([0.1, 0.2], "got list"),
    ({"a": 0.1, "b": 0.2}, "got a mapping to float"),
])
def test_generalization_given_numbers_says_what_it_takes(per_task, got) -> None:
    """Not an IndexError from deep inside (issue 22, point 9)."""
    with pytest.raises(TypeError, match=f"takes {{task name: Difference}}.*{got}$"):
        generalization(per_task, smallest_effect=None)


def test_one_task_carrying_a_heterogeneous_pool_is_not_broad():
    # 1 win, 0 losses, 9 ties with I^2 ~ 86%: the pooled CI excludes 0 because one task
    # moved a lot; Cochran's Q (recomputed here, scipy's chi2) rejects equal effects.
    per_task = {"t0": _diff(0.1, 0.01)} | {f"t{i}": _diff(0.015, 0.01) for i in range(1, 10)}
    g = generalization(per_task, direction="increase", smallest_effect=None, tau2_method="dl")
    estimates = np.array([d.estimate for d in per_task.values()])
    weights = 1 / np.array([d.se**2 for d in per_task.values()])
    q = float(np.sum(weights * (estimates - np.average(estimates, weights=weights)) ** 2))
    assert g.pooled.q == pytest.approx(q) and stats.chi2.sf(q, 9) < 0.05
    assert (len(g.wins), len(g.losses), len(g.ties)) == (1, 0, 9) and g.pooled.i2 > 0.8
    assert g.pooled.low > 0  # the pooled effect alone would say "helps"
    assert g.verdict == "helps some tasks" and "only 1 of 10 tasks win" in g.reason
    shared = {f"t{i}": _diff(0.03 + 0.002 * i, 0.01) for i in range(10)}  # homogeneous
    assert generalization(shared, direction="increase", smallest_effect=None).verdict \
        == "helps broadly"
