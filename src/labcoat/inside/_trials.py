"""`labcoat inside EXP --control C --variant V`: the store side.

C and V each name a trial (its key) or an arm (its finished trials, paired with the
other arm's by seed). Each trial's model is rebuilt by its workload (`_workload`) from
its params and command, with the weights of its newest verified checkpoint; then
`compare` patches between them and, with a label, `probe_arms` probes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session
from torch import nn

from labcoat import store
from labcoat.errors import LabcoatError
from labcoat.inside._compare import Comparison, PatchingConfig, compare
from labcoat.inside._components import find_components
from labcoat.inside._probes import ProbeComparison, ProbeConfig, probe_arms
from labcoat.inside._workload import Workload, load_weights, workload_for
from labcoat.store import Experiment, Trial
from labcoat.torch import CheckpointError, load_checkpoint


@dataclass
class LoadedTrial:
    key: str
    arm: str
    seed: int | None
    step: int  # the checkpoint's step
    checkpoint: str
    model: nn.Module


@dataclass
class InsideResult:
    """Patching (and probes, if asked) between the control's and the variant's trials."""

    experiment: str
    pairs: list[tuple[LoadedTrial, LoadedTrial]]
    items: list[str]
    patching: Comparison
    probes: ProbeComparison | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The `labcoat inside --json` shape."""
        return {
            "experiment": self.experiment,
            "pairs": [{"control": _trial_dict(c), "variant": _trial_dict(v)}
                      for c, v in self.pairs],
            "items": len(self.items),
            "patching": self.patching.as_dict(),
            "probes": self.probes.as_dict() if self.probes else None,
            "notes": self.notes + self.patching.notes,
        }


def compare_trials(session: Session, experiment: str, control: str, variant: str, *,
                   config: PatchingConfig | None = None, probe: str | None = None,
                   probe_config: ProbeConfig | None = None, workload: str | None = None,
                   batch_size: int = 256) -> InsideResult:
    """Patch (and probe for label `probe`) between the control's and the variant's models.

    control, variant: a trial key or an arm name of `experiment` (see the module doc).
    workload: ``MODULE:NAME`` of a `Workload`; None: found from the trials' command.
    """
    exp = store.find_experiment(session, experiment)
    pairs_of_trials = _pairs(exp, control, variant)
    first = pairs_of_trials[0][0]
    work = workload_for(first.command, workload, trial=f"trial {first.key}")
    config_of = {t.key: work.configure(t.params or {}, t.command)
                 for pair in pairs_of_trials for t in pair}
    labels: dict[str, list[str]] = {}
    if probe is not None:  # before any model work: a typo should not cost a patching run
        labels = work.item_labels(config_of[first.key])
        if probe not in labels:
            raise LabcoatError(f"unknown probe label {probe!r}; the workload offers "
                               f"{', '.join(labels) or 'none'}")
    ids, batches = work.eval_items(config_of[first.key], batch_size)
    for pair in pairs_of_trials:
        for t in pair:
            other_ids, _ = work.eval_items(config_of[t.key], batch_size)
            if other_ids != ids:
                raise LabcoatError(f"trials {first.key} and {t.key} evaluate different items; "
                                   "inside compares models on the same eval items")
    loaded = [(_load(session, work, c, config_of[c.key]), _load(session, work, v,
                                                                 config_of[v.key]))
              for c, v in pairs_of_trials]
    models = [(c.model, v.model) for c, v in loaded]
    patching = compare(models, batches, work.metric, config,
                       metric_name=getattr(work, "metric_name", "metric"))
    probes = None
    if probe is not None:
        blocks = [c.name for c in find_components(models[0][0]) if c.kind == "update"]
        if not blocks:
            raise LabcoatError("probes read each block's output; the model has no "
                               "nn.ModuleList of blocks labcoat can find")
        probes = probe_arms(models, batches, work.metric, labels[probe],
                            work.item_types(config_of[first.key]), blocks, work.positions,
                            probe_config, label=probe)
    return InsideResult(experiment=exp.name, pairs=loaded, items=ids, patching=patching,
                        probes=probes)


def _pairs(exp: Experiment, control: str, variant: str) -> list[tuple[Trial, Trial]]:
    cs, vs = _trials(exp, control, "--control"), _trials(exp, variant, "--variant")
    if len(cs) == 1 and len(vs) == 1:
        return [(cs[0], vs[0])]
    if len(cs) == 1 or len(vs) == 1:
        raise LabcoatError("give two trials or two arms: one trial against a whole arm has "
                           "no pairing by seed")
    by_seed = {t.seed: t for t in vs}
    pairs = [(c, by_seed[c.seed]) for c in cs if c.seed in by_seed]
    if not pairs:
        raise LabcoatError(f"arms {control!r} and {variant!r} share no seed among their "
                           "finished trials; name two trials instead")
    return pairs


def _trials(exp: Experiment, ref: str, flag: str) -> list[Trial]:
    for trial in exp.trials:
        if trial.key == ref:
            return [trial]
    arm = sorted((t for t in exp.trials if t.arm == ref and t.status == "done"),
                 key=lambda t: (t.seed is None, t.seed or 0))
    if arm:
        return arm
    keys = [t.key for t in exp.trials]
    arms = sorted({t.arm for t in exp.trials})
    listed = ", ".join(keys[:12]) + (f", ... ({len(keys)} in all)" if len(keys) > 12 else "")
    raise LabcoatError(f"{flag} {ref!r} is neither a trial nor an arm with finished trials "
                       f"of experiment {exp.name!r} (trials: {listed or 'none'}; arms: "
                       f"{', '.join(arms) or 'none'}); see `labcoat show {exp.name}`")


def _load(session: Session, work: Workload, trial: Trial, config: Any) -> LoadedTrial:
    kept = [c for c in store.verified_checkpoints(session, trial) if Path(c.path).exists()]
    if not kept:
        raise LabcoatError(
            f"trial {trial.key} has no verified checkpoint on disk, so its model cannot be "
            "rebuilt; run it with a Checkpointer (labcoat.torch.Checkpointer; tinylm "
            "saves one under labcoat run, or with --checkpoint-dir)")
    reasons = []
    for ckpt in reversed(kept):
        try:
            state = load_checkpoint(ckpt.path)
        except CheckpointError as err:
            reasons.append(str(err))
            continue
        model = work.build_model(config)
        load_weights(model, state["tracked"].get("model"), trial=f"trial {trial.key}",
                     path=ckpt.path)
        return LoadedTrial(trial.key, trial.arm, trial.seed, int(state["step"]), ckpt.path,
                           model)
    raise LabcoatError(f"trial {trial.key}: no checkpoint verifies ({'; '.join(reasons)})")


def _trial_dict(t: LoadedTrial) -> dict[str, Any]:
    return {"trial": t.key, "arm": t.arm, "seed": t.seed, "step": t.step,
            "checkpoint": t.checkpoint}

