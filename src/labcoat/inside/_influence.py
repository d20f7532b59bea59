"""Training-data attribution for the eval items whose result flipped between two arms.

For each (control, variant) trial pair (`_trials`' pairing: two trials, or two arms by
seed), the flipped items are those whose final per-item score differs between them
(store: `final_eval_items`). In each trial of the pair, every flipped item gets the
training examples with the most influence on its loss (the item's answer under the
trial's model):

- TracIn (`_tracin`) summed over the trial's verified checkpoints on disk (at most
  `checkpoints` of them, evenly spread), each weighed by its learning rate;
- EK-FAC (`_ekfac`, Kronfluence) at the newest checkpoint, if asked and the model
  has Linear or Conv2d layers.

Self-influence flags the training examples the model kept failing to fit, the likeliest
mislabeled or duplicated ones. Training examples come back by index through the
workload's `TrainingData`; scoring all of them costs one per-example gradient each per
checkpoint, so a seeded sample of `pool` indices is scored (0: all) and the result says
how many.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sqlalchemy.orm import Session

from labcoat import store
from labcoat.errors import LabcoatError
from labcoat.inside._ekfac import ekfac
from labcoat.inside._tracin import CheckpointWeights, chunks, tracin_and_self_influence
from labcoat.inside._training_data import TrainingData, model_state, training_data_for
from labcoat.inside._trials import _pairs
from labcoat.inside._workload import Workload, workload_for
from labcoat.store import Trial
from labcoat.torch import CheckpointError, load_checkpoint

FORMAT_VERSION = 1
METHODS = ("tracin", "ekfac")


@dataclass(kw_only=True)
class InfluenceConfig:
    """How `attribute_flips` attributes.

    methods: "tracin" (torch only) and/or "ekfac" (needs the ``inside`` extra).
    pool: training examples scored, a seeded sample of every index training consumed
        (0: all of them; each costs a per-example gradient per checkpoint).
    top: training examples listed per flipped item and method (the most positive:
        proponents, and the most negative: opponents).
    flagged: training examples listed by self-influence, highest first, per trial.
    max_items: flipped items explained per trial pair, at most (in item id order).
    checkpoints: TracIn sums over at most this many of a trial's checkpoints.
    chunk: training examples per gradient batch (memory: chunk x parameters floats).
    seed: the pool's sample.
    """

    methods: Sequence[str] = ("tracin",)
    pool: int = 1000
    top: int = 5
    flagged: int = 10
    max_items: int = 20
    checkpoints: int = 4
    chunk: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        self.methods = tuple(self.methods)
        problems = [f"{name}={getattr(self, name)} must be >= 1"
                    for name in ("top", "flagged", "max_items", "checkpoints", "chunk")
                    if getattr(self, name) < 1]
        if self.pool < 0:
            problems.append(f"pool={self.pool} must be >= 0 (0: every training example)")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            problems.append(f"methods {unknown or list(self.methods)}; choose from "
                            f"{', '.join(METHODS)}")
        if problems:
            raise LabcoatError("invalid influence settings: " + "; ".join(problems))


@dataclass(frozen=True)
class Example:
    """One training example's score: its index in the trial's stream and what it says."""

    index: int
    score: float
    text: str


@dataclass
class ItemAttribution:
    """A flipped item and, per method, its top proponents and opponents in one trial."""

    item: str
    task: str
    control: float  # the item's score in the control trial
    variant: float
    proponents: dict[str, list[Example]] = field(default_factory=dict)  # method -> examples
    opponents: dict[str, list[Example]] = field(default_factory=dict)


@dataclass
class TrialAttribution:
    """Attribution inside one trial: its flipped items and its self-influence flags."""

    trial: str
    arm: str
    seed: int | None
    role: str  # "control" or "variant"
    checkpoints: list[int]  # steps TracIn summed over
    pool: int  # training examples scored
    training_size: int  # training examples the run consumed
    items: list[ItemAttribution]
    flagged: list[Example]  # highest self-influence first
    self_influence_median: float  # over the pool, to read the flagged scores against


@dataclass
class InfluenceResult:
    """`attribute_flips`'s answer; `as_dict` is the JSON the report reads."""

    experiment: str
    control: str
    variant: str
    methods: list[str]
    flipped: int  # flipped items over all pairs
    trials: list[TrialAttribution]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"format": "labcoat.inside.influence", "version": FORMAT_VERSION,
                "experiment": self.experiment, "control": self.control,
                "variant": self.variant, "methods": self.methods, "flipped": self.flipped,
                "trials": [asdict(t) for t in self.trials], "notes": self.notes}


def attribute_flips(session: Session, experiment: str, control: str, variant: str, *,
                    config: InfluenceConfig | None = None, workload: str | None = None,
                    training_data: str | None = None) -> InfluenceResult:
    """Which training examples the items that flipped between `control` and `variant` lean
    on, in each trial of each pair (see the module doc).

    control, variant: a trial key or an arm of `experiment` (arms pair by seed).
    workload, training_data: ``MODULE:NAME`` of the `Workload` and `TrainingData`
    objects; None: those of the package the trials' command runs.
    """
    config = config or InfluenceConfig()
    exp = store.find_experiment(session, experiment)
    pairs = _pairs(exp, control, variant)
    first = pairs[0][0]
    work = workload_for(first.command, workload, trial=f"trial {first.key}")
    data = training_data_for(first.command, training_data, trial=f"trial {first.key}")
    notes: list[str] = []
    methods = list(config.methods)
    if "ekfac" in methods:
        try:
            import kronfluence  # noqa: F401
        except ImportError:
            methods.remove("ekfac")
            notes.append("EK-FAC skipped: kronfluence is not installed (pip install "
                         "'labcoat[inside]')")
        if not methods:
            raise LabcoatError("EK-FAC influence needs kronfluence: pip install "
                               "'labcoat[inside]', or ask for methods=('tracin',)")
    trials: list[TrialAttribution] = []
    flipped_total = 0
    for c, v in pairs:
        flips = _flipped(session, c, v)
        flipped_total += len(flips)
        if not flips:
            notes.append(f"{c.key} vs {v.key}: no eval item flipped")
            continue
        if len(flips) > config.max_items:
            notes.append(f"{c.key} vs {v.key}: {len(flips)} items flipped; the first "
                         f"{config.max_items} by id are explained (max_items)")
            flips = flips[:config.max_items]
        for role, trial in (("control", c), ("variant", v)):
            trials.append(_attribute(session, work, data, trial, role, flips, methods,
                                     config, notes))
    return InfluenceResult(experiment=exp.name, control=control, variant=variant,
                           methods=methods, flipped=flipped_total, trials=trials, notes=notes)


def _flipped(session: Session, c: Trial, v: Trial) -> list[tuple[str, str, float, float]]:
    """(item, task, control score, variant score) of the items scored differently."""
    scores: dict[int, dict[str, tuple[str, float]]] = {c.id: {}, v.id: {}}
    for row in store.final_eval_items(session, [c.id, v.id]):
        scores[row.trial_id][row.item] = (row.task, row.score)
    if not scores[c.id] or not scores[v.id]:
        missing = c.key if not scores[c.id] else v.key
        raise LabcoatError(f"trial {missing} logged no per-item eval results "
                           "(run.log_items), so no item can be seen to flip")
    both = sorted(set(scores[c.id]) & set(scores[v.id]))
    return [(item, scores[c.id][item][0], scores[c.id][item][1], scores[v.id][item][1])
            for item in both if scores[c.id][item][1] != scores[v.id][item][1]]


def _attribute(session: Session, work: Workload, data: TrainingData, trial: Trial, role: str,
               flips: list[tuple[str, str, float, float]], methods: list[str],
               config: InfluenceConfig, notes: list[str]) -> TrialAttribution:
    cfg = work.configure(trial.params or {}, trial.command)
    model = work.build_model(cfg)
    checkpoints = _checkpoints(session, trial, data, cfg, config.checkpoints)
    size = int(data.training_size(cfg))
    rng = np.random.default_rng(config.seed)
    if config.pool == 0 or config.pool >= size:
        pool = list(range(size))
    else:
        pool = sorted(int(i) for i in rng.choice(size, config.pool, replace=False))
    train = data.training_examples(cfg, pool)
    test = _eval_batch(work, cfg, [f[0] for f in flips], trial)
    texts: dict[int, str] = {}

    def examples(order: Sequence[int], scores: np.ndarray) -> list[Example]:
        idx = [pool[j] for j in order]
        missing = [i for i in idx if i not in texts]
        texts.update(zip(missing, data.describe(cfg, missing), strict=True))
        return [Example(pool[j], float(scores[j]), texts[pool[j]]) for j in order]

    per_method: dict[str, np.ndarray] = {}
    scores, selfs = tracin_and_self_influence(model, checkpoints, data.loss,
                                              chunks(train, config.chunk), test)
    if "tracin" in methods:
        per_method["tracin"] = scores
    if "ekfac" in methods:
        per_method["ekfac"] = ekfac(model, checkpoints[-1].state, data.loss, train, test,
                                    batch_size=config.chunk)
    items = []
    for row, (item, task, cs, vs) in enumerate(flips):
        attribution = ItemAttribution(item=item, task=task, control=cs, variant=vs)
        for method, scores in per_method.items():
            order = np.argsort(-scores[row], kind="stable")
            attribution.proponents[method] = examples(order[:config.top], scores[row])
            attribution.opponents[method] = examples(order[::-1][:config.top], scores[row])
        items.append(attribution)
    flagged = examples(np.argsort(-selfs, kind="stable")[:config.flagged], selfs)
    if len(checkpoints) == 1:
        notes.append(f"trial {trial.key}: TracIn used one checkpoint (step "
                     f"{checkpoints[0].step}); keep more along training (Checkpointer "
                     "keep_every, or --replay-budget) for a fuller sum")
    return TrialAttribution(trial=trial.key, arm=trial.arm, seed=trial.seed, role=role,
                            checkpoints=[c.step for c in checkpoints], pool=len(pool),
                            training_size=size, items=items, flagged=flagged,
                            self_influence_median=float(np.median(selfs)))


def _checkpoints(session: Session, trial: Trial, data: TrainingData, cfg: Any,
                 most: int) -> list[CheckpointWeights]:
    """Up to `most` of the trial's verified checkpoints on disk, evenly spread, newest kept."""
    kept = [c for c in store.verified_checkpoints(session, trial) if Path(c.path).exists()]
    if not kept:
        raise LabcoatError(
            f"trial {trial.key} has no verified checkpoint on disk; TracIn needs the "
            "checkpoints saved along training (labcoat.torch.Checkpointer; tinylm saves "
            "them under labcoat run, or with --checkpoint-dir)")
    picks = sorted({round(x) for x in np.linspace(len(kept) - 1, 0, min(most, len(kept)))})
    out = []
    for ck in (kept[i] for i in picks):
        try:
            state = load_checkpoint(ck.path)
        except CheckpointError as err:
            raise LabcoatError(f"trial {trial.key}: {err}") from None
        step = int(state["step"])
        out.append(CheckpointWeights(step=step, lr=float(data.learning_rate(cfg, step)),
                                     state=model_state(state["tracked"], path=ck.path)))
    return out


def _eval_batch(work: Workload, cfg: Any, items: list[str], trial: Trial
                ) -> tuple[torch.Tensor, ...]:
    """The flipped items' rows of the workload's eval items, asked for as one batch (so the
    workload pads them together)."""
    ids, batches = work.eval_items(cfg, 1 << 30)
    where = {item: i for i, item in enumerate(ids)}
    unknown = [i for i in items if i not in where]
    if unknown:
        raise LabcoatError(f"trial {trial.key}: eval item {unknown[0]!r} is not among the "
                           "workload's eval items; were they logged by another eval set?")
    rows = torch.tensor([where[i] for i in items])
    return tuple(t[rows] for t in batches[0])
