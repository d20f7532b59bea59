"""Power advice for the analysis the report runs: paired seeds planned with the SD of the
per-seed differences (from a pilot in the store), families planned at the corrected alpha."""

import math
import textwrap

import numpy as np
import pytest
from statsmodels.stats.power import TTestIndPower, TTestPower

from helpers import cli, stored_experiment
from labcoat import review, spec, store

DESIGN = textwrap.dedent("""\
    name: {name}
    hypothesis: {{claim: c, metric: loss, direction: decrease, smallest_effect: 0.05{sd}}}
    command: "python t.py {{a}} {{seed}}"
    params: {{a: 0}}
    arms: {{base: {{control: true}}, {variants}}}
    seeds: {seeds}
    seed_analysis: {analysis}
    """)

# Seeds move both arms alike: between-seed SD ~0.19, differences SD ~0.015.
BASE = [1.0, 1.3, 0.8, 1.2, 0.9, 1.1]
NOISE = [0.02, -0.01, 0.0, 0.015, -0.02, 0.005]
VARIANT = [b - 0.05 + e for b, e in zip(BASE, NOISE, strict=True)]


def _design(tmp_path, name="next", *, seeds=3, analysis="paired", sd="",
            variants="x: {params: {a: 1}}"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(DESIGN.format(name=name, seeds=seeds, analysis=analysis, sd=sd,
                                  variants=variants))
    return path


def _trial(arm, seed, value):
    return {"key": f"{arm}-s{seed}", "arm": arm, "seed": seed, "metrics": {"loss": [(1, value)]}}


def _store_pilot(tmp_path, trials, name="pilot", design=True):
    text = _design(tmp_path, name, seeds=6, variants="x: {params: {a: 1}}, "
                   "y: {params: {a: 2}}, z: {params: {a: 3}}").read_text() if design else ""
    stored_experiment(name, text, trials)


def _pilot(name="pilot"):
    db = store.open_store()
    try:
        with db.session() as session:
            experiment = store.find_experiment(session, name)
            h = spec.parse_design(experiment.design_yaml).all_hypotheses[0] if (
                experiment.design_yaml) else spec.Hypothesis(claim="c", metric="loss",
                                                             direction="decrease", id="H1")
            return review.pilot_for(session, experiment, h)
    finally:
        db.close()


def test_pilot_paired_sd_pools_the_variants_differences(home, tmp_path):
    """base [1, 2, 3]; x - base = [0.5, 0.4, 0.6] (var 0.01); y - base = [0.1, 0.5, 0.3]
    (var 0.04); z shares one seed with base (not enough): pooled var (2*0.01 + 2*0.04) / 4."""
    trials = ([_trial("base", s, v) for s, v in enumerate([1.0, 2.0, 3.0])]
              + [_trial("x", s, v) for s, v in enumerate([1.5, 2.4, 3.6])]
              + [_trial("y", s, v) for s, v in enumerate([1.1, 2.5, 3.3])]
              + [_trial("z", 0, 1.7), _trial("z", 7, 2.0)])
    _store_pilot(tmp_path, trials)
    pilot = _pilot()
    assert pilot.paired_sd == pytest.approx(math.sqrt(0.025))
    assert pilot.paired_seeds == 3
    assert pilot.seed_sd == pytest.approx(1.0, rel=0.2)  # between seeds: far larger


def test_pilot_paired_sd_is_none_without_shared_seeds_or_a_control(home, tmp_path):
    _store_pilot(tmp_path, [_trial("base", 0, 1.0), _trial("base", 1, 2.0),
                            _trial("x", 0, 1.5), _trial("x", 5, 2.5)])
    assert _pilot().paired_sd is None  # one shared seed
    _store_pilot(tmp_path, [_trial("base", s, v) for s, v in enumerate(BASE)]
                 + [_trial("x", s, v) for s, v in enumerate(VARIANT)], name="imported",
                 design=False)
    pilot = _pilot("imported")  # no stored design: which arm is the control is unknown
    assert pilot.paired_sd is None and pilot.seed_sd is not None


def test_paired_design_with_a_pilot_plans_with_the_sd_of_differences(home, tmp_path):
    """The pilot's differences have SD ~0.015, its seeds ~0.19: the paired analysis needs a
    handful of seeds where the two-sample advice asked for hundreds."""
    _store_pilot(tmp_path, [_trial("base", s, v) for s, v in enumerate(BASE)]
                 + [_trial("x", s, v) for s, v in enumerate(VARIANT)])
    sd_diff = float(np.std(np.subtract(VARIANT, BASE), ddof=1))
    paired_n = math.ceil(TTestPower().solve_power(0.05 / sd_diff, alpha=0.05, power=0.8))
    path = _design(tmp_path)
    pilots = review.pilots_from_store(path, "pilot")
    (h,) = review.plan(spec.load_design(path), pilots).hypotheses
    assert h.paired and h.sd == pytest.approx(sd_diff)
    assert h.sd_source == "pilot pilot, differences on 6 shared seeds"
    assert h.analysis == "paired t on seed differences, a single comparison: alpha 0.05"
    assert h.seeds_needed == max(2, paired_n) <= 5

    welch = _design(tmp_path, "welch", analysis="welch")
    (w,) = review.plan(spec.load_design(welch), review.pilots_from_store(welch, "pilot")
                       ).hypotheses
    seed_sd = pilots["H1"].seed_sd
    assert not w.paired and w.sd == pytest.approx(seed_sd)
    assert w.seeds_needed == math.ceil(TTestIndPower().solve_power(0.05 / seed_sd, alpha=0.05,
                                                                   power=0.8)) > 100

    # lint: 2 seeds are too few even paired; the fix names the paired number
    two = _design(tmp_path, "two", seeds=2)
    (finding,) = [f for f in review.lint(two, pilots=review.pilots_from_store(two, "pilot"))
                  if f.rule == "underpowered"]
    assert "paired t on seed differences, a single comparison: alpha 0.05" in finding.message
    assert f"SD of paired differences {sd_diff:.3g} from pilot pilot" in finding.message
    assert finding.fix.startswith(f"use {h.seeds_needed} seeds per arm")
    assert not [f for f in review.lint(path, pilots=pilots) if f.rule == "underpowered"]

    shown = cli("plan", str(path), "--pilot", "pilot", check=True).stdout
    assert "planned for: paired t on seed differences" in shown
    assert f"recommended: {h.seeds_needed} seeds per arm" in shown


def test_paired_design_without_a_pilot_uses_sd_times_sqrt2(tmp_path):
    """The `sd:` guess is a per-seed SD; the paired SD is unknown, so sd * sqrt(2) (arms
    uncorrelated, conservative) is used, and the plan says so."""
    path = _design(tmp_path, sd=", sd: 0.02", seeds=5)
    (h,) = review.plan(spec.load_design(path)).hypotheses
    assert h.paired and h.sd == pytest.approx(0.02 * math.sqrt(2))
    assert "x sqrt(2)" in h.sd_source and "uncorrelated" in h.sd_source
    assert h.seeds_needed == math.ceil(TTestPower().solve_power(
        0.05 / (0.02 * math.sqrt(2)), alpha=0.05, power=0.8))
    factorial = tmp_path / "factorial.yaml"  # OLS effects over every run: not paired
    factorial.write_text(path.read_text().replace(
        "arms: {base: {control: true}, x: {params: {a: 1}}}",
        "factors: {a: {levels: [0, 1]}, b: {levels: [0, 1]}}\nparams: {a: 0, b: 0}").replace(
        "params: {a: 0}\n", "").replace("{a} {seed}", "{a} {b} {seed}"))
    (f,) = review.plan(spec.load_design(factorial)).hypotheses
    assert not f.paired and f.sd == pytest.approx(0.02) and f.comparisons == 2


def test_lint_three_variants_under_holm_give_the_corrected_number(tmp_path):
    """sd 0.05, effect 0.05 (d = 1), two-sample: 17 seeds for one test at 0.05, but each of
    three Holm-corrected comparisons needs 23 (planned at 0.05 / 3)."""
    path = _design(tmp_path, analysis="welch", sd=", sd: 0.05", seeds=17,
                   variants="x: {params: {a: 1}}, y: {params: {a: 2}}, z: {params: {a: 3}}")
    (finding,) = [f for f in review.lint(path) if f.rule == "underpowered"]
    assert ("two-sample t on seeds, Holm over 3 comparisons: alpha 0.0167 per comparison"
            in finding.message)
    expected = math.ceil(TTestIndPower().solve_power(1.0, alpha=0.05 / 3, power=0.8))
    assert expected == 23 and finding.fix.startswith("use 23 seeds per arm")
    power = TTestIndPower().power(1.0, 17, 0.05 / 3)
    assert f"17 seeds per arm give power {power:.2f}" in finding.message
    single = _design(tmp_path, "single", analysis="welch", sd=", sd: 0.05", seeds=17)
    assert not [f for f in review.lint(single) if f.rule == "underpowered"]


def test_planned_analysis_is_public_and_matches_the_plan(tmp_path):
    """What a report's power note can reuse: the same test, SD and alpha as `labcoat plan`."""
    design = spec.load_design(_design(
        tmp_path, analysis="paired", sd=", sd: 0.05", seeds=17,
        variants="x: {params: {a: 1}}, y: {params: {a: 2}}, z: {params: {a: 3}}"))
    assert review.verdict_comparisons(design) == 3
    analysis = review.planned_analysis(design, design.all_hypotheses[0])
    assert analysis.description == ("paired t on seed differences, Holm over 3 comparisons: "
                                    "alpha 0.0167 per comparison")
    assert analysis.sd == pytest.approx(0.05 * math.sqrt(2))
    (h,) = review.plan(design).hypotheses
    assert analysis.seeds_needed(0.05) == h.seeds_needed == math.ceil(TTestPower().solve_power(
        1 / math.sqrt(2), alpha=0.05 / 3, power=0.8))
    assert analysis.power(17, 0.05) == pytest.approx(
        TTestPower().power(1 / math.sqrt(2), nobs=17, alpha=0.05 / 3))
