"""Running experiments: the local executor, the supervisor loop, journal ingestion."""

from labcoat.runner._adhoc import ingest_adhoc
from labcoat.runner._ingest import Progress, ingest_attempt
from labcoat.runner._runner import Interrupted, RunSummary, run_design

__all__ = ["Interrupted", "Progress", "RunSummary", "ingest_adhoc", "ingest_attempt", "run_design"]
