"""Factorial designs: generation, effects (vs statsmodels OLS and Box, Hunter & Hunter),
aliasing refusals and fractional-design planning arithmetic."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from labcoat.stats._checks import StatsWarning
from labcoat.stats._factorial import (
    _STANDARD,
    FactorialDesign,
    fractional_factorial,
    full_factorial,
    full_factorial_levels,
)
from labcoat.stats._factorial_effects import factorial_effects
from labcoat.stats._factorial_plan import suggest_fractional
from labcoat.stats._power import seeds_needed

# --- helpers ---------------------------------------------------------------------


def word_columns_product(design: FactorialDesign, word: str) -> np.ndarray:
    """Product of the design's columns named by a word such as "ABCD" or "-lr*wd"."""
    text = word.lstrip("-")
    if text in design.factors:
        names = [text]
    else:
        names = text.split("*") if "*" in text else list(text)
    idx = [design.factors.index(n) for n in names]
    return np.prod(design.runs[:, idx], axis=1) * (-1 if word.startswith("-") else 1)


def best_pattern(k: int, p: int) -> tuple[int, ...]:
    """Exhaustive search: the lexicographically smallest (A_1, ..., A_k) over all regular
    2^(k-p) designs, i.e. maximum resolution, then minimum aberration (Fries & Hunter
    1980). Each generated factor is an interaction (2+ letters) of the k - p base factors;
    a product of r generator words has the r generated letters plus the XOR of the rest."""
    columns = [m for m in range(1, 2 ** (k - p)) if m.bit_count() >= 2]
    best = None
    for combo in itertools.combinations(columns, p):
        lengths = []
        for r in range(1, p + 1):
            for subset in itertools.combinations(combo, r):
                mask = 0
                for m in subset:
                    mask ^= m
                lengths.append(mask.bit_count() + r)
        pattern = tuple(lengths.count(length) for length in range(1, k + 1))
        if best is None or pattern < best:
            best = pattern
    assert best is not None
    return best


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StatsWarning)
        return fn(*args, **kwargs)


# --- designs ---------------------------------------------------------------------


def test_full_factorial_standard_order_orthogonal_balanced():
    design = full_factorial(["A", "B", "C"])
    runs = design.runs
    assert runs.shape == (8, 3)
    assert runs[0].tolist() == [-1, -1, -1]  # all baseline first
    assert runs[:, 0].tolist() == [-1, 1] * 4  # first factor alternates fastest
    assert runs[:, 1].tolist() == [-1, -1, 1, 1] * 2
    assert runs[:, 2].tolist() == [-1] * 4 + [1] * 4
    assert np.array_equal(runs.T @ runs, 8 * np.eye(3))
    assert len({tuple(r) for r in runs.tolist()}) == 8
    assert design.resolution is None and design.generators == []
    assert design.defining_relation == [] and design.word_length_pattern == (0,)
    assert all(v == [] for v in design.aliases.values())
    assert "full 2^3 factorial" in design.describe()
    with pytest.raises(ValueError):
        runs[0, 0] = 1  # read-only


def test_half_fraction_d_abc_aliases():
    design = fractional_factorial(list("ABCD"), generators=["D = ABC"])
    runs = design.runs
    assert runs.shape == (8, 4) and design.n_runs == 8 and design.p == 1
    assert np.array_equal(runs[:, 3], runs[:, 0] * runs[:, 1] * runs[:, 2])
    assert np.array_equal(runs.T @ runs, 8 * np.eye(4))
    assert design.defining_relation == ["ABCD"]
    assert design.resolution == 4
    assert design.aliases["A"] == ["BCD"]
    assert design.aliases["D"] == ["ABC"]
    assert design.aliases["AB"] == ["CD"]
    assert design.aliases["AC"] == ["BD"]
    assert design.aliases["AD"] == ["BC"]
    assert set(design.aliases) == {"A", "B", "C", "D", "AB", "AC", "AD", "BC", "BD", "CD"}
    text = design.describe()
    assert "resolution IV" in text and "I = ABCD" in text
    assert "AB = CD; AC = BD; AD = BC" in text
    assert "Can attribute" in text and "A, B, C, D" in text


def test_generator_spellings_agree_and_negative_generator_is_the_other_half():
    a = fractional_factorial(list("ABCD"), generators=["D=ABC"])
    b = fractional_factorial(list("ABCD"), generators=["D = A*B*C"])
    c = fractional_factorial(list("ABCD"), generators=["D = A B C"])
    assert np.array_equal(a.runs, b.runs) and np.array_equal(a.runs, c.runs)
    neg = fractional_factorial(list("ABCD"), generators=["D = -ABC"])
    assert neg.generators == ["D = -ABC"] and neg.defining_relation == ["-ABCD"]
    assert neg.aliases["A"] == ["-BCD"] and neg.aliases["AB"] == ["-CD"]
    assert np.array_equal(neg.runs[:, 3], -a.runs[:, 3])
    both = {tuple(r) for r in np.vstack([a.runs, neg.runs]).tolist()}
    assert both == {tuple(r) for r in full_factorial(list("ABCD")).runs.tolist()}


def test_long_factor_names():
    factors = ["warmup", "lr", "wd", "dropout"]
    design = fractional_factorial(factors, generators=["dropout = warmup*lr*wd"])
    same = fractional_factorial(factors, generators=["dropout = warmup lr wd"])
    assert np.array_equal(design.runs, same.runs)
    assert design.generators == ["dropout = warmup*lr*wd"]
    assert design.defining_relation == ["warmup*lr*wd*dropout"]
    assert design.aliases["warmup"] == ["lr*wd*dropout"]
    assert design.aliases["warmup*lr"] == ["wd*dropout"]
    assert design.word_length_pattern == (0, 1)
    assert "warmup*lr = wd*dropout" in design.describe()


@pytest.mark.parametrize("k", range(3, 9))
@pytest.mark.parametrize("resolution", [3, 4, 5])
def test_standard_design_properties(k, resolution):
    design = fractional_factorial([f"f{i}" for i in range(k)], resolution=resolution)
    runs, n = design.runs, design.n_runs
    assert n == 2 ** (k - design.p)
    assert set(np.unique(runs).tolist()) == {-1, 1}
    assert np.array_equal(runs.T @ runs, n * np.eye(k))  # orthogonal and balanced
    assert len({tuple(r) for r in runs.tolist()}) == n
    assert len(design.defining_relation) == 2**design.p - 1
    for word in design.defining_relation:  # I = word holds in every run
        assert np.all(word_columns_product(design, word) == 1), word
    if design.resolution is not None:
        assert design.resolution >= resolution
        lengths = [len(w.lstrip("-").split("*")) for w in design.defining_relation]
        assert min(lengths) == design.resolution
    for effect, aliases in design.aliases.items():  # every listed alias shares the column
        for alias in aliases:
            assert np.array_equal(word_columns_product(design, effect),
                                  word_columns_product(design, alias)), (effect, alias)


@pytest.mark.parametrize(
    ("k", "resolution", "runs", "design_resolution"),
    [
        (1, 3, 2, None), (2, 3, 4, None), (3, 3, 4, 3), (3, 4, 8, None), (4, 4, 8, 4),
        (4, 5, 16, None), (5, 3, 8, 3), (5, 4, 16, 5), (5, 5, 16, 5), (6, 3, 8, 3),
        (6, 4, 16, 4), (6, 5, 32, 6), (7, 3, 8, 3), (7, 4, 16, 4), (7, 5, 64, 7),
        (8, 3, 16, 4), (8, 4, 16, 4), (8, 5, 64, 5), (8, 6, 128, 8),
    ],
)
def test_smallest_design_for_resolution(k, resolution, runs, design_resolution):
    # Hand-checked against the run counts of Montgomery (2013) Table 8.14.
    design = fractional_factorial(list("ABCDEFGH"[:k]), resolution=resolution)
    assert design.n_runs == runs
    assert design.resolution == design_resolution


def test_table_designs_have_max_resolution_and_minimum_aberration():
    for (k, p), _ in sorted(_STANDARD.items()):
        design = fractional_factorial(list("ABCDEFGH"[:k]),
                                      generators=list(_STANDARD[(k, p)]))
        best = best_pattern(k, p)
        assert best[:2] == (0, 0), (k, p)
        assert design.word_length_pattern == best[2:], (k, p, design.generators)


@pytest.mark.parametrize(
    ("generators", "match"),
    [
        (["D = A"], "single factor"),
        (["D = ABD"], "itself"),
        (["D = ABX"], "'X' is not a factor"),
        (["D ABC"], "must read"),
        (["X = AB"], "'X' is not a factor"),
        (["D = AAB"], "repeats 'A'"),
        (["D = ABC", "D = AB"], "more than once"),
        (["D = ABC", "E = ABD"], "itself generated"),
        (["D = AB", "E = AB"], "alias the main effects of 'D' and 'E'"),
    ],
)
def test_bad_generators_raise(generators, match):
    with pytest.raises(ValueError, match=match):
        fractional_factorial(list("ABCDE"), generators=generators)


def test_bad_design_requests_raise():
    with pytest.raises(ValueError, match="list of strings"):
        fractional_factorial(list("ABCD"), generators="D = ABC")
    with pytest.raises(ValueError, match="give generators"):
        fractional_factorial(list("ABCD"))
    with pytest.raises(ValueError, match="alias main effects"):
        fractional_factorial(list("ABCD"), resolution=2)
    with pytest.raises(ValueError, match="below the requested resolution 4"):
        fractional_factorial(list("ABCD"), generators=["D = AB"], resolution=4)
    with pytest.raises(ValueError, match="pass generators="):
        fractional_factorial([f"f{i}" for i in range(9)], resolution=4)
    with pytest.raises(ValueError, match="repeats 'A'"):
        full_factorial(["A", "B", "A"])
    with pytest.raises(ValueError, match="the string"):
        full_factorial("ABC")
    with pytest.raises(ValueError, match="must be non-empty strings"):
        full_factorial(["lr*wd", "x"])
    with pytest.raises(ValueError, match="is empty"):
        full_factorial([])


def test_assign_levels():
    design = full_factorial(["lr", "warmup"])
    trials = design.assign_levels({"lr": (1e-3, 3e-3), "warmup": ("off", "on")})
    assert trials == [
        {"lr": 1e-3, "warmup": "off"}, {"lr": 3e-3, "warmup": "off"},
        {"lr": 1e-3, "warmup": "on"}, {"lr": 3e-3, "warmup": "on"},
    ]
    with pytest.raises(ValueError, match="missing"):
        design.assign_levels({"lr": (1, 2)})
    with pytest.raises(ValueError, match="two levels"):
        design.assign_levels({"lr": (1, 2, 3), "warmup": (0, 1)})


def test_full_factorial_levels_order_and_errors():
    rows = full_factorial_levels({"opt": ["adamw", "lion", "sgd"], "lr": [1e-3, 3e-3]})
    assert len(rows) == 6
    assert rows[0] == {"opt": "adamw", "lr": 1e-3}  # baseline first
    assert [r["opt"] for r in rows] == ["adamw", "lion", "sgd"] * 2  # first factor fastest
    assert [r["lr"] for r in rows] == [1e-3] * 3 + [3e-3] * 3
    assert len({tuple(r.items()) for r in rows}) == 6
    assert rows == full_factorial_levels({"opt": ["adamw", "lion", "sgd"], "lr": [1e-3, 3e-3]})
    with pytest.raises(ValueError, match="at least 2"):
        full_factorial_levels({"opt": ["adamw"]})
    with pytest.raises(ValueError, match="repeats the level"):
        full_factorial_levels({"opt": ["adamw", "adamw"]})
    with pytest.raises(ValueError, match="list of levels"):
        full_factorial_levels({"opt": "adamw"})


def test_designs_are_deterministic():
    a = fractional_factorial(list("ABCDEFG"), resolution=4)
    b = fractional_factorial(list("ABCDEFG"), resolution=4)
    assert np.array_equal(a.runs, b.runs) and a.describe() == b.describe()
    assert a.aliases == b.aliases and a.defining_relation == b.defining_relation


# --- effects ---------------------------------------------------------------------

# Box, Hunter & Hunter (2005), ch. 5: the 2^3 pilot-plant experiment, yield for
# temperature T (160/180), concentration C (20/40), catalyst K (A/B), in standard order
# (T fastest), each run duplicated; averages 60, 72, 54, 68, 52, 83, 45, 80. The same
# numbers appear in public course code reproducing the example (T. Fraser, "Lesson 13:
# Factorial Design"), and the averages give BHH's effects by hand: T = 75.75 - 52.75 =
# 23, C = -5, K = 1.5, TC = 1.5, TK = 10, CK = 0, TCK = 0.5. Pooled s^2 = 64 / 8 = 8
# (8 df) so SE(effect) = sqrt(4 s^2 / 16) = sqrt(2) = 1.4, as BHH report.
PILOT_REP1 = [59, 74, 50, 69, 50, 81, 46, 79]
PILOT_REP2 = [61, 70, 58, 67, 54, 85, 44, 81]
PILOT_EFFECTS = {"T": 23.0, "C": -5.0, "K": 1.5, "TC": 1.5, "TK": 10.0, "CK": 0.0,
                 "TCK": 0.5}


def test_pilot_plant_example_box_hunter_hunter():
    design = full_factorial(["T", "C", "K"])
    values = [[a, b] for a, b in zip(PILOT_REP1, PILOT_REP2, strict=True)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatsWarning)  # 8 residual df: no warning
        effects = factorial_effects(
            design.runs, values, factors=design.factors,
            interactions=[("T", "C"), ("T", "K"), ("C", "K"), ("T", "C", "K")],
        )
    assert list(effects) == ["T", "C", "K", "TC", "TK", "CK", "TCK"]
    for name, expected in PILOT_EFFECTS.items():
        d = effects[name]
        assert d.estimate == pytest.approx(expected, abs=1e-12)
        assert d.se == pytest.approx(math.sqrt(2))
        assert d.df == 8 and d.n == 16
        half = 2.306004135204166 * math.sqrt(2)  # t_{0.975, 8}
        assert (d.low, d.high) == pytest.approx((expected - half, expected + half))
    assert effects["T"].excludes_zero() and effects["TK"].excludes_zero()
    assert not effects["K"].excludes_zero() and not effects["CK"].excludes_zero()


def test_pilot_plant_averages_main_effects_are_differences_of_means():
    averages = [(a + b) / 2 for a, b in zip(PILOT_REP1, PILOT_REP2, strict=True)]
    design = full_factorial(["T", "C", "K"])
    with pytest.warns(StatsWarning, match="3 residual degrees of freedom") as record:
        effects = factorial_effects(design.runs, averages, factors=["T", "C", "K"],
                                    interactions=[("T", "K")])
    assert record[0].message.kind == "few-df"
    for name in ("T", "C", "K", "TK"):
        assert effects[name].estimate == pytest.approx(PILOT_EFFECTS[name])
    assert effects["T"].df == 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_effects_match_statsmodels_ols(seed):
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(seed)
    design = fractional_factorial(list("ABCDE"), generators=["E = ABCD"])
    interactions = [("A", "B"), ("C", "E"), ("B", "D")]
    # Ragged replication: 1 to 4 seeds per run.
    values = [rng.normal(0.5 + 0.3 * r[0] - 0.2 * r[1] * r[0], 0.4, size=rng.integers(1, 5))
              for r in design.runs]
    effects = quiet(factorial_effects, design.runs, values, factors=design.factors,
                    interactions=interactions, ci=0.9)

    rows, y = [], []
    for run, vals in zip(design.runs, values, strict=True):
        a, b, c, d, e = run
        for v in vals:
            rows.append([1, a, b, c, d, e, a * b, c * e, b * d])
            y.append(v)
    fit = sm.OLS(np.array(y), np.array(rows, dtype=float)).fit()
    ci = fit.conf_int(alpha=0.1)
    for j, name in enumerate(["A", "B", "C", "D", "E", "AB", "CE", "BD"], start=1):
        d = effects[name]
        assert d.estimate == pytest.approx(2 * fit.params[j], rel=1e-9, abs=1e-12)
        assert d.se == pytest.approx(2 * fit.bse[j], rel=1e-9)
        assert d.p_value == pytest.approx(fit.pvalues[j], rel=1e-7, abs=1e-12)
        assert (d.low, d.high) == pytest.approx((2 * ci[j, 0], 2 * ci[j, 1]), rel=1e-9)
        assert d.df == fit.df_resid and d.ci == 0.9


def test_array_of_seeds_equals_lists_and_is_deterministic():
    rng = np.random.default_rng(3)
    design = full_factorial(["a", "b"])
    values = rng.normal(size=(4, 3))
    first = factorial_effects(design.runs, values, factors=design.factors,
                              interactions=[("a", "b")])
    second = factorial_effects(design.runs, values.tolist(), factors=design.factors,
                               interactions=[("b", "a")])  # order within a tuple is free
    assert first == second
    assert list(first) == ["a", "b", "ab"]  # single-letter names run together


def test_aliased_requested_terms_are_refused():
    design = fractional_factorial(list("ABCD"), generators=["D = ABC"])
    values = [[1.0, 2.0]] * design.n_runs
    with pytest.raises(ValueError, match="AB and CD are aliased"):
        factorial_effects(design.runs, values, factors=design.factors,
                          interactions=[("A", "B"), ("C", "D")])
    with pytest.raises(ValueError, match="D and ABC are aliased"):
        factorial_effects(design.runs, values, factors=design.factors,
                          interactions=[("A", "B", "C")])
    with pytest.raises(ValueError, match="ABCD is aliased with the mean"):
        factorial_effects(design.runs, values, factors=design.factors,
                          interactions=[("A", "B", "C", "D")])
    neg = fractional_factorial(list("ABCD"), generators=["D = -ABC"])
    with pytest.raises(ValueError, match="opposite"):
        factorial_effects(neg.runs, values, factors=neg.factors,
                          interactions=[("A", "D"), ("B", "C")])


def test_aliased_estimate_is_the_sum_and_warns():
    # 2^(3-1) with I = ABC: A = BC. True model y = 3 + 1.0 A + 0.5 BC, seeds at 0, +-0.1.
    design = fractional_factorial(list("ABC"), generators=["C = AB"])
    values = [[m - 0.1, m, m + 0.1] for m in (3 + 1.0 * r[0] + 0.5 * r[1] * r[2]
                                           for r in design.runs.tolist())]
    with pytest.warns(StatsWarning, match="A = BC") as record:
        effects = factorial_effects(design.runs, values, factors=design.factors)
    assert [w.message.kind for w in record] == ["aliased"]  # 8 residual df: no few-df
    assert effects["A"].estimate == pytest.approx(2 * (1.0 + 0.5))  # A + BC, not A
    assert "aliased with BC" in effects["A"].method


def test_missing_run_makes_terms_dependent():
    runs = full_factorial(["A", "B"]).runs[:3]
    with pytest.raises(ValueError, match="linearly dependent"):
        factorial_effects(runs, [[1, 2], [3, 4], [5, 7]], factors=["A", "B"],
                          interactions=[("A", "B")])


def test_no_residual_df_and_exact_fit_raise():
    design = full_factorial(["A", "B"])
    with pytest.raises(ValueError, match="no residual degrees of freedom"):
        factorial_effects(design.runs, [1.0, 2.0, 4.0, 3.0], factors=["A", "B"],
                          interactions=[("A", "B")])
    exact = [[1.0 + r[0] + 2 * r[1]] * 3 for r in design.runs.tolist()]
    with pytest.raises(ValueError, match="fits every observation exactly"):
        factorial_effects(design.runs, exact, factors=["A", "B"])


@pytest.mark.parametrize(
    ("runs", "values", "kwargs", "match"),
    [
        ([[0, 1], [1, 1]], [[1.0, 2.0]] * 2, {}, "coded -1"),
        ([[1, 1, 1]], [[1.0]], {}, "shape"),
        (None, [[1.0, 2.0]] * 3, {}, "3 entries for 4 runs"),
        (None, [[1.0], [], [2.0], [3.0]], {}, "run 1 has no values"),
        (None, [[1.0], [np.nan], [2.0], [3.0]], {}, "run 1 has NaN"),
        (None, [[1.0, 2.0]] * 4, {"interactions": [("A", "Z")]}, "not among the factors"),
        (None, [[1.0, 2.0]] * 4, {"interactions": [("A",)]}, "two or more"),
        (None, [[1.0, 2.0]] * 4, {"interactions": [("A", "A")]}, "two or more"),
        (None, [[1.0, 2.0]] * 4, {"interactions": [("A", "B"), ("B", "A")]}, "twice"),
        (None, [[1.0, 2.0]] * 4, {"interactions": "AB"}, "the string"),
        (None, [[1.0, 2.0]] * 4, {"ci": 95}, "ci=95"),
    ],
)
def test_effects_input_errors(runs, values, kwargs, match):
    runs = full_factorial(["A", "B"]).runs if runs is None else runs
    with pytest.raises(ValueError, match=match):
        factorial_effects(runs, values, factors=["A", "B"], **kwargs)


# --- planning --------------------------------------------------------------------


def test_suggest_seven_candidates_resolution_three_by_hand():
    s = suggest_fractional(list("ABCDEFG"), min_resolution=3, seeds=2)
    assert s.runs == 8 and s.design.resolution == 3 and s.design.p == 4
    assert s.trials == 16 and s.df == 16 - 8
    assert s.se_in_sd == pytest.approx(0.5)  # 2 / sqrt(16)
    # one-at-a-time: sigma sqrt(2/n) = 0.5 sigma -> n = 8 seeds per arm, 8 arms.
    assert (s.one_at_a_time_arms, s.one_at_a_time_seeds, s.one_at_a_time_trials) == (8, 8, 64)
    assert math.sqrt(2 / s.one_at_a_time_seeds) == pytest.approx(s.se_in_sd)
    assert s.mde is None
    assert "A = BD = CE = FG" in s.summary and "resolution III" in s.summary


def test_suggest_seven_candidates_resolution_four_by_hand():
    s = suggest_fractional(list("ABCDEFG"), seeds=3, sd=0.02)
    assert s.runs == 16 and s.design.resolution == 4
    assert s.trials == 48 and s.df == 40
    assert s.se_in_sd == pytest.approx(2 / math.sqrt(48))
    assert (s.one_at_a_time_seeds, s.one_at_a_time_trials) == (24, 192)
    assert s.mde == pytest.approx(s.mde_in_sd * 0.02)
    assert "16 runs x 3 seeds = 48 trials" in s.summary
    assert "8 arms x 24 seeds = 192 trials" in s.summary
    assert "noncentral t" in s.summary and "AB = CE = FG" in s.summary


def test_mde_matches_statsmodels_noncentral_t_power():
    power_mod = pytest.importorskip("statsmodels.stats.power")
    s = suggest_fractional(list("ABCDE"), seeds=2)  # 2^(5-1) V, 32 trials, 26 df
    assert s.df == 26
    noncentrality = s.mde_in_sd / s.se_in_sd
    # A one-sample t test with nobs = df + 1 has the same df and noncentrality
    # effect * sqrt(nobs): statsmodels' TTestPower gives the same power.
    nobs = s.df + 1
    power = power_mod.TTestPower().power(effect_size=noncentrality / math.sqrt(nobs),
                                         nobs=nobs, alpha=0.05, alternative="two-sided")
    assert power == pytest.approx(0.8, abs=1e-6)
    # Larger than the normal approximation (z_0.975 + z_0.8) * SE, as with few df it must be.
    assert s.mde_in_sd > (1.959964 + 0.841621) * s.se_in_sd
    big = suggest_fractional(list("ABCDE"), seeds=500)
    assert big.mde_in_sd == pytest.approx((1.959964 + 0.841621) * big.se_in_sd, rel=2e-3)


def test_smallest_effect_seeds_are_minimal():
    s = suggest_fractional(list("ABCDEFG"), seeds=3, sd=0.01, smallest_effect=0.005)
    n = s.seeds_for_smallest_effect
    assert n is not None and n >= 2
    enough = suggest_fractional(list("ABCDEFG"), seeds=n, sd=0.01, smallest_effect=0.005)
    fewer = suggest_fractional(list("ABCDEFG"), seeds=n - 1, sd=0.01, smallest_effect=0.005)
    assert enough.power_at_smallest_effect >= 0.8 > fewer.power_at_smallest_effect
    assert s.one_at_a_time_seeds_for_smallest_effect == seeds_needed(0.5)
    # Without sd the effect is in sd units: the same plan.
    same = suggest_fractional(list("ABCDEFG"), seeds=3, smallest_effect=0.5)
    assert same.seeds_for_smallest_effect == n
    assert same.power_at_smallest_effect == pytest.approx(s.power_at_smallest_effect)


def test_suggest_errors():
    with pytest.raises(ValueError, match="seeds >= 2"):
        suggest_fractional(list("ABCDEFG"), min_resolution=3, seeds=1)
    with pytest.raises(ValueError, match="alias main effects"):
        suggest_fractional(list("ABC"), min_resolution=2, seeds=2)
    with pytest.raises(ValueError, match="seeds=0"):
        suggest_fractional(list("ABC"), seeds=0)
    with pytest.raises(ValueError, match="not above alpha"):
        suggest_fractional(list("ABC"), seeds=2, power=0.01)
    with pytest.raises(ValueError, match="sd="):
        suggest_fractional(list("ABC"), seeds=2, sd=0.0)
    with pytest.raises(ValueError, match="smallest_effect"):
        suggest_fractional(list("ABC"), seeds=2, smallest_effect=0.0)


def test_full_factorial_suggested_when_no_fraction_reaches_resolution():
    s = suggest_fractional(["lr", "wd", "warmup"], seeds=2)
    assert s.design.resolution is None and s.runs == 8
    assert (s.one_at_a_time_arms, s.one_at_a_time_seeds) == (4, 8)
    assert "full 2^3 factorial" in s.summary and "Nothing is aliased" in s.summary
