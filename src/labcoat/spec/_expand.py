"""Expansion of a design into trials, and the design's identity hash."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from labcoat.spec._schema import Design, Scalar


@dataclass(frozen=True, kw_only=True)
class TrialSpec:
    """One trial to run: an arm at a seed, with its resolved parameters and command."""

    key: str  # unique within the experiment, e.g. "warmup-s1"
    arm: str
    seed: int
    params: dict[str, Scalar]
    command: list[str]  # argv, no shell


def expand(design: Design, *, python: str | None = None) -> list[TrialSpec]:
    """Arms x seeds, control arm first; `python` fills {python} (default: this interpreter)."""
    arms = sorted(
        design.arms, key=lambda a: (not design.arms[a].control, list(design.arms).index(a))
    )
    trials = []
    for arm in arms:
        for seed in design.seeds:
            params = {**design.params, **design.arms[arm].params, "seed": seed}
            key = f"{arm}-s{seed}"
            values = {
                **params,
                "arm": arm,
                "trial": key,
                "experiment": design.name,
                "python": python or sys.executable,
            }
            trials.append(
                TrialSpec(
                    key=key,
                    arm=arm,
                    seed=seed,
                    params=params,
                    command=render_command(design.command, values),
                )
            )
    return trials


def render_command(template: str, values: dict[str, Any]) -> list[str]:
    """Split the template into argv first, then fill placeholders per argument.

    Splitting first means a value with spaces stays one argument and is never
    interpreted by a shell.
    """
    return [
        part.format_map({k: _text(v) for k, v in values.items()}) for part in shlex.split(template)
    ]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def design_hash(design: Design) -> str:
    """sha256 of the validated design: comments and key order do not change it."""
    canonical = json.dumps(design.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
