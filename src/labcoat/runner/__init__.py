"""Running experiments: the local executor, the supervisor loop, journal ingestion."""

from labcoat.runner._adhoc import ingest_adhoc
from labcoat.runner._goodput import LOSSES, Goodput, experiment_goodput, trial_goodput
from labcoat.runner._ingest import Progress, ingest_attempt
from labcoat.runner._runner import Interrupted, RunSummary, run_design
from labcoat.runner._sequential import SequentialOutcome, run_until_decisive

__all__ = [
    "LOSSES",
    "Goodput",
    "Interrupted",
    "Progress",
    "RunSummary",
    "SequentialOutcome",
    "experiment_goodput",
    "ingest_adhoc",
    "ingest_attempt",
    "run_design",
    "run_until_decisive",
    "trial_goodput",
]
