"""`labcoat report`: numbers checked against scipy on the exported raw data."""

import copy
import json
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats as sps

from helpers import FAKE_TRIAL, cli, fake_design, shared_home


def _macro_per_trial(items):
    scores = defaultdict(lambda: defaultdict(list))
    arm_of = {}
    for row in items:
        scores[row["trial"]][row["task"]].append(row["score"])
        arm_of[row["trial"]] = row["arm"]
    macro = {t: np.mean([np.mean(v) for v in per_task.values()]) for t, per_task in scores.items()}
    by_arm = defaultdict(list)
    for trial in sorted(macro):
        by_arm[arm_of[trial]].append(macro[trial])
    return by_arm


@pytest.fixture(scope="module")
def finished_once(tmp_path_factory):
    """One run of the fake design (loss a secondary metric), its `report --json`, exported
    items and exported metric points, shared by the module's tests that check the report's
    numbers against scipy on those exports."""
    tmp = tmp_path_factory.mktemp("finished")
    with shared_home(tmp / "home"):
        design = fake_design(tmp, steps=3, seeds=3, parallelism=3, variant_quality=0.7)
        design.write_text(design.read_text() + "secondary_metrics: [loss]\n")
        cli("run", str(design), check=True)
        items = [json.loads(line)
                 for line in cli("export", "fake", "--items").stdout.splitlines()]
        points = [json.loads(line) for line in cli("export", "fake").stdout.splitlines()]
        report = json.loads(cli("report", "fake", "--json", check=True).stdout)
        return report, items, points


@pytest.fixture
def finished(finished_once):
    """(report, items, points): a copy per test, so no test sees another's changes."""
    return copy.deepcopy(finished_once)


def test_arm_intervals_and_welch_difference_match_scipy(finished):
    report, items, _ = finished
    by_arm = _macro_per_trial(items)
    arms = {a["arm"]: a for a in report["results"][0]["arms"]}
    for arm, values in by_arm.items():
        low, high = sps.t.interval(0.95, len(values) - 1, loc=np.mean(values),
                                   scale=sps.sem(values))
        assert arms[arm]["overall"]["point"] == pytest.approx(np.mean(values))
        assert (arms[arm]["overall"]["low"], arms[arm]["overall"]["high"]) == pytest.approx(
            (low, high))
    (comparison,) = report["results"][0]["comparisons"]
    ref = sps.ttest_ind(by_arm["better"], by_arm["base"], equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert comparison["seeds"]["p_value"] == pytest.approx(ref.pvalue)
    assert (comparison["seeds"]["low"], comparison["seeds"]["high"]) == pytest.approx(
        (ci.low, ci.high))
    assert comparison["verdict"] == "supported"


def test_paired_item_difference_matches_a_hand_computation(finished):
    report, items, _ = finished
    per_task = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for row in items:
        per_task[row["task"]][row["arm"]][row["item"]].append(row["score"])
    estimates, variances = [], []
    for arms in per_task.values():
        ids = sorted(arms["base"])
        d = np.array([np.mean(arms["better"][i]) - np.mean(arms["base"][i]) for i in ids])
        estimates.append(d.mean())
        variances.append(d.var(ddof=1) / d.size)
    se = np.sqrt(np.sum(variances)) / len(estimates)
    paired = report["results"][0]["comparisons"][0]["items"]
    assert paired["estimate"] == pytest.approx(np.mean(estimates))
    assert paired["se"] == pytest.approx(se)


def test_no_difference_is_inconclusive_and_says_why(home, tmp_path):
    design = fake_design(tmp_path, steps=2, seeds=3, parallelism=3, variant_quality=0.3)
    cli("run", str(design), check=True)
    text = cli("report", "fake", check=True).stdout
    assert "INCONCLUSIVE" in text
    assert "cannot tell the arms apart" in text.replace("\n", " ")


def test_wrong_direction_is_refuted(home, tmp_path):
    design = fake_design(tmp_path, steps=2, seeds=3, parallelism=3, variant_quality=0.0)
    text = design.read_text().replace("quality: 0.3}", "quality: 0.9}")
    design.write_text(text)
    cli("run", str(design), check=True)
    report = json.loads(cli("report", "fake", "--json", check=True).stdout)
    assert report["results"][0]["comparisons"][0]["verdict"] == "refuted"


def test_report_of_unknown_experiment_is_one_clear_error(home):
    result = cli("report", "nope")
    assert result.returncode == 2
    assert "no experiment named 'nope'" in result.stderr
    assert "Traceback" not in result.stderr


def test_per_task_family_and_pooled_effect_match_statsmodels(finished):
    from statsmodels.stats.meta_analysis import combine_effects
    from statsmodels.stats.multitest import multipletests

    report, items, _ = finished
    per = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for row in items:
        per[row["task"]][row["arm"]][row["trial"]].append(row["score"])
    tasks = sorted(per)
    refs = []
    for task in tasks:
        base = [np.mean(v) for v in per[task]["base"].values()]
        better = [np.mean(v) for v in per[task]["better"].values()]
        refs.append(sps.ttest_ind(better, base, equal_var=False))
    (comparison,) = report["results"][0]["comparisons"]
    p_holm = multipletests([r.pvalue for r in refs], method="holm")[1]
    for task, p in zip(tasks, p_holm, strict=True):
        seeds = comparison["per_task"][task][0]
        assert seeds["p_adjusted"] == pytest.approx(p)
        assert seeds["family_size"] == len(tasks) and seeds["method"] == "holm"
    y = np.array([_diff(per[t]) for t in tasks])
    v = np.array([(_diff(per[t]) / r.statistic) ** 2 for t, r in zip(tasks, refs, strict=True)])
    # DerSimonian-Laird by hand, tau^2 truncated at 0 (statsmodels leaves it negative)
    w = 1 / v
    q = np.sum(w * (y - np.sum(w * y) / w.sum()) ** 2)
    tau2 = max(0.0, (q - (len(y) - 1)) / (w.sum() - np.sum(w**2) / w.sum()))
    w_star = 1 / (v + tau2)
    pooled = comparison["generalization"]["pooled"]
    assert pooled["tau2"] == pytest.approx(tau2, abs=1e-12)
    assert pooled["estimate"] == pytest.approx(np.sum(w_star * y) / w_star.sum())
    # the modified HKSJ SE: the weighted residual spread's, never below the DL one (issue 30)
    mean = np.sum(w_star * y) / w_star.sum()
    hksj = np.sqrt(np.sum(w_star * (y - mean) ** 2) / ((len(y) - 1) * w_star.sum()))
    assert pooled["se"] == pytest.approx(max(1 / np.sqrt(w_star.sum()), hksj))
    if tau2 > 0:  # where the estimators agree, statsmodels is a second reference
        ref = combine_effects(y, v, method_re="dl")
        assert pooled["estimate"] == pytest.approx(ref.mean_effect_re)


def _diff(per_arm):
    return (np.mean([np.mean(v) for v in per_arm["better"].values()])
            - np.mean([np.mean(v) for v in per_arm["base"].values()]))


def test_runs_by_tasks_aggregates_and_improvement_match_scipy(finished):
    report, items, _ = finished
    per = defaultdict(lambda: defaultdict(list))  # (arm, trial) -> task -> scores
    for row in items:
        per[(row["arm"], row["trial"])][row["task"]].append(row["score"])
    tasks = sorted({row["task"] for row in items})
    matrix = {arm: np.array([[np.mean(per[key][t]) for t in tasks]
                             for key in sorted(per) if key[0] == arm])
              for arm in ("base", "better")}
    arms = {a["arm"]: a for a in report["results"][0]["arms"]}
    for arm, x in matrix.items():
        aggregates = arms[arm]["aggregates"]
        assert aggregates["iqm"]["point"] == pytest.approx(sps.trim_mean(x.ravel(), 0.25))
        assert aggregates["median"]["point"] == pytest.approx(np.median(x.mean(axis=0)))
        assert aggregates["optimality_gap"]["point"] == pytest.approx(
            1 - np.mean(np.minimum(x, 1)))
        low, high = aggregates["mean"]["low"], aggregates["mean"]["high"]
        assert low < aggregates["mean"]["point"] < high
    superiority = [sps.mannwhitneyu(matrix["better"][:, j], matrix["base"][:, j]).statistic
                   / (len(matrix["better"]) * len(matrix["base"])) for j in range(len(tasks))]
    improvement = report["results"][0]["comparisons"][0]["improvement"]
    assert improvement["point"] == pytest.approx(np.mean(superiority))


def test_several_variants_are_one_holm_family_with_adjusted_intervals(home, tmp_path):
    from statsmodels.stats.multitest import multipletests

    design = fake_design(tmp_path, steps=2, seeds=3, parallelism=3, variant_quality=0.7)
    design.write_text(design.read_text().replace(
        "better: {params: {quality: 0.7}}",
        "better: {params: {quality: 0.7}}\n  worse: {params: {quality: 0.25}}"))
    cli("run", str(design), check=True)
    report = json.loads(cli("report", "fake", "--json", check=True).stdout)
    items = [json.loads(x) for x in cli("export", "fake", "--items").stdout.splitlines()]
    by_arm = _macro_per_trial(items)
    refs = [sps.ttest_ind(by_arm[v], by_arm["base"], equal_var=False) for v in ("better", "worse")]
    p_holm = multipletests([r.pvalue for r in refs], method="holm")[1]
    for comparison, ref, p in zip(report["results"][0]["comparisons"], refs, p_holm, strict=True):
        assert comparison["p_adjusted"] == pytest.approx(p)
        assert "Holm" in comparison["family"] and "2 comparisons" in comparison["family"]
        ci = ref.confidence_interval(1 - 0.05 / 2)  # Bonferroni level for the family's CIs
        assert f"[{ci.low:+.4g}, {ci.high:+.4g}]" in comparison["reason"]


def test_factorial_main_effects_and_interaction_match_a_hand_computation(home, tmp_path):
    design = tmp_path / "fact.yaml"
    design.write_text(f"""name: fact
hypothesis: {{claim: quality helps, metric: exact_match, source: items, direction: increase}}
command: "{{python}} {FAKE_TRIAL} --steps {{steps}} --quality {{quality}} --seed {{seed}}"
params: {{quality: 0.3, steps: 2}}
factors:
  quality: {{levels: {{low: 0.3, high: 0.6}}}}
  steps: {{levels: [2, 3]}}
interactions: [[quality, steps]]
seeds: 3
parallelism: 3
""")
    cli("run", str(design), check=True)
    report = json.loads(cli("report", "fact", "--json", check=True).stdout)
    items = [json.loads(x) for x in cli("export", "fact", "--items").stdout.splitlines()]
    by_arm = _macro_per_trial(items)
    mean = {arm: np.mean(v) for arm, v in by_arm.items()}
    high_q = (mean["quality-high_steps-2"] + mean["quality-high_steps-3"]) / 2
    low_q = (mean["quality-low_steps-2"] + mean["quality-low_steps-3"]) / 2
    effects = {c["variant"]: c["seeds"] for c in report["results"][0]["comparisons"]}
    assert effects["quality=high"]["estimate"] == pytest.approx(high_q - low_q)
    interaction = ((mean["quality-high_steps-3"] - mean["quality-low_steps-3"])
                   - (mean["quality-high_steps-2"] - mean["quality-low_steps-2"])) / 2
    assert effects["quality*steps"]["estimate"] == pytest.approx(interaction, abs=1e-12)
    assert report["results"][0]["comparisons"][0]["verdict"] == "supported"


def test_secondary_metrics_are_described_per_arm(finished):
    report, _, points = finished
    last = [p["value"] for p in points if p["arm"] == "base" and p["step"] == 3]
    found = report["secondary"]["loss"]["base"]
    low, high = sps.t.interval(0.95, len(last) - 1, loc=np.mean(last), scale=sps.sem(last))
    assert (found["point"], found["low"], found["high"]) == pytest.approx(
        (np.mean(last), low, high))
