"""Why an arm won: compare the insides of a control and a variant model.

Between-arm activation patching (exact, by forward hooks on any
``torch.nn.Module``, with attribution patching as the fast screen), linear
probes with selectivity, and training-data attribution, each with intervals
from `labcoat.stats`. Importing this package imports torch.

    from labcoat import inside
    result = inside.compare([(control, variant)], batches, metric)   # any nn.Modules
    result.ranked()[0].name, result.ranked()[0].forward      # the top component, its share
    inside.compare_trials(session, "exp", "control", "variant")   # store trials (the CLI)

Modules: `_components` (what can be patched, found or named), `_hooks` (read, replace,
differentiate one activation), `_patching` (exact, attribution and integrated attribution patching),
`_compare` (shares, intervals, corrected verdicts), `_probes` (linear probes and
selectivity), `_workload` (the protocol a workload follows), `_trials` (the store side).
Training-data attribution: `_tracin` (TracIn over checkpoints, self-influence), `_ekfac`
(EK-FAC influence through Kronfluence), `_training_data` (the protocol by which a workload
gives back training example i), `_influence` (the items that flipped between two trials,
explained; the store side).
"""

from labcoat.inside._compare import (
    DISRUPTION,
    Comparison,
    ComponentResult,
    PatchingConfig,
    Share,
    compare,
)
from labcoat.inside._components import (
    KINDS,
    Component,
    UnknownComponent,
    find_components,
    leaves,
    resolve,
)
from labcoat.inside._ekfac import ekfac, influence_layers
from labcoat.inside._influence import (
    InfluenceConfig,
    InfluenceResult,
    ItemAttribution,
    TrialAttribution,
    attribute_flips,
)
from labcoat.inside._patching import (
    attribution_patching,
    exact_patching,
    integrated_attribution,
    metric_values,
)
from labcoat.inside._probes import (
    ProbeComparison,
    ProbeConfig,
    ProbeLayer,
    ProbeScore,
    control_labels,
    held_out_correct,
    layer_features,
    probe_arms,
)
from labcoat.inside._tracin import (
    CheckpointWeights,
    InfluenceError,
    chunks,
    self_influence,
    tracin,
    tracin_and_self_influence,
)
from labcoat.inside._training_data import TrainingData, training_data_for
from labcoat.inside._trials import InsideResult, LoadedTrial, compare_trials
from labcoat.inside._workload import Workload, workload_for

__all__ = [
    "CheckpointWeights",
    "InfluenceConfig",
    "InfluenceError",
    "InfluenceResult",
    "ItemAttribution",
    "TrainingData",
    "TrialAttribution",
    "attribute_flips",
    "chunks",
    "ekfac",
    "influence_layers",
    "self_influence",
    "tracin",
    "tracin_and_self_influence",
    "training_data_for",
    "KINDS",
    "DISRUPTION",
    "Comparison",
    "Component",
    "ComponentResult",
    "InsideResult",
    "LoadedTrial",
    "PatchingConfig",
    "ProbeComparison",
    "ProbeConfig",
    "ProbeLayer",
    "ProbeScore",
    "Share",
    "UnknownComponent",
    "Workload",
    "attribution_patching",
    "compare",
    "compare_trials",
    "control_labels",
    "exact_patching",
    "find_components",
    "held_out_correct",
    "integrated_attribution",
    "layer_features",
    "leaves",
    "metric_values",
    "probe_arms",
    "resolve",
    "workload_for",
]
