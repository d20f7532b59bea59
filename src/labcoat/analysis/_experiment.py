"""From stored results to the answer: per-arm intervals, comparisons, verdicts.

The verdict on the hypothesis is judged on seeds (Welch's test on each trial's
final primary metric, or the paired t test with `seed_analysis: paired`,
Holm-adjusted across variants; `stats.verdict` reads the interval against 0 and
the declared smallest effect): seeds are the unit an intervention is replicated
over. After `labcoat run --until-decisive` the verdict is the pre-registered
anytime-valid sequential decision instead: a fixed-n test on seeds that were
added until it looked decisive is optimistically biased, and is shown only for
reference. Per task, the same seed-level differences are
adjusted for the family of tasks and pooled with a random-effects model to say
whether the effect generalizes. The paired item-level comparison is shown
beside them; it is far tighter but measures only eval noise for these
particular trained models, not training noise.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from labcoat import review, spec, stats, store
from labcoat.analysis._evals import evaluations_data, prompts_data
from labcoat.analysis._phases import step_phases
from labcoat.analysis._scales import scales_data
from labcoat.analysis._status import status_data
from labcoat.spec import Design, Hypothesis
from labcoat.stats import Adjusted, Difference, Generalization, Interval, StatsWarning
from labcoat.store import TRIAL_STATUSES, Experiment, Trial, TrialItemScores

MACRO = "macro"
FAMILY_METHOD = "holm"
AGGREGATES = ("mean", "median", "iqm", "optimality_gap")  # Agarwal et al. 2021
# Stratified bootstrap settings: seeded (reports are reproducible); "expanded"
# percentile intervals keep 95% coverage with 3-5 runs (benchmarks/README.md).
BOOTSTRAP = {"reps": 20_000, "seed": 0, "method": "expanded"}
# What no check on 3-10 seeds can detect, said under every table of seed intervals.
SEED_CAVEAT = ("t intervals across seeds assume seed noise without strong skew: with skewed "
               "seed results they cover less than stated (82-84% for a nominal 95% with "
               "lognormal seeds, benchmarks/README.md); look at the per-seed values, or "
               "compare with stats.yuen (trimmed means)")


@dataclass
class ArmResult:
    arm: str
    trials: list[str]
    values: list[float]  # the primary metric of each finished trial
    overall: Interval | None
    per_task: dict[str, Interval] = field(default_factory=dict)
    aggregates: dict[str, Interval] = field(default_factory=dict)  # over runs x tasks


@dataclass
class Comparison:
    variant: str
    control: str
    seeds: Difference | None  # Welch on per-trial values (the verdict)
    items: Difference | None  # paired on shared items (eval noise only), macro over tasks
    per_task: dict[str, tuple[Adjusted | None, Adjusted | None]] = field(default_factory=dict)
    generalization: Generalization | None = None
    improvement: Interval | None = None  # P(variant run beats control run), over tasks
    p_adjusted: float | None = None
    family: str = ""
    power_note: str = ""  # power to detect the declared smallest effect, and seeds needed
    verdict: str = "inconclusive"  # one of stats.DECISIONS
    reason: str = ""
    over: str = ""  # what the seed test counted, e.g. "5 seeds per arm"
    values: tuple[list[float], list[float]] = ((), ())  # control, variant: what was tested
    fixed_n: str = ""  # sequential experiments: the fixed-n verdict, for reference only


@dataclass
class HypothesisResult:
    """One hypothesis: its metric per arm, each variant against the control."""

    hypothesis: Hypothesis
    control: str | None
    arms: list[ArmResult]
    comparisons: list[Comparison]
    tasks: list[str]
    bounds: tuple[float, float] | None = None  # the metric's range (see _bounds)
    diverged: list[tuple[str, str]] = field(default_factory=list)  # (trial, what) not counted


@dataclass
class Analysis:
    experiment: str
    status: str
    control: str | None
    results: list[HypothesisResult]
    excluded: list[tuple[str, str]]  # (trial, why) not counted
    family: str = ""  # how the verdicts' comparisons were corrected as one family
    secondary: dict[str, dict[str, Interval]] = field(default_factory=dict)  # metric -> arm
    warnings: list[str] = field(default_factory=list)
    note: str = ""
    goodput: dict[str, Any] = field(default_factory=dict)  # see report._status
    registration: dict[str, Any] = field(default_factory=dict)  # frozen plan, amendments
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # arm -> status -> trials
    late_trials: list[str] = field(default_factory=list)  # added after results were seen
    sequential: dict[str, Any] = field(default_factory=dict)  # variant -> SequentialResult
    alerts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # trial -> alerts
    restarts: dict[str, list[str]] = field(default_factory=dict)  # trial -> causes of restarts
    scales: dict[str, Any] = field(default_factory=dict)  # scaling fits (report._scales)
    prompts: dict[str, Any] = field(default_factory=dict)  # template sensitivity (_evals)
    evaluations: dict[str, Any] = field(default_factory=dict)  # eval items no hypothesis judges
    phases: dict[str, Any] = field(default_factory=dict)  # step time by phase (_phases)
    kind: str = "designed"  # or "ad-hoc" (labcoat.init outside `labcoat run`), "imported"


def verdict_word(decision: str) -> str:
    """How a decision reads in a report: "no-effect" -> "NO EFFECT"."""
    return decision.upper().replace("-", " ")


def analyze(session: Session, experiment: Experiment) -> Analysis:
    """Everything the report shows, computed from the store; StatsWarnings are collected."""
    rule = (experiment.analysis_plan or {}).get("plan", {}).get("sequential")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StatsWarning)
        analysis = _analyze(session, experiment)
        if rule and analysis.results:  # its warnings (a discrete metric) are report lines too
            analysis.sequential = _sequential(session, experiment, analysis.results[0], rule)
            _judge_sequentially(analysis.results[0], analysis.sequential)
    analysis.warnings = _merge_warnings([w.message for w in caught
                                         if issubclass(w.category, StatsWarning)])
    status = status_data(session, experiment)
    if experiment.design_hash not in (store.IMPORTED_HASH, store.RUNS_IMPORTED_HASH):
        analysis.goodput = status["goodput"]  # imported runs' time was spent elsewhere
    analysis.alerts = {t["key"]: t["alerts"] for t in status["trials"] if t["alerts"]}
    analysis.registration = dict(experiment.analysis_plan or {})
    analysis.counts = _counts(experiment)
    # Seeds a pre-registered sequential rule added are not "added after results were seen"
    # only where the verdict shown is that rule's: any fixed-n verdict on them is biased.
    fixed = [c for r in analysis.results for c in r.comparisons
             if c.seeds is not None and not c.fixed_n]
    analysis.late_trials = _late_trials(experiment) if fixed or not rule else []
    analysis.restarts = {t["key"]: [a["cause"] for a in t["attempt_history"][:-1]]
                         for t in status["trials"] if t["attempts"] > 1}
    analysis.scales = scales_data(session, experiment)
    analysis.prompts = prompts_data(session, experiment, analysis.control)
    if not any(r.hypothesis.source == "items" for r in analysis.results):  # else judged
        analysis.evaluations = evaluations_data(
            session, experiment, control=analysis.control,
            judged_by=[r.hypothesis.metric for r in analysis.results])
    analysis.phases = step_phases(session, experiment)
    return analysis


def _sequential(session: Session, experiment: Experiment, result: HypothesisResult,
                rule: dict[str, Any]) -> dict[str, Any]:
    """The pre-registered sequential test replayed over the finished seeds, in seed order."""
    h = result.hypothesis
    done = [t for t in experiment.trials if t.status == "done"]
    values, _ = store.primary_values(session, done, source=h.source, metric=h.metric)
    by_arm: dict[str, dict[int, float]] = defaultdict(dict)
    for t in done:
        if t.id in values:
            by_arm[t.arm][t.seed] = values[t.id]
    out = {}
    variants = [c.variant for c in result.comparisons]
    for variant in variants:
        a, b = by_arm.get(result.control, {}), by_arm.get(variant, {})
        seeds = sorted(set(a) & set(b))
        test = stats.SequentialTest(alpha=rule["alpha"] / len(variants), direction=h.direction,
                                    smallest_effect=h.smallest_effect,
                                    max_seeds=rule["max_seeds"])
        control, treated = [a[s] for s in seeds], [b[s] for s in seeds]
        out[variant] = dataclasses.asdict(test.update(control, treated))
        out[variant]["power_note"] = _sequential_power_note(
            np.subtract(treated, control), h.smallest_effect, test.alpha, rule["max_seeds"])
    return out


def _sequential_power_note(differences: np.ndarray, delta: float | None, alpha: float,
                           budget: int) -> str:
    """Power advice for the sequential rule that decided, simulated (`stats.sequential_power`),
    never the fixed-n t test's: the rule needs about twice the seeds (issue 30)."""
    if delta is None or differences.size < 2:
        return ""
    sd = float(np.std(differences, ddof=1))
    if not (math.isfinite(sd) and sd > 0):
        return ("power advice cannot be given: the seed differences show no variation, so "
                "their spread is unknown")
    found = stats.sequential_power(delta, sd=sd, alpha=alpha, max_seeds=budget)
    needed = (f"{found.seeds_needed} seeds per arm" if found.seeds_needed is not None else
              f"more than {found.limit} seeds per arm")
    return (f"the sequential rule's power to detect the smallest effect {delta:g} within "
            f"the budget of {budget} seeds per arm is {found.power:.2f}; it reaches 80% at "
            f"{needed} (simulated: t-mixture at alpha {alpha:.3g}, SD of seed differences "
            f"{sd:.3g} from {differences.size} seeds, so the advice is as uncertain as that "
            f"SD; {found.reps} runs, seed {found.seed}); fixed-n power advice does not apply "
            "to it")


def _judge_sequentially(result: HypothesisResult, sequential: dict[str, Any]) -> None:
    """The anytime-valid decision becomes the verdict; the fixed-n one is kept for reference
    (read against the smallest effect as `stats.verdict` reads a fixed-n interval)."""
    h = result.hypothesis
    for c in result.comparisons:
        s = sequential.get(c.variant)
        if s is None:
            continue
        fixed_reason = c.reason  # without its fixed-n power advice: no rule here uses it
        if c.power_note and fixed_reason.endswith(f"; {c.power_note}"):
            fixed_reason = fixed_reason[: -len(c.power_note) - 2]
        c.fixed_n = f"{c.verdict} ({fixed_reason})"
        decision = {"no effect": "no-effect"}.get(s["decision"], s["decision"])
        if decision not in stats.DECISIONS:  # "budget spent", "continue"
            decision = "inconclusive"
        delta = h.smallest_effect
        if decision in ("supported", "refuted") and delta and -delta < s["low"] \
                and s["high"] < delta:  # either sign, as stats.verdict reads it
            decision = "negligible"
        c.verdict = decision
        c.reason = (f"pre-registered sequential test (anytime-valid, alpha {s['alpha']:.3g} per "
                    f"comparison): {s['reason']}")
        # The fixed-n power advice does not hold for the sequential rule: replace it.
        c.power_note = s.get("power_note", "")
        if decision == "negligible":
            c.reason += (f"; the whole sequence lies inside +-{delta:g}, the smallest effect "
                         "worth having")
        elif c.power_note and decision == "inconclusive" and s["decision"] != "no variation":
            c.reason += f"; {c.power_note}"


def _counts(experiment: Experiment) -> dict[str, dict[str, int]]:
    """Every trial of every arm by status: nothing is dropped silently."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(TRIAL_STATUSES, 0))
    for trial in experiment.trials:
        counts[trial.arm][trial.status] += 1
    return {arm: dict(c) for arm, c in counts.items()}


def _late_trials(experiment: Experiment) -> list[str]:
    """Trials created after the experiment's first result was recorded (seeds added after
    results were seen can be shopped for: the report says so)."""
    finished = [store.as_utc(a.ended_at) for t in experiment.trials for a in t.attempts
                if a.ended_at is not None and a.cause == "exit 0"]
    if not finished:
        return []
    first = min(finished)
    return [t.key for t in experiment.trials if store.as_utc(t.created_at) > first]


def _merge_warnings(found: list[StatsWarning]) -> list[str]:
    """One line per problem: every "few runs" warning of the analysis becomes one."""
    few = [w.n_runs for w in found if getattr(w, "kind", "") == "few-runs" and w.n_runs]
    merged = []
    if few:
        merged.append(
            f"an arm has only {min(few)} finished seed(s) (fewer than 5): t intervals are wide "
            "and bootstrap intervals under-cover; treat the verdict as provisional and run 5 "
            "or more seeds per arm"
        )
    merged += [str(w) for w in found if getattr(w, "kind", "") != "few-runs"]
    return list(dict.fromkeys(merged))


def _analyze(session: Session, experiment: Experiment) -> Analysis:
    status = store.experiment_status(experiment)
    excluded = [(t.key, _why_excluded(t)) for t in experiment.trials if t.status != "done"]
    done = [t for t in experiment.trials if t.status == "done"]
    if not experiment.design_yaml:
        kind = "imported results" if experiment.design_hash == store.IMPORTED_HASH else \
            "ad-hoc experiment"
        return Analysis(experiment.name, status, None, [], excluded,
                        note=f"{kind}: no design, so no hypothesis to judge",
                        kind="imported" if kind == "imported results" else "ad-hoc")
    design = spec.parse_design(experiment.design_yaml, f"design of {experiment.name}")
    arm_names = [a.name for a in spec.arm_specs(design)]
    results = [_hypothesis_result(session, design, h, arm_names, done)
               for h in design.all_hypotheses]
    family = _adjust_and_judge(results, design)
    excluded += list(dict.fromkeys(d for r in results for d in r.diverged))
    note = "" if results else "no hypothesis declared: the results are exploratory"
    secondary = {m: _secondary(session, done, m) for m in design.secondary_metrics}
    return Analysis(experiment.name, status, design.control, results, excluded, family,
                    secondary=secondary, note=note)


def _secondary(session: Session, done: list[Trial], metric: str) -> dict[str, Interval]:
    """A secondary metric per arm (its last logged value per trial): described, not judged."""
    values = store.last_values(session, [t.id for t in done], metric)
    by_arm: dict[str, list[float]] = defaultdict(list)
    for trial in done:
        if trial.id in values and math.isfinite(values[trial.id]):
            by_arm[trial.arm].append(values[trial.id])
    return {arm: stats.mean_interval(v) for arm, v in by_arm.items()}


def _hypothesis_result(session: Session, design: Design, hypothesis: Hypothesis,
                       arm_names: list[str], done: list[Trial]) -> HypothesisResult:
    values, items = _trial_values(session, done, hypothesis)
    if hypothesis.source == "scalar":
        items = {}  # eval items are a metric of their own (Analysis.evaluations), not this one
    diverged = _non_finite(session, done, hypothesis, values)
    tasks = sorted({task for per_trial in items.values() for task in per_trial})
    by_arm: dict[str, list[Trial]] = defaultdict(list)
    for trial in done:
        if trial.id in values:
            by_arm[trial.arm].append(trial)
    bounds = _bounds(hypothesis, items)
    arms = [_arm_result(arm, by_arm.get(arm, []), values, items, tasks, bounds)
            for arm in arm_names]
    if bounds is None:
        _warn_outside_unit_range(hypothesis, arms)
    control = design.control
    if design.factors is not None:
        comparisons = _factor_effects(design, hypothesis, by_arm, values)
        return HypothesisResult(hypothesis, control, arms, comparisons, tasks, bounds, diverged)
    variants = [a for a in arm_names if a != control]
    if hypothesis.compare:
        variants = [a for a in variants if a in hypothesis.compare]
    comparisons = [] if control is None else [
        _compare(control, arm, by_arm, values, items, tasks, hypothesis, design.seed_analysis,
                 bounds)
        for arm in variants
    ]
    _runs_by_tasks(arms, comparisons, by_arm, items, tasks, hypothesis)
    missing = review.never_logged(session, done, hypothesis) if done and not values else ""
    for comparison in comparisons:
        if missing and comparison.seeds is None:
            comparison.reason = missing
    return HypothesisResult(hypothesis, control, arms, comparisons, tasks, bounds, diverged)


def _non_finite(session: Session, done: list[Trial], hypothesis: Hypothesis,
                values: dict[int, float]) -> list[tuple[str, str]]:
    """Trials whose metric went NaN/inf: dropped from `values` when their last value is
    not finite (a diverged run is data, not a number to average), named either way."""
    metric = hypothesis.metric
    first = store.first_non_finite(session, [t.id for t in done], metric) \
        if hypothesis.source == "scalar" else {}
    out = []
    for trial in done:
        value = values.get(trial.id)
        if value is not None and not math.isfinite(value):
            del values[trial.id]
            since = f" from step {first[trial.id]}" if trial.id in first else ""
            out.append((trial.key, f"diverged: {metric} is {_word(value)}{since}; not "
                                   f"counted for {metric}"))
        elif trial.id in first:
            warnings.warn(f"{trial.key}: {metric} was NaN/inf at step {first[trial.id]} and "
                          "finite again by the end; counted, but check that run",
                          StatsWarning, stacklevel=2)
    return out


def _word(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+inf" if value > 0 else "-inf")


def _factor_effects(design: Design, hypothesis: Hypothesis, by_arm: dict[str, list[Trial]],
                    values: dict[int, float]) -> list[Comparison]:
    """Main effects (and declared interactions) of a two-level factorial, by OLS over every
    seed of every run; each is a comparison the verdict judges."""
    factors = design.factors or {}
    levels = {f: list(factor.named_levels()) for f, factor in factors.items()}
    if any(len(v) != 2 for v in levels.values()):
        warnings.warn("factors with more than two levels: effects are not estimated; read "
                      "the per-arm table", StatsWarning, stacklevel=2)
        return []
    rows, runs = [], []
    for arm in spec.arm_specs(design):
        seeds = [values[t.id] for t in by_arm.get(arm.name, [])]
        if seeds:
            rows.append([1 if arm.factors[f] == levels[f][1] else -1 for f in factors])
            runs.append(seeds)
    wanted = hypothesis.compare or list(factors)
    try:
        effects = stats.factorial_effects(np.array(rows), runs, factors=list(factors),
                                          interactions=[tuple(i) for i in design.interactions])
    except ValueError as e:
        return [Comparison(name, "baseline", None, None, reason=f"not estimable yet: {e}")
                for name in wanted]
    out = []
    for name, effect in effects.items():
        if name not in wanted and "*" not in name:
            continue
        low, high = levels[name] if name in levels else ("-", "+")
        label = f"{name}={high}" if name in levels else name
        out.append(Comparison(label, f"{name}={low}" if name in levels else "additive",
                              effect, None, over=f"{effect.n} trials"))
    return out


def _why_excluded(trial: Trial) -> str:
    attempt = store.last_attempt(trial)
    if trial.status == "failed" and attempt is not None:
        return f"failed ({attempt.cause})"
    return trial.status


def _trial_values(session: Session, trials: list[Trial], hypothesis: Hypothesis
                  ) -> tuple[dict[int, float], TrialItemScores]:
    return store.primary_values(session, trials, source=hypothesis.source,
                                metric=hypothesis.metric)


def _task_mean(items: TrialItemScores, trial_id: int, task: str) -> float | None:
    scores = items.get(trial_id, {}).get(task)
    return float(np.mean(list(scores.values()))) if scores else None


def _bounds(hypothesis: Hypothesis, items: TrialItemScores) -> tuple[float, float] | None:
    """The metric's range: declared (`bounds:`), or [0, 1] for item scores that all lie in
    it (accuracy, exact match): intervals are kept inside it."""
    if hypothesis.bounds is not None:
        return hypothesis.bounds
    scores = [v for tasks in items.values() for per in tasks.values() for v in per.values()]
    if hypothesis.source == "items" and scores and 0 <= min(scores) and max(scores) <= 1:
        return (0.0, 1.0)
    return None


def _warn_outside_unit_range(hypothesis: Hypothesis, arms: list[ArmResult]) -> None:
    """A metric whose every value lies in [0, 1] (an accuracy, a rate) with an interval
    reaching outside it: say how to declare the range rather than guess it."""
    values = [v for arm in arms for v in arm.values]
    if not values or min(values) < 0 or max(values) > 1:
        return
    # an infinite interval (one seed) says nothing about the range: the seed count is warned
    wide = [a for a in arms if a.overall is not None
            and math.isfinite(a.overall.low) and math.isfinite(a.overall.high)
            and (a.overall.low < 0 or a.overall.high > 1)]
    if wide:
        a = wide[0]
        warnings.warn(StatsWarning(
            f"{hypothesis.metric}: every value lies in [0, 1] but {a.arm}'s interval is "
            f"[{a.overall.low:.3g}, {a.overall.high:.3g}]; if the metric cannot leave [0, 1] "
            "(an accuracy, a rate), declare `bounds: [0, 1]` in the hypothesis and intervals "
            "stay inside it"), stacklevel=2)


def _arm_result(arm: str, trials: list[Trial], values: dict[int, float], items: TrialItemScores,
                tasks: list[str], bounds: tuple[float, float] | None) -> ArmResult:
    arm_values = [values[t.id] for t in trials]
    per_task = {}
    for task in tasks:
        means = [m for t in trials if (m := _task_mean(items, t.id, task)) is not None]
        if means:
            per_task[task] = stats.mean_interval(means, bounds=bounds)
    overall = stats.mean_interval(arm_values, bounds=bounds) if arm_values else None
    return ArmResult(arm, [t.key for t in trials], arm_values, overall, per_task)


def _compare(control: str, variant: str, by_arm: dict[str, list[Trial]],
             values: dict[int, float], items: TrialItemScores, tasks: list[str],
             hypothesis: Hypothesis, seed_analysis: str,
             bounds: tuple[float, float] | None) -> Comparison:
    a, b = by_arm.get(control, []), by_arm.get(variant, [])
    comparison = Comparison(variant, control, None, None)
    if seed_analysis == "paired":  # arms share seeds: compare seed by seed
        shared = sorted({t.seed for t in a} & {t.seed for t in b})
        a = sorted((t for t in a if t.seed in shared), key=lambda t: t.seed)
        b = sorted((t for t in b if t.seed in shared), key=lambda t: t.seed)
    if len(a) < 2 or len(b) < 2:
        comparison.reason = (f"needs at least 2 finished seeds per arm (have {len(a)} {control}, "
                             f"{len(b)} {variant})")
        return comparison
    xa, xb = [values[t.id] for t in a], [values[t.id] for t in b]
    seeds = stats.paired_t(xa, xb) if seed_analysis == "paired" else stats.welch(xa, xb)
    comparison.seeds = _within_range(seeds, bounds)
    comparison.values = (xa, xb)
    comparison.over = (f"{len(xa)} seed pairs" if seed_analysis == "paired" else
                       f"{len(xa)} seeds per arm" if len(xa) == len(xb) else
                       f"{len(xa)} {control} and {len(xb)} {variant} seeds")
    seed_diffs = {t: d for t in tasks if (d := _welch_task(a, b, items, t)) is not None}
    item_diffs = {t: d for t in tasks if (d := _paired_task(a, b, items, t)) is not None}
    if item_diffs and hypothesis.source == "items":
        comparison.items = _within_range(stats.macro_average(list(item_diffs.values())), bounds)
    seeds_adj = _family(seed_diffs, bounds)
    items_adj = _family(item_diffs, bounds)
    comparison.per_task = {t: (seeds_adj.get(t), items_adj.get(t)) for t in tasks}
    comparison.generalization = _generalization(seed_diffs, hypothesis, bounds)
    return comparison


def _power_note(comparison: Comparison, hypothesis: Hypothesis, paired: bool,
                family_alpha: float, family: str) -> str:
    """With a declared smallest effect: the power these seeds had to see it under the test
    that ran (paired t on seed differences, or two-sample on the pooled seed SD) at the
    family's per-comparison alpha, and the seeds per arm 80% power needs."""
    delta = hypothesis.smallest_effect
    a, b = (np.asarray(v, dtype=float) for v in comparison.values)
    if delta is None or a.size < 2 or b.size < 2:
        return ""
    if paired:
        sd = float(np.std(b - a, ddof=1))
        what, power_of = "SD of seed differences", stats.power_paired
    else:
        sd = float(np.sqrt((np.var(a, ddof=1) * (a.size - 1) + np.var(b, ddof=1) * (b.size - 1))
                           / (a.size + b.size - 2)))
        what, power_of = "pooled seed SD", stats.power_two_sample
    if not (math.isfinite(sd) and sd > 0):
        return ""
    n = min(a.size, b.size)
    power = power_of(n, delta, sd=sd, alpha=family_alpha)
    try:
        needed = f"{stats.seeds_needed(delta, sd=sd, alpha=family_alpha, power=0.8, paired=paired)}"
    except ValueError:  # beyond the search's limit
        needed = "more than 10,000"
    test = "paired t" if paired else "two-sample t"
    level = f"alpha {family_alpha:.3g}" + (f" ({family})" if family else "")
    return (f"power {power:.2f} to detect the smallest effect {delta:g} with {n} seeds per arm "
            f"({test}, {what} {sd:.3g}, {level}); 80% power needs {needed} seeds per arm")


def _family(diffs: dict[str, Difference], bounds: tuple[float, float] | None
            ) -> dict[str, Adjusted]:
    """Per-task comparisons adjusted for the family of tasks (Holm)."""
    if not diffs:
        return {}
    adjusted = stats.adjust(list(diffs.values()), FAMILY_METHOD)
    return {task: dataclasses.replace(adj, difference=_within_range(adj.difference, bounds))
            for task, adj in zip(diffs, adjusted, strict=True)}


def _within_range(diff: Difference, bounds: tuple[float, float] | None) -> Difference:
    """A difference of a metric in [lo, hi] lies in [-(hi - lo), hi - lo]: its interval is
    cut there, which cannot lose the true difference."""
    if bounds is None:
        return diff
    width = bounds[1] - bounds[0]
    return dataclasses.replace(diff, low=max(diff.low, -width), high=min(diff.high, width))


def _generalization(seed_diffs: dict[str, Difference], hypothesis: Hypothesis,
                    bounds: tuple[float, float] | None = None) -> Generalization | None:
    """Whether the effect holds across tasks; with a bounded metric the pooled effect's
    interval and the per-task ones are cut to [-(hi - lo), hi - lo] like every difference
    (the verdict, judged before the cut, cannot change: the cut keeps 0 and +-delta inside)."""
    # A task where both arms score identically on every seed has no noise estimate
    # (SE 0): it carries no information about the spread and is left out of pooling.
    informative = {t: d for t, d in seed_diffs.items() if math.isfinite(d.se) and d.se > 0}
    if len(informative) < 2:
        return None
    found = stats.generalization(informative, smallest_effect=hypothesis.smallest_effect,
                                 alpha=hypothesis.alpha, method=FAMILY_METHOD,
                                 direction=hypothesis.direction)
    if bounds is None:
        return found
    width = bounds[1] - bounds[0]
    pooled = dataclasses.replace(found.pooled, low=max(found.pooled.low, -width),
                                 high=min(found.pooled.high, width))
    tasks = {task: dataclasses.replace(adj, difference=_within_range(adj.difference, bounds))
             for task, adj in found.tasks.items()}
    return dataclasses.replace(found, pooled=pooled, tasks=tasks)


def _welch_task(a: list[Trial], b: list[Trial], items: TrialItemScores, task: str
                ) -> Difference | None:
    xa = [m for t in a if (m := _task_mean(items, t.id, task)) is not None]
    xb = [m for t in b if (m := _task_mean(items, t.id, task)) is not None]
    return stats.welch(xa, xb) if len(xa) >= 2 and len(xb) >= 2 else None


def _paired_task(a: list[Trial], b: list[Trial], items: TrialItemScores, task: str
                 ) -> Difference | None:
    """Per-item scores averaged over each arm's seeds, compared on the items all share."""
    score_sets = [items.get(t.id, {}).get(task, {}) for t in a + b]
    shared = sorted(set.intersection(*(set(s) for s in score_sets))) if score_sets else []
    if len(shared) < 2:
        return None
    if any(len(s) != len(shared) for s in score_sets):
        warnings.warn(f"task {task!r}: trials scored different items; the paired comparison "
                      f"uses the {len(shared)} items all of them share", StatsWarning,
                      stacklevel=2)
    mean_a = np.mean([[items[t.id][task][i] for i in shared] for t in a], axis=0)
    mean_b = np.mean([[items[t.id][task][i] for i in shared] for t in b], axis=0)
    if np.all(mean_a == mean_b):
        return None  # identical answers: no difference and no noise to estimate
    return stats.paired_difference(mean_a, mean_b)


def _runs_by_tasks(arms: list[ArmResult], comparisons: list[Comparison],
                   by_arm: dict[str, list[Trial]], items: TrialItemScores, tasks: list[str],
                   hypothesis: Hypothesis) -> None:
    """rliable's aggregates per arm and P(improvement) per variant, from each trial's
    per-task scores (runs x tasks), with stratified-bootstrap intervals."""
    if len(tasks) < 2:
        return
    scores = {}
    for arm, trials in by_arm.items():
        rows = [[_task_mean(items, t.id, task) for task in tasks] for t in trials]
        rows = [r for r in rows if None not in r]  # trials that scored every task
        if len(rows) >= 2:
            scores[arm] = np.array(rows, dtype=float)
    if not scores:
        return
    found = stats.interval_estimates(scores, metric=list(AGGREGATES), **BOOTSTRAP)
    for arm in arms:
        arm.aggregates = found.get(arm.arm, {})
    for c in comparisons:
        if c.control in scores and c.variant in scores:
            x, y = scores[c.variant], scores[c.control]
            if hypothesis.direction == "decrease":
                x, y = -x, -y  # lower is better: "improves" means a lower score
            c.improvement = stats.probability_of_improvement(x, y, **BOOTSTRAP)


def _adjust_and_judge(results: list[HypothesisResult], design: Design) -> str:
    """One family: every variant against the control under every hypothesis, corrected
    by the design's `correction` (Holm by default). Returns the family in words."""
    tested = [(r, c) for r in results for c in r.comparisons if c.seeds is not None]
    if not tested:
        return ""
    several = len(tested) > 1
    method = design.correction if several else "none"
    alphas = {r.hypothesis.alpha for r, _ in tested}
    level = 1 - min(alphas)  # one family level; hypotheses with other alphas use the smallest
    adjusted = stats.adjust([c.seeds for _, c in tested], method, ci=level)
    name = "no" if method == "none" else stats.CORRECTIONS[method].name
    paired = design.paired_analysis
    for (result, comparison), adj in zip(tested, adjusted, strict=True):
        hypothesis = result.hypothesis
        comparison.p_adjusted = adj.p_adjusted
        comparison.family = adj.note
        label = f" {name}-adjusted" if several and method != "none" else ""
        judged = stats.verdict(_within_range(adj.difference, result.bounds),
                               alpha=hypothesis.alpha,
                               direction=hypothesis.direction,
                               smallest_effect=hypothesis.smallest_effect,
                               family_size=len(tested) if method != "none" else 1,
                               aliases=comparison.seeds.aliases, over=comparison.over,
                               adjusted=label)
        comparison.verdict, comparison.reason = judged.decision, judged.reason
        alpha = stats.family_alpha(hypothesis.alpha, len(tested), method)
        family = f"{name} over {len(tested)} comparisons" if label else ""
        comparison.power_note = _power_note(comparison, hypothesis, paired, alpha, family)
        if comparison.power_note and comparison.verdict == "inconclusive":
            comparison.reason += f"; {comparison.power_note}"
    if not several:
        return "a single comparison (no adjustment)"
    if method == "none":
        return (f"{len(tested)} comparisons, NOT corrected (`correction: none`): "
                "the chance of a false positive among them exceeds alpha")
    return f"{name} correction over {len(tested)} comparisons ({adjusted[0].note})"
