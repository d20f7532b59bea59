"""Running experiments: executors (local, ray, slurm: one module each in
`labcoat.runner.executors`, behind the public `Executor` and `TrialHandle` protocols),
the supervisor loop, journal ingestion (the runner's trials and ad-hoc runs),
provenance, goodput. Live monitors plug in through `Monitor` (see `labcoat.monitor`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.runner._adhoc import ingest_adhoc, ingest_adhoc_runs
    from labcoat.runner._executor import (
        EXECUTORS,
        LOST,
        Executor,
        ExecutorConfig,
        ExecutorKind,
        ExecutorSettings,
        LaunchError,
        TrialHandle,
        executor_kind,
        executor_names,
        open_executor,
        parse_settings,
        setting,
    )
    from labcoat.runner._goodput import LOSSES, Goodput, experiment_goodput, trial_goodput
    from labcoat.runner._import_runs import IMPORT_TOOLS, ImportHypothesis, RunsImport, import_runs
    from labcoat.runner._imports import ImportSummary, import_results
    from labcoat.runner._ingest import Progress, ingest_attempt
    from labcoat.runner._liveness import RunnerState, runner_state
    from labcoat.runner._local import LocalProcess, stderr_tail
    from labcoat.runner._monitor import Monitor, MonitorFactory
    from labcoat.runner._provenance import current_fingerprint, environment_state
    from labcoat.runner._runner import Interrupted, RunSummary, run_design

# Names load on first use: `labcoat status` needs goodput, not the executors.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_adhoc": ("ingest_adhoc", "ingest_adhoc_runs"),
    "_executor": ("EXECUTORS", "LOST", "Executor", "ExecutorConfig", "ExecutorKind",
                  "ExecutorSettings", "LaunchError", "TrialHandle", "executor_kind",
                  "executor_names", "open_executor", "parse_settings", "setting"),
    "_goodput": ("LOSSES", "Goodput", "experiment_goodput", "trial_goodput"),
    "_import_runs": ("IMPORT_TOOLS", "ImportHypothesis", "RunsImport", "import_runs"),
    "_imports": ("ImportSummary", "import_results"),
    "_ingest": ("Progress", "ingest_attempt"),
    "_liveness": ("RunnerState", "runner_state"),
    "_local": ("LocalProcess", "stderr_tail"),
    "_monitor": ("Monitor", "MonitorFactory"),
    "_provenance": ("current_fingerprint", "environment_state"),
    "_runner": ("Interrupted", "RunSummary", "run_design"),
})
