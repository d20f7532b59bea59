"""The design file schema: what a researcher declares about one experiment.

Walking-skeleton form::

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
    parallelism: 2               # trials at a time (default: number of CPUs)
"""

from __future__ import annotations

import shlex
import string
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Scalar = str | int | float | bool

# Placeholders the runner fills in besides the design's own params.
BUILTIN_PLACEHOLDERS = ("python", "seed", "arm", "trial", "experiment")


class LocatedError(ValueError):
    """A cross-field error that knows which key of the design file it is about."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class Arm(_Strict):
    """A named set of parameter overrides; exactly one arm is the control."""

    control: bool = False
    params: dict[str, Scalar] = Field(default_factory=dict)


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


class Design(_Strict):
    """One experiment: a hypothesis, a command template, arms and seeds."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        max_length=100,
        description="the experiment's name: letters, digits, '.', '_', '-'",
    )
    description: str = ""
    hypothesis: Hypothesis = Field(description="claim, metric, direction")
    command: str = Field(min_length=1, description="program to run, with {param} placeholders")
    params: dict[str, Scalar] = Field(default_factory=dict)
    arms: dict[str, Arm] = Field(
        min_length=2, description="at least two named arms, one with `control: true`"
    )
    seeds: list[int] = Field(
        min_length=1, description="a count (3 means seeds 0, 1, 2) or a list of integer seeds"
    )
    parallelism: int | None = Field(None, ge=1, description="trials at a time (default: CPUs)")
    restart: Restart = Field(default_factory=Restart, description="retries, backoff, heartbeat")

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

    @field_validator("arms")
    @classmethod
    def _arm_names(cls, value: dict[str, Arm]) -> dict[str, Arm]:
        for name in value:
            if not str(name) or not all(c.isalnum() or c in "._-" for c in str(name)):
                raise ValueError(f"arm name {name!r} may use only letters, digits, '.', '_', '-'")
        return value

    @model_validator(mode="after")
    def _check_references(self) -> Design:
        controls = [name for name, arm in self.arms.items() if arm.control]
        if len(controls) != 1:
            found = f"found {len(controls)} ({', '.join(controls)})" if controls else "found none"
            where = ("arms", controls[1], "control") if len(controls) > 1 else ("arms",)
            raise LocatedError(
                where,
                f"exactly one arm must be the control, {found}; "
                "mark the baseline arm with `control: true`",
            )
        for arm_name, arm in self.arms.items():
            for key in arm.params:
                if key not in self.params:
                    known = ", ".join(self.params) or "none declared"
                    raise LocatedError(
                        ("arms", arm_name, "params", key),
                        f"arm {arm_name!r} sets {key!r}, which is not in params "
                        f"(known: {known}); declare it under `params:` or fix the spelling",
                    )
        for key in self.params:
            if key in BUILTIN_PLACEHOLDERS:
                raise LocatedError(
                    ("params", key),
                    f"param {key!r} is reserved (labcoat fills it in: "
                    f"{', '.join(BUILTIN_PLACEHOLDERS)}); rename it",
                )
        known = set(self.params) | set(BUILTIN_PLACEHOLDERS)
        try:
            shlex.split(self.command)
            fields = placeholders(self.command)
        except ValueError as e:
            raise LocatedError(("command",), str(e)) from None
        for field in fields:
            if field not in known:
                raise LocatedError(
                    ("command",),
                    f"command uses {{{field}}}, which is not a param; add `{field}` under "
                    f"`params:` or use one of {', '.join(sorted(known))}",
                )
        return self

    @property
    def control(self) -> str:
        return next(name for name, arm in self.arms.items() if arm.control)


def placeholders(template: str) -> list[str]:
    """The {names} a command template uses; positional `{}` is rejected."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as e:
        raise ValueError(
            f"command template is malformed ({e}); write literal braces as {{{{ }}}}"
        ) from None
    for field in fields:
        if not field.isidentifier():
            raise ValueError(f"command placeholder {{{field}}} must be a parameter name")
    return fields
