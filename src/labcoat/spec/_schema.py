"""The design file schema: what a researcher declares about one experiment.

The walking-skeleton form stays valid::

    name: warmup-demo
    hypothesis:
      claim: Linear LR warmup improves macro exact-match
      metric: exact_match        # name of the primary metric
      source: items              # items: per-item eval results, macro-averaged over tasks
      direction: increase        # increase | decrease
    command: "{python} -m labcoat.workloads.tinylm --warmup {warmup} --seed {seed}"
    params: {warmup: 0}
    arms:
      control: {control: true}
      warmup: {params: {warmup: 60}}
    seeds: 3                     # or an explicit list: [0, 1, 2]

The full form adds several hypotheses, secondary metrics, factors (full or
fractional factorial) instead of arms, seed streams and pairing, scales, an
eval plan and a budget; see README.md. This module holds the structure (types,
unknown keys); the checks across fields are in `_checks`.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from labcoat.journal import MAX_RANKS

Scalar = str | int | float | bool
NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
# Placeholders the runner fills in besides the design's own params.
BUILTIN_PLACEHOLDERS = ("python", "seed", "arm", "trial", "experiment", "scale", "eval_every",
                        "eval_items", "ranks", "eval_budget")
STREAMS = ("init", "data", "dropout")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Prediction(_Strict):
    """What you expect before the run, scored afterwards against labcoat's own verdict
    (`labcoat ledger`, docs/ledger.md). Probabilities lie strictly between 0 and 1: a
    forecast of exactly 0 or 1 that turns out wrong has an infinite log score."""

    supported: float = Field(gt=0, lt=1, description="your probability that the verdict "
                             "will be SUPPORTED, e.g. 0.6")
    refuted: float | None = Field(None, gt=0, lt=1, description="optional: your probability "
                                  "of REFUTED")
    inconclusive: float | None = Field(None, gt=0, lt=1, description="optional: your "
                                       "probability of any other verdict (inconclusive, no "
                                       "effect, negligible)")
    effect: float | None = Field(None, description="your best guess of the effect (variant - "
                                 "control), in the metric's units")
    interval: tuple[float, float] | None = Field(None, description="your 80% interval for "
                                                 "the effect, [low, high]")
    author: str | None = Field(None, min_length=1, description="who forecasts (the ledger "
                               "scores each author)")
    tag: str | None = Field(None, min_length=1, description="a topic to score forecasts by, "
                            "e.g. optimizers")

    @model_validator(mode="after")
    def _coherent(self) -> Prediction:
        given = [p for p in (self.refuted, self.inconclusive) if p is not None]
        total = self.supported + sum(given)
        if len(given) == 2 and abs(total - 1) > 1e-6:
            raise ValueError(f"supported + refuted + inconclusive = {total:g}; the three "
                             "outcomes are exhaustive, so they must sum to 1")
        if total > 1 + 1e-9:
            raise ValueError(f"the probabilities sum to {total:g}, over 1; lower them")
        if self.interval is not None:
            low, high = self.interval
            if not low < high:
                raise ValueError(f"interval {list(self.interval)} must be [low, high] with "
                                 "low < high, e.g. [0.0, 0.04]")
            if self.effect is not None and not low <= self.effect <= high:
                raise ValueError(f"effect {self.effect:g} lies outside its interval "
                                 f"{list(self.interval)}; the guess sits inside its interval")
        return self


class Hypothesis(_Strict):
    """What the experiment should show, stated before it runs."""

    claim: str = Field(min_length=1, description="the claim in one sentence")
    metric: str = Field(min_length=1, description="primary metric name")
    source: Literal["items", "scalar"] = Field(
        "scalar",
        description="items: per-item eval results (run.log_items) macro-averaged over tasks; "
        "scalar: the last value logged with run.log under `metric`",
    )
    direction: Literal["increase", "decrease"] = Field(
        description="which way the variant should move the metric relative to control"
    )
    alpha: float = Field(0.05, gt=0, lt=1, description="significance level of the verdict")
    smallest_effect: float | None = Field(
        None,
        gt=0,
        description="smallest effect worth detecting, in the metric's units (e.g. 0.02); "
        "lets the report tell 'no effect' from 'not enough data'",
    )
    compare: list[str] | None = Field(
        None,
        description="the arms (or factors) this hypothesis is about; default: every variant",
    )
    sd: float | None = Field(
        None, gt=0, description="your guess of the per-seed SD of the metric, for power"
    )
    bounds: tuple[float, float] | None = Field(
        None, description="the metric's range, e.g. [0, 1] for accuracy: intervals stay "
        "inside it (item scores all in [0, 1] are taken as bounded there)"
    )
    id: str | None = Field(None, pattern=NAME, description="a short name, e.g. H1 (default)")
    predict: Prediction | None = Field(
        None, description="what you expect, frozen before the first trial and scored by "
        "`labcoat ledger`"
    )

    @field_validator("bounds")
    @classmethod
    def _ordered(cls, bounds: tuple[float, float] | None) -> tuple[float, float] | None:
        if bounds is not None and not bounds[0] < bounds[1]:
            raise ValueError(f"bounds {list(bounds)} must be [low, high] with low < high, "
                             "e.g. [0, 1]")
        return bounds


class Arm(_Strict):
    """A named set of parameter overrides; exactly one arm is the control."""

    control: bool = False
    params: dict[str, Scalar] = Field(default_factory=dict)


class Factor(_Strict):
    """An intervention with levels; the first level is the baseline."""

    param: str | None = Field(None, description="the param it sets (default: the factor's name)")
    levels: list[Scalar] | dict[str, Scalar] = Field(
        min_length=2, description="at least two levels, baseline first: a list or {name: value}"
    )

    def named_levels(self) -> dict[str, Scalar]:
        if isinstance(self.levels, dict):
            return dict(self.levels)
        return {_level_name(v): v for v in self.levels}


class Scale(_Strict):
    """A model/data size at which every arm runs (for extrapolation)."""

    name: str = Field(pattern=NAME)
    params: dict[str, Scalar] = Field(default_factory=dict)


class EvalPlan(_Strict):
    suite: str | None = Field(None, description="eval suite name or file")
    tasks: list[str] | None = None
    items_per_task: int | None = Field(None, ge=1)
    every: int | None = Field(
        None, ge=1, description="evaluate every N steps during training (None: at the end only)"
    )
    budget: float | None = Field(
        None, ge=0, lt=1, description="fraction of training time in-training evals may take: "
        "they score a fixed stratified subset sized to fit (0: every item every time); the "
        "command gets it as {eval_budget} (None: 0.05)")


class TrainingData(_Strict):
    """The training text, so `labcoat lint` can look for eval items in it."""

    train: list[str] = Field(
        min_length=1, description="training text files or directories (plain text, or JSON "
        "lines with a text field; .gz too), relative to the design file")
    eval: str | None = Field(
        None, description="eval suite file or directory (.jsonl/.csv items) to check "
        "(default: eval.suite, if it is a path)")
    text_field: str = Field("text", description="JSON lines field holding the text")


class Budget(_Strict):
    max_trials: int | None = Field(None, ge=1)
    max_cpu_hours: float | None = Field(None, gt=0)
    max_gpu_hours: float | None = Field(None, gt=0)
    trial_minutes: float | None = Field(None, gt=0, description="expected minutes per trial")
    cpus_per_trial: float = Field(1.0, gt=0)
    gpus_per_trial: float = Field(0.0, ge=0)


class Restart(_Strict):
    """What the runner does when a trial crashes or hangs."""

    retries: int = Field(
        2, ge=0, description="restarts after a crash or hang before the trial counts as failed"
    )
    backoff: float = Field(
        1.0, ge=0, description="seconds before the first restart; doubles each time, at most 60"
    )
    heartbeat_timeout: float | None = Field(
        None,
        gt=0,
        description="seconds without a journal line before a trial counts as hung "
        "(a trial can declare its own: labcoat.init(heartbeat_timeout=...))",
    )


class Shrink(_Strict):
    """What `labcoat shrink EXP/TRIAL` may make smaller to reproduce a failure (docs/shrink.md):
    each param is halved toward its floor while the failure persists, then ddmin switches
    features off."""

    params: dict[str, float] = Field(
        min_length=1, description="params the command uses that may shrink, each with its "
        "floor, e.g. {steps: 32, width: 8, depth: 1}: halved toward the floor, in this order")
    features: list[str] | dict[str, Scalar] = Field(
        default_factory=dict, description="params delta debugging may switch off: a list of "
        "boolean params (off: false), or {param: its off value}, e.g. {dropout: 0.0}")
    budget: float = Field(
        2.0, gt=1, description="a candidate may run this many times the original's time to "
        "failure; stopped past it, it counts as passing")
    step_tolerance: float = Field(
        0.35, ge=0, le=1, description="a candidate's failure counts as the same when its "
        "relative step (failing step / steps) is within this of the original's")
    max_candidates: int = Field(40, ge=1, description="at most this many candidate trials")

    def off_values(self) -> dict[str, Scalar]:
        """feature -> the value that switches it off."""
        if isinstance(self.features, dict):
            return dict(self.features)
        return {name: False for name in self.features}


MEMORY = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]i?B)\s*$", re.IGNORECASE)
MEMORY_UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
                "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


class Resources(_Strict):
    """What one trial needs from the machine that runs it: the `ray` executor asks
    for it per trial (num_cpus, num_gpus, memory), the `slurm` executor per job
    (cpus_per_task, gpus, mem, time). The local executor runs trials on this
    machine and uses only `cpus` (threads per trial)."""

    cpus: float = Field(1.0, gt=0, description="CPU cores per trial (slurm rounds up)")
    gpus: float = Field(0.0, ge=0, description="GPUs per trial (ray: fractions share a GPU; "
                        "slurm: a whole number)")
    memory: str | None = Field(None, description="memory per trial with a unit, e.g. 4GB, "
                               "512MB, 2GiB (ray: a scheduling reservation; slurm: --mem)")
    time_minutes: float | None = Field(
        None, gt=0, description="slurm: the job's time limit; past it Slurm ends the job and "
        "labcoat restarts the trial from its last checkpoint (default: 24 hours)")

    @field_validator("memory", mode="before")
    @classmethod
    def _memory_has_unit(cls, value: object) -> object:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError("memory is a size with a unit, e.g. 4GB or 512MB")
        if memory_bytes(str(value)) is None:
            raise ValueError(f"memory {value!r} needs a number and a unit, e.g. 4GB, 512MB or "
                             "2GiB")
        return str(value)

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory is None else memory_bytes(self.memory)


def memory_bytes(text: str) -> int | None:
    """'4GB' -> 4_000_000_000, '2GiB' -> 2_147_483_648; None if `text` is not a size."""
    match = MEMORY.match(text)
    if match is None:
        return None
    return int(float(match["number"]) * MEMORY_UNITS[match["unit"].upper()])


class Design(_Strict):
    """One experiment: hypotheses, a command template, arms or factors, seeds."""

    name: str = Field(
        pattern=NAME,
        max_length=100,
        description="the experiment's name: letters, digits, '.', '_', '-'",
    )
    description: str = ""
    hypothesis: Hypothesis | None = Field(None, description="claim, metric, direction")
    hypotheses: list[Hypothesis] = Field(default_factory=list)
    secondary_metrics: list[str] = Field(default_factory=list)
    correction: Literal["holm", "bh", "bonferroni", "none"] = Field(
        "holm", description="how a family of comparisons is corrected"
    )
    seed_analysis: Literal["welch", "paired"] = Field(
        "welch", description="compare arms by Welch's test, or paired by seed (shared seeds)"
    )
    command: str = Field(min_length=1, description="program to run, with {param} placeholders")
    params: dict[str, Scalar] = Field(default_factory=dict)
    arms: dict[str, Arm] | None = Field(
        None, description="named arms, one with `control: true` (or use factors)"
    )
    factors: dict[str, Factor] | None = Field(
        None, description="interventions with levels, crossed in a factorial design"
    )
    fraction: list[str] = Field(
        default_factory=list,
        description="generators of a two-level fractional factorial, e.g. 'wd = warmup*lr'",
    )
    interactions: list[list[str]] = Field(default_factory=list)
    seeds: list[int] = Field(
        min_length=1, description="a count (3 means seeds 0, 1, 2) or a list of integer seeds"
    )
    seed_streams: list[Literal["init", "data", "dropout"]] = Field(
        default_factory=lambda: list(STREAMS),
        description="the random streams the trial's seed controls (init, data, dropout)",
    )
    paired_seeds: bool = Field(
        True, description="arms run the same seed values (common random numbers)"
    )
    scales: list[Scale] = Field(default_factory=list)
    eval: EvalPlan | None = None
    data: TrainingData | None = Field(
        None, description="training text; `labcoat lint` checks the eval suite against it")
    budget: Budget | None = None
    parallelism: int | None = Field(None, ge=1, description="trials at a time (default: CPUs)")
    restart: Restart = Field(default_factory=Restart, description="retries, backoff, heartbeat")
    resources: Resources | None = Field(
        None, description="per-trial cpus, gpus, memory (and slurm time) for the ray and slurm "
        "executors")
    # Experiment-wide: arms compared at different world sizes would confound the arm with
    # the parallelism. With N > 1 each trial is one torchrun group that fails and restarts
    # as a whole (see labcoat.runner._ranks).
    ranks: int | None = Field(
        None, ge=1, le=MAX_RANKS,
        description=f"processes per trial, 1 to {MAX_RANKS} (data-parallel ranks launched "
        "through torchrun, gloo on CPU)",
    )
    reference: str | None = Field(
        None, min_length=1, description="an earlier experiment whose finished trials are the "
        "reference band for early warning (default: this design's other seeds of the arm)")
    shrink: Shrink | None = Field(
        None, description="params `labcoat shrink` may halve (each with a floor) and features "
        "it may switch off, to find a failure's smallest reproduction")

    @field_validator("seeds", mode="before")
    @classmethod
    def _count_to_list(cls, value: object) -> object:
        # `seeds: 3` means seeds 0, 1, 2.
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 1:
                raise ValueError("seeds must be at least 1 (a count) or a list of integers")
            return list(range(value))
        return value

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError(f"seeds {value} repeat a seed; list each seed once")
        return value

    @property
    def all_hypotheses(self) -> list[Hypothesis]:
        """`hypothesis` and `hypotheses` together, each with an id (H1, H2, ...)."""
        found = ([self.hypothesis] if self.hypothesis else []) + list(self.hypotheses)
        return [h if h.id else h.model_copy(update={"id": f"H{i}"})
                for i, h in enumerate(found, start=1)]

    @property
    def paired_analysis(self) -> bool:
        """The report pairs arms by seed: `seed_analysis: paired` on a design with arms (a
        factorial design's effects are OLS contrasts over every run, never paired). Review,
        planning, analysis and registration all read this."""
        return self.seed_analysis == "paired" and self.factors is None

    @property
    def control(self) -> str | None:
        """The control arm's name (for factors: the all-baseline run), if there is one."""
        if self.arms is not None:
            return next((name for name, arm in self.arms.items() if arm.control), None)
        if self.factors is not None:
            return baseline_arm(self)
        return None


def _level_name(value: Scalar) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return "".join(c if c.isalnum() or c in "._" else "_" for c in text)


def factor_arm_name(levels: dict[str, str]) -> str:
    """The arm name of a factorial run, e.g. warmup-on_lr-high."""
    return "_".join(f"{factor}-{level}" for factor, level in levels.items())


def baseline_arm(design: Design) -> str:
    factors = design.factors or {}
    return factor_arm_name({f: next(iter(factor.named_levels())) for f, factor in factors.items()})
