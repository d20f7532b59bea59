"""The design review: rules that catch weak experiments before they burn compute.

Each rule looks at a validated design (and, for power, pilot variances) and
returns findings with the place in the file and a concrete fix. Structural
problems (a missing control, an undeclared param, ...) come from
`labcoat.spec` and are errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from labcoat import spec, stats
from labcoat.errors import LabcoatError
from labcoat.review._findings import Finding, Severity
from labcoat.review._pilot import Pilot
from labcoat.review._plan import planned_analysis, verdict_comparisons
from labcoat.spec import Design, Hypothesis

FEW_SEEDS = 5
LONG_RUN_STEPS = 1000
TARGET_POWER = 0.8
EXTREME = 0.1  # predictions outside [0.1, 0.9] are flagged


class Context:
    """What the rules see: the design, where its keys are, and pilot variances."""

    def __init__(self, design: Design, file: str, lines: dict,
                 pilots: dict[str, Pilot] | None = None) -> None:
        self.design = design
        self.file = file
        self.lines = lines
        self.pilots = pilots or {}  # hypothesis id -> pilot

    def finding(self, rule: str, severity: Severity, path: tuple, message: str,
                fix: str = "") -> Finding:
        """A finding at `path`, or at its nearest key in the file (none if absent)."""
        line = spec.line_of(self.lines, path) if path else None
        if path and line == self.lines.get(()):
            line = None  # the key is not in the file: no line to point at
        return Finding(rule, severity, self.file, line, message, fix)


Rule = Callable[[Context], Iterator[Finding]]


def single_seed(ctx: Context) -> Iterator[Finding]:
    n = len(ctx.design.seeds)
    if n == 1:
        yield ctx.finding("single-seed", "error", ("seeds",),
                          "one seed cannot separate an effect from seed-to-seed noise",
                          f"run at least {FEW_SEEDS} seeds (`seeds: {FEW_SEEDS}`); "
                          "`labcoat plan` says how many the smallest effect needs")
    elif n < FEW_SEEDS:
        yield ctx.finding("few-seeds", "warning", ("seeds",),
                          f"{n} seeds: t intervals are wide and bootstrap intervals under-cover",
                          f"use {FEW_SEEDS} or more seeds, or check `labcoat plan`")


def confounded_arm(ctx: Context) -> Iterator[Finding]:
    """An arm that changes several params at once cannot attribute its effect to either."""
    arms = ctx.design.arms or {}
    control = ctx.design.control
    base = dict(arms[control].params) if control in arms else {}
    for name, arm in arms.items():
        changed = sorted(k for k, v in arm.params.items() if base.get(k, ctx.design.params.get(k))
                         != v)
        if name != control and len(changed) > 1:
            yield ctx.finding(
                "confounded-arm", "warning", ("arms", name),
                f"arm {name!r} changes {', '.join(changed)} at once: its effect cannot be "
                "attributed to either",
                "give each change its own arm, or declare `factors:` so a factorial design "
                "estimates each effect")


def no_hypothesis(ctx: Context) -> Iterator[Finding]:
    if not ctx.design.all_hypotheses:
        yield ctx.finding("no-primary-metric", "warning", (),
                          "no hypothesis with a pre-declared primary metric: any metric that "
                          "looks good afterwards can be reported",
                          "add `hypothesis:` with claim, metric and direction before running")


def uncorrected_family(ctx: Context) -> Iterator[Finding]:
    design = ctx.design
    family = verdict_comparisons(design)
    if design.correction == "none" and family > 1:
        yield ctx.finding("uncorrected-family", "warning", ("correction",),
                          f"{family} comparisons are tested at full alpha each: the chance of a "
                          "false positive among them is well above alpha",
                          "remove `correction: none` (Holm is the default) or declare fewer "
                          "hypotheses")


def smallest_effect(ctx: Context) -> Iterator[Finding]:
    for path, h in _hypothesis_paths(ctx.design):
        if h.smallest_effect is None:
            yield ctx.finding("no-smallest-effect", "info", path,
                              f"hypothesis {h.id} declares no smallest effect of interest: the "
                              "report cannot tell 'no effect' from 'not enough data'",
                              "add `smallest_effect:` (e.g. 0.02 for two points of accuracy)")


def underpowered(ctx: Context) -> Iterator[Finding]:
    """Power of the test the report will run (paired or two-sample t) at the per-comparison
    alpha the design's correction leaves each comparison of the verdict family."""
    n = len(ctx.design.seeds)
    if n < 2:
        return  # single-seed says it already: there is no power to speak of
    for path, h in _hypothesis_paths(ctx.design):
        if h.smallest_effect is None:
            continue
        pilot = ctx.pilots.get(h.id or "")
        analysis = planned_analysis(ctx.design, h, pilot)
        if analysis.sd is None:
            if pilot is not None and (pilot.never_logged or not pilot.finished):
                continue  # pilot_metric says why the pilot gives no SD, and what to do
            fix = ("declare `sd:` (a guess of the per-seed SD) under the hypothesis, "
                   "or pass --pilot EXP (an earlier experiment in the store)")
            if pilot is not None:  # a pilot with too few seeds: passing one again won't help
                fix = analysis.sd_source.removeprefix("unknown: ")
            what = ("SD of the per-seed differences between arms (paired analysis)"
                    if analysis.paired else "per-seed SD of the metric")
            yield ctx.finding("power-unknown", "info", path,
                              f"hypothesis {h.id}: power cannot be checked without the {what}",
                              fix)
            continue
        power = analysis.power(n, h.smallest_effect)
        if power < TARGET_POWER:
            needed = analysis.seeds_needed(h.smallest_effect, TARGET_POWER)
            kind = "SD of paired differences" if analysis.paired else "per-seed SD"
            yield ctx.finding(
                "underpowered", "warning", path,
                f"hypothesis {h.id}: {n} seeds per arm give power {power:.2f} to detect "
                f"{h.smallest_effect:g} ({analysis.description}; {kind} {analysis.sd:.3g} "
                f"from {analysis.sd_source})",
                f"use {needed} seeds per arm for {TARGET_POWER:.0%} power, or accept a larger "
                "smallest effect")
        yield from _items_power(ctx, path, h, pilot)


def pilot_metric(ctx: Context) -> Iterator[Finding]:
    """A pilot whose finished trials never logged a hypothesis' metric (or per-item scores):
    said before the run, in the words the report would use after it (issue 22, point 4)."""
    for path, h in _hypothesis_paths(ctx.design):
        pilot = ctx.pilots.get(h.id or "")
        if pilot is None:
            continue
        if pilot.never_logged:
            yield ctx.finding(
                "pilot-never-logged", "warning", (*path, "metric"),
                f"hypothesis {h.id}, pilot {pilot.experiment}: {pilot.never_logged}",
                "until then a run of this design ends with no verdict (nothing to judge); "
                f"after the fix, run the pilot again and lint with --pilot {pilot.experiment}")
        elif not pilot.finished:
            yield ctx.finding(
                "pilot-unfinished", "info", path,
                f"hypothesis {h.id}: pilot {pilot.experiment} has no finished trial yet, so "
                "it says nothing about the metric or its variance",
                f"let a trial of {pilot.experiment} finish (`labcoat status "
                f"{pilot.experiment}`), or declare `sd:` under the hypothesis")


def _items_power(ctx: Context, path: tuple, h: Hypothesis,
                 pilot: Pilot | None) -> Iterator[Finding]:
    if h.source != "items" or pilot is None or pilot.omega2 is None:
        return
    needed = stats.items_needed(h.smallest_effect, omega2=max(pilot.omega2, 1e-12),
                                alpha=h.alpha, power=TARGET_POWER)
    have = (ctx.design.eval.items_per_task if ctx.design.eval and ctx.design.eval.items_per_task
            else pilot.items_per_task)
    if have is not None and have < needed:
        yield ctx.finding(
            "too-few-items", "warning", path,
            f"hypothesis {h.id}: {have} eval items per task cannot resolve {h.smallest_effect:g} "
            f"between two models (item-difference variance {pilot.omega2:.3g} from pilot "
            f"{pilot.experiment}; Miller 2024)",
            f"evaluate {needed} items per task (`eval: {{items_per_task: {needed}}}`)")


def eval_at_end(ctx: Context) -> Iterator[Finding]:
    steps = ctx.design.params.get("steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < LONG_RUN_STEPS:
        return
    every = ctx.design.eval.every if ctx.design.eval else None
    if every is None or every > steps // 2:
        yield ctx.finding(
            "eval-only-at-end", "warning", ("eval",) if ctx.design.eval else ("params", "steps"),
            f"a {steps}-step run evaluated only at the end: a broken run is found after its "
            "compute is spent",
            f"evaluate during training, e.g. `eval: {{every: {max(1, steps // 10)}}}`")


def contamination(ctx: Context) -> Iterator[Finding]:
    """Eval items whose word n-grams occur in the declared training text (issue 7's scanner)."""
    data = ctx.design.data
    if data is None:
        return
    base = Path(ctx.file).parent
    suite = data.eval or (ctx.design.eval.suite if ctx.design.eval else None)
    if suite is None or not (base / suite).exists():
        yield ctx.finding("contamination-unchecked", "warning", ("data",),
                          "training data is declared but no eval suite file to check against it"
                          + (f" ({suite!r} is not a file or directory)" if suite else ""),
                          "name the suite's file or directory: `data: {eval: suite/}`")
        return
    from labcoat.evals import scan_contamination  # only designs that declare data pay for it

    try:
        report = scan_contamination([base / p for p in data.train], base / suite,
                                    text_field=data.text_field)
    except LabcoatError as e:
        yield ctx.finding("contamination-unchecked", "error", ("data",), str(e),
                          "fix the path or file, or remove `data:`")
        return
    for task in report.tasks:
        if task.contaminated:
            first = next(i for i in report.contaminated if i.task == task.task)
            place = first.example
            where = f" (e.g. item {first.id!r} at {place.file}" + (
                f":{place.line})" if place.line else f", byte {place.offset})") if place else ""
            yield ctx.finding(
                "eval-contaminated", "warning", ("data", "train"),
                f"task {task.task!r}: {task.contaminated} of {task.items} eval items "
                f"({task.rate:.0%}) have {task.n}-grams in the training data{where}",
                "drop them from the suite (or decontaminate the training data) and report "
                "the clean items; list them with `labcoat contamination --train ... --eval "
                f"{suite}`")


def seed_pairing(ctx: Context) -> Iterator[Finding]:
    design = ctx.design
    if design.paired_seeds and design.seed_analysis == "welch" and len(design.seeds) > 1:
        yield ctx.finding("seeds-not-paired-in-analysis", "info", ("seed_analysis",),
                          "arms share seeds but the analysis treats them as independent: "
                          "pairing by seed can cut variance when seeds affect arms alike",
                          "set `seed_analysis: paired` (pre-register it before the run)")
    if not design.paired_seeds and design.seed_analysis == "paired":
        yield ctx.finding("paired-without-shared-seeds", "error", ("seed_analysis",),
                          "a paired analysis needs arms that share seeds, but "
                          "`paired_seeds: false` gives each arm its own",
                          "set `paired_seeds: true`, or `seed_analysis: welch`")


def seed_streams(ctx: Context) -> Iterator[Finding]:
    missing = [s for s in spec._schema.STREAMS if s not in ctx.design.seed_streams]
    if missing:
        yield ctx.finding("seed-streams", "info", ("seed_streams",),
                          f"the seed does not vary {', '.join(missing)}: the intervals describe "
                          "only the other sources of randomness",
                          "let the seed control init, data and dropout unless you study one")


def budget(ctx: Context) -> Iterator[Finding]:
    b = ctx.design.budget
    if b is None:
        return
    trials = spec.trial_count(ctx.design)
    if b.max_trials is not None and trials > b.max_trials:
        yield ctx.finding("budget-exceeded", "error", ("budget", "max_trials"),
                          f"the design runs {trials} trials, over the budget of {b.max_trials}",
                          "drop seeds, arms or scales, or use a fractional factorial "
                          "(`labcoat plan` suggests one)")
    if b.trial_minutes is None:
        if b.max_cpu_hours or b.max_gpu_hours:
            yield ctx.finding("budget-unknown", "info", ("budget",),
                              "hours cannot be checked without the minutes per trial",
                              "declare `budget: {trial_minutes: ...}` (a pilot run tells)")
        return
    for kind, limit, per_trial in (("CPU", b.max_cpu_hours, b.cpus_per_trial),
                                   ("GPU", b.max_gpu_hours, b.gpus_per_trial)):
        hours = trials * b.trial_minutes / 60 * per_trial
        if limit is not None and hours > limit:
            yield ctx.finding("budget-exceeded", "error", ("budget",),
                              f"{trials} trials x {b.trial_minutes:g} min x {per_trial:g} "
                              f"{kind}s = {hours:.1f} {kind}-hours, over the budget of {limit:g}",
                              "drop seeds, arms or scales, or raise the budget")


def large_design(ctx: Context) -> Iterator[Finding]:
    """A design far larger than usual (`seeds: 100000` for 10) is said before it runs;
    with `budget: max_trials` the budget rule says it instead."""
    if ctx.design.budget is not None and ctx.design.budget.max_trials is not None:
        return
    problem = spec.size_problem(ctx.design)
    if problem:
        yield ctx.finding("large-design", "warning", ("seeds",), problem,
                          "`labcoat run` asks for --yes before it starts them; declare "
                          "`budget: {max_trials: N}` if this size is intended")


def aliasing(ctx: Context) -> Iterator[Finding]:
    design = ctx.design
    if not design.fraction:
        return
    words = _defining_words(design)
    shortest = min((len(w) for w in words), default=0)
    if shortest and shortest < 4:
        example = next(w for w in words if len(w) == shortest)
        yield ctx.finding(
            "aliased-effects", "warning", ("fraction",),
            f"resolution {shortest} fraction (defining word {'*'.join(sorted(example))}): main "
            "effects are aliased with two-factor interactions",
            "add runs (fewer generators) for resolution IV, or accept that a main effect is "
            "attributable only if those interactions are negligible")
    for i, pair in enumerate(design.interactions):
        term = frozenset(pair)
        for other in [frozenset([f]) for f in design.factors or {}] + [
                frozenset(p) for p in design.interactions if frozenset(p) != term]:
            if any(term ^ other == w for w in words):
                yield ctx.finding("aliased-interaction", "error", ("interactions", i),
                                  f"interaction {'*'.join(pair)} is aliased with "
                                  f"{'*'.join(sorted(other))} in this fraction: they cannot be "
                                  "told apart", "drop a generator or the interaction")


def extreme_prediction(ctx: Context) -> Iterator[Finding]:
    """A prediction above 0.9 or below 0.1: the run is expected to teach little, and a
    confident miss costs many bits in the ledger."""
    for path, h in _hypothesis_paths(ctx.design):
        p = h.predict.supported if h.predict is not None else None
        if p is not None and not EXTREME <= p <= 1 - EXTREME:
            yield ctx.finding(
                "extreme-prediction", "warning", (*path, "predict", "supported"),
                f"hypothesis {h.id}: you predict SUPPORTED with probability {p:g}; a run whose "
                "outcome you are this sure of teaches little (see its expected information)",
                "run an experiment you are less sure of, or state the doubt you have: "
                "calibrated forecasters rarely go past 0.9")


def expected_information(ctx: Context) -> Iterator[Finding]:
    """The bits a hypothesis' verdict is expected to give about its claim (docs/ledger.md)."""
    from labcoat.review._information import information

    for path, h in _hypothesis_paths(ctx.design):
        if h.predict is None:
            continue
        info = information(ctx.design, h, ctx.pilots.get(h.id or ""))
        if info.bits is None:
            yield ctx.finding("expected-information", "info", (*path, "predict"),
                              f"hypothesis {h.id}: expected information unknown ({info.why})",
                              "declare `smallest_effect:` and `sd:` so power, and with it "
                              "the information, can be computed")
            continue
        yield ctx.finding(
            "expected-information", "info", (*path, "predict"),
            f"hypothesis {h.id}: expected information {info.bits:.2f} bits of at most 1 "
            f"(prior {info.prior:g}, power {info.power:.2f} at the smallest effect, "
            f"false SUPPORTED rate {info.false_positive:.3g})",
            "`labcoat plan A.yaml B.yaml` ranks designs by bits per unit of compute")


def _defining_words(design: Design) -> list[frozenset[str]]:
    """Every word of the defining relation (Box, Hunter & Hunter 2005, sec. 6.4), from
    stats, the one parser of generators."""
    return stats.defining_words(list(design.factors or {}), design.fraction)


def _hypothesis_paths(design: Design) -> Iterator[tuple[tuple, Hypothesis]]:
    for i, h in enumerate(design.all_hypotheses):
        if design.hypothesis is not None and i == 0:
            yield ("hypothesis",), h
        else:
            yield ("hypotheses", i - (design.hypothesis is not None)), h


RULES: tuple[Rule, ...] = (
    single_seed, confounded_arm, no_hypothesis, uncorrected_family, smallest_effect,
    underpowered, pilot_metric, eval_at_end, seed_pairing, seed_streams, budget, large_design,
    aliasing,
    contamination, extreme_prediction, expected_information,
)
