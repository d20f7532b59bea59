"""`labcoat run --until-decisive`: add seeds in rounds until the verdict is decisive.

After every round, each variant is compared with the control on the seeds both
finished, paired by seed, with an anytime-valid confidence sequence
(`labcoat.stats.SequentialTest`, t-mixture): looking after every round and
stopping as soon as it is decisive keeps the error rate at alpha (split over
the variants, Bonferroni). The rule is pre-registered with the plan.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from labcoat import spec, stats, store
from labcoat.errors import LabcoatError
from labcoat.monitor._standard import standard_monitors
from labcoat.runner import ExecutorConfig, RunSummary, run_design
from labcoat.spec import Design, Hypothesis

DEFAULT_MAX_SEEDS = 50


@dataclass
class SequentialOutcome:
    rounds: int
    seeds: list[int]
    results: dict[str, stats.SequentialResult] = field(default_factory=dict)  # per variant
    summaries: list[RunSummary] = field(default_factory=list)


def sequential_rule(design: Design, max_seeds: int) -> dict:
    """What is pre-registered about the sequential design."""
    h = _primary(design)
    return {"method": "t-mixture", "hypothesis": h.id, "alpha": h.alpha,
            "max_seeds": max_seeds, "paired_by": "seed"}


def run_until_decisive(design_path: str | Path, *, max_seeds: int | None = None,
                       round_size: int | None = None, console: Console | None = None,
                       plain: bool | None = None, amend: str | None = None,
                       parallelism: int | None = None,
                       executor: ExecutorConfig | None = None) -> SequentialOutcome:
    design = spec.load_design(design_path)
    hypothesis = _primary(design)
    control, variants = _arms(design)
    limit = max_seeds or _budget_seeds(design)
    alpha = hypothesis.alpha / len(variants)
    _check_cap(design, design_path, limit, alpha, "--max-seeds" if max_seeds else None)
    tests = {v: stats.SequentialTest(alpha=alpha, direction=hypothesis.direction,
                                     smallest_effect=hypothesis.smallest_effect,
                                     max_seeds=limit) for v in variants}
    first = min(limit, max(len(design.seeds), _min_seeds(alpha)))
    seeds = _seed_list(design.seeds, first)
    step = round_size or parallelism or design.parallelism or 2
    outcome = SequentialOutcome(0, seeds)
    console = console or Console()
    while True:
        outcome.rounds += 1
        console.print(f"round {outcome.rounds}: {len(seeds)} seeds per arm")
        outcome.summaries.append(run_design(
            design_path, parallelism=parallelism, console=console, plain=plain, amend=amend,
            extra_seeds=seeds[len(design.seeds):], sequential=sequential_rule(design, limit),
            executor=executor, monitors=standard_monitors()))
        amend = None  # amended once, on the first round
        with warnings.catch_warnings(record=True) as caught:  # lines of output, not raw
            warnings.simplefilter("always", stats.StatsWarning)
            outcome.results = _judge(design, hypothesis, control, tests)
        for found in dict.fromkeys(str(w.message) for w in caught
                                   if issubclass(w.category, stats.StatsWarning)):
            console.print(f"  warning: {found}", soft_wrap=True, markup=False)
        for variant, result in outcome.results.items():
            console.print(f"  {variant} vs {control}: {result.decision} - {result.reason}",
                          soft_wrap=True, markup=False)
        if all(r.stop for r in outcome.results.values()) or len(seeds) >= limit:
            return outcome
        seeds = _seed_list(seeds, min(limit, len(seeds) + step))


def _primary(design: Design) -> Hypothesis:
    if not design.all_hypotheses:
        raise LabcoatError("--until-decisive needs a hypothesis to decide: add `hypothesis:`")
    return design.all_hypotheses[0]


def _arms(design: Design) -> tuple[str, list[str]]:
    if design.factors is not None:
        raise LabcoatError("--until-decisive compares arms with a control; a factorial design "
                           "runs a fixed number of seeds (drop --until-decisive)")
    if not design.paired_seeds:
        raise LabcoatError("--until-decisive pairs arms by seed: set `paired_seeds: true`")
    control = design.control
    variants = [a.name for a in spec.arm_specs(design) if not a.control]
    return control, variants


def _check_cap(design: Design, path: str | Path, limit: int, alpha: float,
               flag: str | None) -> None:
    """The cap on seeds per arm is a promise: refuse a run that would break it or that
    could never decide under it (issue 30: `--max-seeds 3` ran 5 seeds per arm)."""
    source = f"{flag} {limit}" if flag else (
        f"the budget ({limit} seeds per arm from `budget: max_trials` in {path})"
        if design.budget is not None and design.budget.max_trials is not None
        else f"the default cap of {limit} seeds per arm")
    if len(design.seeds) > limit:
        raise LabcoatError(
            f"{path}: `seeds: {len(design.seeds)}` already exceeds {source}, the cap on "
            f"seeds per arm of --until-decisive; lower `seeds:` in the design (the first "
            f"round) to at most {limit}, or raise the cap")
    floor = _min_seeds(alpha)
    if limit < floor:
        raise LabcoatError(
            f"{source} is below {floor}, the fewest seeds per arm at which the sequential "
            f"test (alpha {alpha:.3g} per comparison) can decide anything: it would run "
            f"seeds and end inconclusive by construction; use --max-seeds {floor} or more")


def _budget_seeds(design: Design) -> int:
    b = design.budget
    if b is not None and b.max_trials is not None:
        return max(2, b.max_trials // len(spec.arm_specs(design)))
    return DEFAULT_MAX_SEEDS


def _min_seeds(alpha: float) -> int:
    """Seeds per arm before the confidence sequence can be finite (no point looking
    earlier)."""
    return stats.sequential_plan(1.0, sd=1.0, alpha=alpha, reps=50, max_seeds=60).min_seeds


def _seed_list(seeds: list[int], count: int) -> list[int]:
    out = list(seeds)
    nxt = max(out) + 1 if out else 0
    while len(out) < count:
        out.append(nxt)
        nxt += 1
    return out


def _judge(design: Design, hypothesis: Hypothesis, control: str,
           tests: dict[str, stats.SequentialTest]) -> dict[str, stats.SequentialResult]:
    db = store.open_store()
    try:
        with db.session() as session:
            experiment = store.find_experiment(session, design.name)
            done = [t for t in experiment.trials if t.status == "done"]
            values, _ = store.primary_values(session, done, source=hypothesis.source,
                                             metric=hypothesis.metric)
            by_arm: dict[str, dict[int, float]] = {}
            for trial in done:
                if trial.id in values:
                    by_arm.setdefault(trial.arm, {})[trial.seed] = values[trial.id]
    finally:
        db.close()
    results = {}
    for variant, test in tests.items():
        a, b = by_arm.get(control, {}), by_arm.get(variant, {})
        shared = sorted(set(a) & set(b))  # seed order: earlier values never change
        results[variant] = test.update([a[s] for s in shared], [b[s] for s in shared])
    return results
