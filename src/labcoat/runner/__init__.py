"""Running experiments: executors (local, ray, slurm), the supervisor loop, journal ingestion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.runner._adhoc import ingest_adhoc
    from labcoat.runner._executor import EXECUTORS, ExecutorConfig, parse_settings
    from labcoat.runner._goodput import LOSSES, Goodput, experiment_goodput, trial_goodput
    from labcoat.runner._imports import ImportSummary, import_results
    from labcoat.runner._ingest import Progress, ingest_attempt
    from labcoat.runner._replay import ReplayMismatch, ReplayResult, replay_trial
    from labcoat.runner._rerun import RerunResult, rerun_trial
    from labcoat.runner._runner import Interrupted, RunSummary, run_design
    from labcoat.runner._sequential import SequentialOutcome, run_until_decisive

# Names load on first use: `labcoat status` needs goodput, not the statistics.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_adhoc": ("ingest_adhoc",),
    "_executor": ("EXECUTORS", "ExecutorConfig", "parse_settings"),
    "_goodput": ("LOSSES", "Goodput", "experiment_goodput", "trial_goodput"),
    "_imports": ("ImportSummary", "import_results"),
    "_ingest": ("Progress", "ingest_attempt"),
    "_replay": ("ReplayMismatch", "ReplayResult", "replay_trial"),
    "_rerun": ("RerunResult", "rerun_trial"),
    "_runner": ("Interrupted", "RunSummary", "run_design"),
    "_sequential": ("SequentialOutcome", "run_until_decisive"),
})
