"""Pre-registration: an experiment's hypotheses, metrics and analysis plan freeze at its
first `labcoat run`, so results cannot be quietly shopped for.

Later runs may add trials (more seeds, a new arm) — the report flags those added
after results were seen — but a changed plan is refused unless the user amends it
with a reason (`labcoat run --amend "why"`), which the report shows. Trials that
already exist keep their parameters: changing them would mix two experiments.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy.orm import Session

from labcoat import spec, store
from labcoat.errors import LabcoatError
from labcoat.spec import Design, TrialSpec
from labcoat.store import Experiment

PLAN_KEYS = ("hypotheses", "secondary_metrics", "correction", "seed_analysis", "interactions",
             "sequential")


def analysis_plan(design: Design) -> dict[str, Any]:
    """What is frozen: the hypotheses (claims, metrics, directions, alphas, smallest
    effects), secondary metrics, the correction of the family and the seed analysis."""
    return {
        "hypotheses": [h.model_dump(mode="json") for h in design.all_hypotheses],
        "secondary_metrics": list(design.secondary_metrics),
        "correction": design.correction,
        "seed_analysis": design.seed_analysis,
        "interactions": [list(i) for i in design.interactions],
    }


def plan_hash(plan: dict[str, Any]) -> str:
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def register(session: Session, design: Design, *, text: str, path: str,
             trials: list[TrialSpec], amend: str | None = None,
             sequential: dict[str, Any] | None = None) -> Experiment:
    """The experiment for `design`: created and frozen on first run, checked afterwards.

    sequential: the stopping rule of `--until-decisive`, frozen with the plan.
    """
    experiment, created = store.get_or_create_experiment(
        session, name=design.name, design_yaml=text, design_hash=spec.design_hash(design),
        design_path=path, require_same_design=False,
    )
    plan = analysis_plan(design)
    if sequential is not None:
        plan["sequential"] = sequential
    digest = plan_hash(plan)
    frozen = experiment.analysis_plan
    if created or not frozen:
        experiment.analysis_plan = {"hash": digest, "plan": plan,
                                    "frozen_at": store.utcnow().isoformat(), "amendments": []}
    elif frozen["hash"] != digest:
        experiment.analysis_plan = _amended(design.name, frozen, plan, digest, amend)
    _check_existing_trials(experiment, trials)
    if not created:
        experiment.design_yaml, experiment.design_path = text, path
        experiment.design_hash = spec.design_hash(design)
    store.add_missing_trials(session, experiment, trials)
    return experiment


def _amended(name: str, frozen: dict[str, Any], plan: dict[str, Any], digest: str,
             amend: str | None) -> dict[str, Any]:
    changed = [k for k in PLAN_KEYS if frozen["plan"].get(k) != plan.get(k)]
    if not amend or not amend.strip():
        raise LabcoatError(
            f"the analysis plan of {name!r} was frozen at its first run "
            f"({frozen['frozen_at'][:19]}, plan {frozen['hash'][:12]}); this design changes "
            f"{', '.join(changed)}. Keep the plan, or say why it changes: "
            f"labcoat run DESIGN --amend \"reason\" (the report shows every amendment)"
        )
    amendments = [*frozen.get("amendments", []), {
        "at": store.utcnow().isoformat(), "reason": amend.strip(), "changed": changed,
        "from": frozen["hash"], "to": digest,
    }]
    return {**frozen, "hash": digest, "plan": plan, "amendments": amendments}


def _check_existing_trials(experiment: Experiment, trials: list[TrialSpec]) -> None:
    """Recorded trials keep their params; unfinished ones take the new command."""
    by_key = {t.key: t for t in trials}
    changed = [t.key for t in experiment.trials
               if t.key in by_key and dict(t.params) != dict(by_key[t.key].params)]
    if changed:
        raise LabcoatError(
            f"experiment {experiment.name!r} already ran trial(s) {', '.join(changed[:5])} with "
            "other parameters; changing them would mix two experiments under one name. "
            "Give the changed design a new `name:`"
        )
    for trial in experiment.trials:
        if trial.status != "done" and trial.key in by_key:
            trial.command = list(by_key[trial.key].command)
