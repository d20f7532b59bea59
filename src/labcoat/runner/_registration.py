"""Pre-registration: an experiment's hypotheses, metrics and analysis plan freeze at its
first `labcoat run`, so results cannot be quietly shopped for.

Later runs may add trials (more seeds, a new arm) — the report flags those added
after results were seen — but a changed plan is refused unless the user amends it
with a reason (`labcoat run --amend "why"`), which the report shows. Trials that
already exist keep their parameters: changing them would mix two experiments.

Predictions (`predict:` under a hypothesis) freeze with the plan, under their own key
so that a plan frozen before they existed keeps its hash. Until the first trial starts
they may change freely (re-frozen, with the time); afterwards a change needs `--amend`
and is kept as an edit (`prediction_edits`) that every report shows, while
`original_predictions` keeps what was stated before any trial ran: the ledger scores that.
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
             "sequential", "predictions")


def analysis_plan(design: Design) -> dict[str, Any]:
    """What is frozen: the hypotheses (claims, metrics, directions, alphas, smallest
    effects), secondary metrics, the correction of the family and the seed analysis."""
    plan: dict[str, Any] = {
        "hypotheses": [h.model_dump(mode="json", exclude={"predict"})
                       for h in design.all_hypotheses],
        "secondary_metrics": list(design.secondary_metrics),
        "correction": design.correction,
        "seed_analysis": design.seed_analysis,
        "interactions": [list(i) for i in design.interactions],
    }
    predictions = predictions_of(design)
    if predictions:  # absent otherwise: plans frozen before `predict:` keep their hash
        plan["predictions"] = predictions
    return plan


def predictions_of(design: Design) -> dict[str, dict[str, Any]]:
    """Hypothesis id -> its `predict:` (only those that declare one)."""
    return {str(h.id): h.predict.model_dump(mode="json", exclude_none=True)
            for h in design.all_hypotheses if h.predict is not None}


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
    now = store.utcnow().isoformat()
    if created or not frozen:
        experiment.analysis_plan = {"hash": digest, "plan": plan, "frozen_at": now,
                                    "amendments": [], **_original(plan, now)}
    elif frozen["hash"] != digest:
        started = any(t.status != "pending" for t in experiment.trials)
        if not started and _changed(frozen["plan"], plan) == ["predictions"]:
            # before the first trial a prediction is still a prediction: freeze it anew
            experiment.analysis_plan = {**frozen, "hash": digest, "plan": plan,
                                        **_original(plan, now)}
        else:
            experiment.analysis_plan = _amended(design.name, frozen, plan, digest, amend,
                                                started=started)
    _check_existing_trials(experiment, trials)
    if not created:
        experiment.design_yaml, experiment.design_path = text, path
        experiment.design_hash = spec.design_hash(design)
    store.add_missing_trials(session, experiment, trials)
    return experiment


def _original(plan: dict[str, Any], now: str) -> dict[str, Any]:
    """The predictions as stated before any trial ran, and when."""
    return {"original_predictions": plan.get("predictions", {}), "predictions_at": now}


def _changed(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [k for k in PLAN_KEYS if old.get(k) != new.get(k)]


def _amended(name: str, frozen: dict[str, Any], plan: dict[str, Any], digest: str,
             amend: str | None, *, started: bool = True) -> dict[str, Any]:
    changed = _changed(frozen["plan"], plan)
    if not amend or not amend.strip():
        raise LabcoatError(
            f"the analysis plan of {name!r} was frozen at its first run "
            f"({frozen['frozen_at'][:19]}, plan {frozen['hash'][:12]}); this design changes "
            f"{', '.join(changed)}. Keep the plan, or say why it changes: "
            f"labcoat run DESIGN --amend \"reason\" (the report shows every amendment)"
        )
    at = store.utcnow().isoformat()
    amendments = [*frozen.get("amendments", []), {
        "at": at, "reason": amend.strip(), "changed": changed,
        "from": frozen["hash"], "to": digest,
    }]
    before = frozen["plan"].get("predictions", {})
    after = plan.get("predictions", {})
    edits = [*frozen.get("prediction_edits", []), *(
        {"at": at, "hypothesis": h, "from": before.get(h), "to": after.get(h),
         "after_trials": started, "reason": amend.strip()}
        for h in sorted(set(before) | set(after)) if before.get(h) != after.get(h))]
    return {**frozen, "hash": digest, "plan": plan, "amendments": amendments,
            "prediction_edits": edits}


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
