"""Candidates as real trials: each one an arm of the experiment ``<EXP>-shrink`` in the same
store, run by `labcoat.runner.run_design` with a time limit, then judged from the store.

The shrink experiment's design is the original's with its arms replaced by the candidates
(the original settings first, as the control), its one seed, no retries and one trial at a
time; it is rewritten before each candidate. Arm names hash the settings, so running shrink
again reuses every candidate that already finished instead of running it twice.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from labcoat import environment as env
from labcoat import runner, spec, store
from labcoat.errors import Interrupted
from labcoat.shrink._search import Exhausted, Outcome, Params
from labcoat.shrink._signature import Failure, Signature, failure_of

# Metrics a trial may log its parameter count under (the first found is used).
PARAM_COUNT_METRICS = ("params", "parameters", "num_params", "n_params", "param_count")


@dataclass
class Candidate:
    """One candidate trial and how it ended.

    outcome: "fails" (the same signature: a reproduction), "passes" (no failure, or stopped
    at the time budget), "slip" (failed another way: never accepted).
    """

    number: int
    trial: str  # key in the shrink experiment
    change: str  # what differs from the one it was derived from
    params: Params
    outcome: Outcome
    signature: Signature | None
    time_to_failure: float | None
    wall: float | None
    stopped: bool  # stopped at its time budget
    reused: bool  # finished in an earlier shrink; not run again
    parameters: float | None = None  # parameter count, if the trial logs one

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["signature"] = None if self.signature is None else self.signature.as_dict()
        return out


def base_design(design: spec.Design, name: str, params: Params, seed: int | None) -> dict:
    """The original design as a mapping, ready to take candidate arms: one seed, no retries,
    one trial at a time, nothing that names the original's arms or factors."""
    data = design.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    for key in ("arms", "factors", "fraction", "interactions", "scales", "budget",
                "reference", "parallelism", "description"):
        data.pop(key, None)
    for h in [data.get("hypothesis"), *data.get("hypotheses", [])]:
        if h:
            h.pop("compare", None)
            h.pop("predict", None)
    data["name"] = name
    data["params"] = {**design.params, **params}
    if "shrink" in data:  # floors of integer params as written (the block holds floats)
        floors = data["shrink"].get("params", {})
        data["shrink"]["params"] = {
            k: int(v) if isinstance(design.params.get(k), int) and float(v).is_integer()
            else v for k, v in floors.items()}
    data["seeds"] = [0 if seed is None else seed]
    data["restart"] = {"retries": 0}
    data["parallelism"] = 1
    return data


def arm_name(params: Params) -> str:
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()
    return f"c{digest[:10]}"


class Candidates:
    """Runs candidates of one shrink and remembers them in order.

    reference: the original failure's signature; tolerance: the relative-step slack of
    `Signature.same`; time_limit: seconds a candidate may run; limit: most candidates.
    """

    def __init__(self, *, original: spec.Design, experiment: str, params: Params,
                 seed: int | None, reference: Signature, tolerance: float,
                 time_limit: float, limit: int, workdir: Path) -> None:
        self.name = f"{experiment}-shrink"
        self.base = base_design(original, self.name, params, seed)
        self.seed = self.base["seeds"][0]
        self.reference = reference
        self.tolerance = tolerance
        self.time_limit = time_limit
        self.limit = limit
        self.path = workdir / "design.yaml"
        self.arms: dict[str, Params] = {}
        self.run: list[Candidate] = []
        self.stop_reason: str | None = None
        self.interrupted = False  # Ctrl-C came between candidates
        self.on_start: Any = None  # called with (number, change) before a candidate runs
        self.on_done: Any = None  # called with the Candidate after it ran

    def key(self, params: Params) -> str:
        return f"{arm_name(params)}-s{self.seed}"

    def judge(self, params: Params, change: str) -> Outcome:
        """Run one candidate (or reuse its finished trial); Exhausted when out of budget or
        stopped by Ctrl-C."""
        try:
            return self._judge(params, change)
        except (Interrupted, KeyboardInterrupt):
            self.stop_reason = "stopped by Ctrl-C"
            raise Exhausted(self.stop_reason) from None

    def _judge(self, params: Params, change: str) -> Outcome:
        if self.interrupted:
            raise KeyboardInterrupt
        if len(self.run) >= self.limit:
            self.stop_reason = f"the budget of {self.limit} candidates is spent"
            raise Exhausted(self.stop_reason)
        arm = arm_name(params)
        first = not self.arms
        self.arms[arm] = params
        if first:  # a design needs two arms: register the original's double as a placeholder
            self.arms.setdefault(f"{arm}-again", params)
        self._write()
        if self.on_start is not None:
            self.on_start(len(self.run), change)
        reused = self._finished(self.key(params))
        if not reused:  # the runner's own display stays quiet: shrink shows its progress
            runner.run_design(self.path, only=[self.key(params)], time_limit=self.time_limit,
                              console=Console(file=io.StringIO()), plain=True,
                              parallelism=1, allow_large=True)
        candidate = self._judged(len(self.run), change, params, reused)
        self.run.append(candidate)
        if self.on_done is not None:
            try:
                self.on_done(candidate)
            except KeyboardInterrupt:  # this candidate counts; the next one stops the search
                self.interrupted = True
        return candidate.outcome

    def _write(self) -> None:
        arms = {name: {"params": p, **({"control": True} if i == 0 else {})}
                for i, (name, p) in enumerate(self.arms.items())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump({**self.base, "arms": arms}, sort_keys=False)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("# written by `labcoat shrink`: one arm per candidate\n" + text,
                       encoding="utf-8")
        tmp.replace(self.path)

    def _finished(self, key: str) -> bool:
        with _session() as session:
            trial = self._trial(session, key)
            return trial is not None and trial.status in ("done", "failed")

    def _trial(self, session: Any, key: str) -> Any:
        experiment = next((e for e in store.list_experiments(session) if e.name == self.name),
                          None)
        return next((t for t in experiment.trials if t.key == key), None) if experiment else None

    def _judged(self, number: int, change: str, params: Params, reused: bool) -> Candidate:
        with _session() as session:
            trial = store.find_trial(store.find_experiment(session, self.name), self.key(params))
            failure = failure_of(session, trial)
            parameters = parameter_count(session, trial.id)
        return Candidate(number=number, trial=trial.key, change=change, params=params,
                         outcome=self.outcome(failure), signature=failure.signature,
                         time_to_failure=failure.time_to_failure, wall=failure.wall,
                         stopped=failure.stopped, reused=reused, parameters=parameters)

    def outcome(self, failure: Failure) -> Outcome:
        if failure.signature is None:
            return "passes"  # finished clean, or stopped at the time budget before failing
        return "fails" if failure.signature.same(self.reference, self.tolerance) else "slip"


def parameter_count(session: Any, trial_id: int) -> float | None:
    for name in PARAM_COUNT_METRICS:
        values = store.last_values(session, [trial_id], name)
        if trial_id in values:
            return values[trial_id]
    return None


class _session:
    """A short store session: the runner holds its own while a candidate runs."""

    def __enter__(self) -> Any:
        self.db = store.open_store()
        self.cm = self.db.session()
        return self.cm.__enter__()

    def __exit__(self, *exc: object) -> None:
        try:
            self.cm.__exit__(*exc)
        finally:
            self.db.close()


def shrink_dir(experiment: str, trial: str) -> Path:
    """Where a shrink of EXP/TRIAL keeps its candidates' design."""
    return env.home() / "shrink" / experiment / trial
