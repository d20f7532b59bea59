"""`shrink_trial`: from a failed (or alerted) trial to its smallest reproduction.

1. The failure's signature is read from the store (`failure_of`); a trial that neither
   failed nor alerted, or whose design has no `shrink:` block, is refused.
2. The original settings run again (candidate 0): a failure that does not reproduce at the
   original size is reported as such and not shrunk.
3. `Search` halves the `shrink:` params toward their floors, runs ddmin over the features,
   and checks that every one-step-smaller neighbour of its answer passes (or slips).
Every candidate is a real trial (see `_trials`) with a time budget of `shrink.budget` times
the original's time to failure. Ctrl-C, or the candidate budget, ends the search with what
it found so far.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from labcoat import spec, store
from labcoat.errors import LabcoatError
from labcoat.shrink._search import Exhausted, Params, Search
from labcoat.shrink._signature import Signature, failure_of
from labcoat.shrink._trials import (
    Candidate,
    Candidates,
    base_design,
    parameter_count,
    shrink_dir,
)


class ShrinkError(LabcoatError):
    """A trial shrink cannot work on (did not fail, no `shrink:` block, ...)."""


@dataclass
class Cost:
    """One cost of the original and of the minimal reproduction; ratio = original / minimal."""

    original: float | None
    minimal: float | None

    @property
    def ratio(self) -> float | None:
        if not self.original or not self.minimal:
            return None
        return self.original / self.minimal

    def as_dict(self) -> dict[str, Any]:
        return {"original": self.original, "minimal": self.minimal, "ratio": self.ratio}


@dataclass
class ShrinkResult:
    """What `labcoat shrink` found.

    reproduced: the original settings failed again with the same signature (if not, nothing
    was shrunk). original, minimal: the shrink params and features, before and after.
    one_minimal: every one-step-smaller neighbour of `minimal` was run and none fails the
    same way; neighbours: (change, outcome) of each. stopped: why the search ended early.
    time_to_failure: seconds from the trial's start to the failure; wall: from launch; both
    of the original settings as candidate 0 ran them (the recorded trial if it did not fail).
    """

    trial: str
    experiment: str  # the shrink experiment holding the candidates
    signature: Signature
    reproduced: bool
    original: Params
    minimal: Params
    candidates: list[Candidate]
    time_to_failure: Cost
    wall: Cost
    parameters: Cost | None
    one_minimal: bool
    neighbours: list[tuple[str, str]] = field(default_factory=list)
    untried: list[str] = field(default_factory=list)
    stopped: str | None = None
    design_path: str | None = None
    command: str | None = None

    @property
    def slips(self) -> list[Candidate]:
        return [c for c in self.candidates if c.outcome == "slip"]

    def minimality(self) -> str:
        """The 1-minimality statement, in words."""
        if not self.reproduced and self.stopped:
            return f"not shrunk: {self.stopped} before the original settings ran again"
        if not self.reproduced:
            return "not shrunk: the failure did not reproduce at the original size"
        if self.one_minimal:
            if not self.neighbours:
                return "1-minimal: every shrink param is at its floor and every feature is off"
            passed = sum(o == "passes" for _, o in self.neighbours)
            return (f"1-minimal: each of its {len(self.neighbours)} one-step-smaller "
                    f"neighbours ({', '.join(c for c, _ in self.neighbours)}) does not fail "
                    f"this way ({passed} pass, {len(self.neighbours) - passed} slip)")
        why = f" ({self.stopped})" if self.stopped else ""
        return (f"not shown 1-minimal{why}: neighbours never run: "
                f"{', '.join(self.untried) or 'none'}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "trial": self.trial, "experiment": self.experiment,
            "signature": self.signature.as_dict(), "reproduced": self.reproduced,
            "original": self.original, "minimal": self.minimal,
            "time_to_failure": self.time_to_failure.as_dict(), "wall": self.wall.as_dict(),
            "parameters": None if self.parameters is None else self.parameters.as_dict(),
            "candidates": [c.as_dict() for c in self.candidates],
            "slips": len(self.slips), "one_minimal": self.one_minimal,
            "minimality": self.minimality(),
            "neighbours": [{"change": c, "outcome": o} for c, o in self.neighbours],
            "stopped": self.stopped, "design": self.design_path, "command": self.command,
        }


def shrink_trial(ref: str, *, out: str | Path | None = None,
                 on_start: Callable[[int, str], None] | None = None,
                 on_done: Callable[[Candidate], None] | None = None) -> ShrinkResult:
    """Shrink the failure of trial `ref` (``EXP/TRIAL``); see the module doc.

    out: where to write the minimal reproduction's design (default:
    ``EXP-TRIAL-min.yaml`` in the current directory). on_start(number, change) and
    on_done(candidate) report progress.
    """
    name, key = _split(ref)
    db = store.open_store()
    try:
        with db.session() as session:
            experiment = store.find_experiment(session, name)
            trial = store.find_trial(experiment, key)
            design = spec.parse_design(experiment.design_yaml, f"design of {name}")
            block = _block(design, name)
            if trial.status in ("pending", "running") or not trial.attempts:
                raise ShrinkError(f"trial {ref} is {trial.status}: shrink works on a trial that "
                                  "failed or alerted; wait for it to end")
            failure = failure_of(session, trial)
            if failure.signature is None:
                raise ShrinkError(f"trial {ref} did not fail ({trial.status}, no guard alert): "
                                  "nothing to shrink; pick a failed trial (`labcoat status "
                                  f"{name}`)")
            params = {k: v for k, v in trial.params.items() if k != "seed"}
            seed = trial.seed
            original_parameters = parameter_count(session, trial.id)
    finally:
        db.close()
    _check_params(block, params, ref)
    reference = failure.signature
    time_limit = block.budget * max(failure.wall or 0.0, 1.0)
    workdir = shrink_dir(name, key)
    candidates = Candidates(original=design, experiment=name, params=params, seed=seed,
                            reference=reference, tolerance=block.step_tolerance,
                            time_limit=time_limit, limit=block.max_candidates, workdir=workdir)
    candidates.on_start, candidates.on_done = on_start, on_done
    search = Search(judge=candidates.judge, params=params, floors=block.params,
                    off=block.off_values())
    reproduced = False
    try:
        reproduced = search.fails(params, "the original settings")
    except Exhausted:
        pass
    if reproduced:
        try:
            search.run()
        except KeyboardInterrupt:  # between candidates (a candidate's own is Exhausted)
            candidates.stop_reason = "stopped by Ctrl-C"
    best = search.best if reproduced else params
    minimal = next((c for c in reversed(candidates.run)
                    if c.outcome == "fails" and c.params == best), None)
    # Costs compare the original settings run again now (candidate 0) with the minimal one,
    # under the same machine load; the recorded trial stands in if that rerun did not fail.
    again = candidates.run[0] if candidates.run and candidates.run[0].outcome == "fails" \
        else None
    shown = [*block.params, *block.off_values()]
    result = ShrinkResult(
        trial=ref, experiment=candidates.name, signature=reference, reproduced=reproduced,
        original={k: params[k] for k in shown}, minimal={k: best[k] for k in shown},
        candidates=candidates.run,
        time_to_failure=Cost(again.time_to_failure if again else failure.time_to_failure,
                             minimal.time_to_failure if minimal else None),
        wall=Cost(again.wall if again else failure.wall, minimal.wall if minimal else None),
        parameters=Cost(original_parameters, minimal.parameters) if (
            original_parameters is not None and minimal is not None) else None,
        one_minimal=reproduced and search.complete,
        neighbours=list(search.neighbours) if search.complete else [],
        untried=search.untried_neighbours() if reproduced and not search.complete else [],
        stopped=candidates.stop_reason)
    if reproduced and minimal is not None:
        path = Path(out) if out is not None else Path(f"{name}-{key}-min.yaml")
        result.design_path = str(write_minimal_design(path, design, experiment_name=name,
                                                      params=params, minimal=best, seed=seed))
        result.command = _command(candidates.name, minimal.trial)
    return result


def write_minimal_design(path: Path, design: spec.Design, *, experiment_name: str,
                         params: Params, minimal: Params, seed: int | None) -> Path:
    """The minimal reproduction as a design: its settings are the params, the control arm
    `minimal`; the arm `original` keeps the original settings beside it for comparison."""
    data = base_design(design, f"{experiment_name}-min", minimal, seed)
    data.pop("restart", None)
    data.pop("parallelism", None)
    changed = {k: v for k, v in params.items() if minimal.get(k) != v}
    data["arms"] = {"minimal": {"control": True}, "original": {"params": changed}}
    text = yaml.safe_dump(data, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# the smallest reproduction `labcoat shrink` found for "
                    f"{experiment_name}; arm `minimal` reproduces it\n" + text, encoding="utf-8")
    spec.load_design(path)  # what we wrote must load
    return path


def _command(experiment: str, key: str) -> str | None:
    db = store.open_store()
    try:
        with db.session() as session:
            trial = store.find_trial(store.find_experiment(session, experiment), key)
            return shlex.join(trial.command) if trial.command else None
    finally:
        db.close()


def _split(ref: str) -> tuple[str, str]:
    name, _, key = ref.rpartition("/")
    if not name or not key:
        raise ShrinkError(f"{ref!r} does not name a trial; use EXPERIMENT/TRIAL, e.g. "
                          "`labcoat shrink warmup-demo/warmup-s1` (trials: labcoat show EXP)")
    return name, key


def _block(design: spec.Design, name: str) -> spec.Shrink:
    if design.shrink is None:
        raise ShrinkError(
            f"the design of {name!r} has no `shrink:` block, so shrink does not know what may "
            "get smaller; add one naming params and their floors, e.g. `shrink: {params: "
            "{steps: 32, width: 8, depth: 1}}`, run the design again, then shrink its trial")
    return design.shrink


def _check_params(block: spec.Shrink, params: Params, ref: str) -> None:
    for name in [*block.params, *block.off_values()]:
        if name not in params:
            raise ShrinkError(f"trial {ref} has no param {name!r}, which its design's "
                              "`shrink:` block names")
    for name in block.params:
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ShrinkError(f"trial {ref} has {name}={value!r}, not a number to halve")


