"""Every environment variable labcoat reads, in one place.

Variables only locate things or carry a trial's identity from the runner to
the trial process; settings live in the design file and CLI flags.

LABCOAT_HOME        (user)   where labcoat keeps its database and run files;
                             default ./.labcoat
LABCOAT_DB          (user)   any SQLAlchemy URL; overrides the SQLite file in the home
                             (a shared store: postgresql+psycopg://user:pw@host/db)
LABCOAT_JOURNAL     (runner) path of this trial attempt's journal (JSON lines)
LABCOAT_EXPERIMENT  (runner) experiment name
LABCOAT_TRIAL       (runner) trial key within the experiment, e.g. ``warmup-s1``
LABCOAT_ATTEMPT     (runner) attempt number, 1-based
LABCOAT_ARM         (runner) arm name
LABCOAT_SEED        (runner) the trial's seed
LABCOAT_PARAMS      (runner) the trial's resolved parameters as a JSON object
LABCOAT_CHECKPOINT_DIR (runner) the trial's checkpoint directory, shared by its attempts
LABCOAT_MTBF_SECONDS (runner) observed mean time between failures, for the checkpoint interval
LABCOAT_CHECKPOINT_FAULT (chaos) checkpoint fault injection: exit-mid-write@save=N,
                             disk-full@save=N (or @STEP); see labcoat.torch.Checkpointer
LABCOAT_JOURNAL_FAULT (chaos) torn@N: the trial dies halfway through its N-th journal record
LABCOAT_GUARD_REFERENCE (runner) JSON file of guard profiles of clean trials of the same arm,
                             for the guard's inferred invariants (labcoat.torch.watch)
LABCOAT_REPLAY      (replay) JSON file describing a replay segment (`labcoat replay`): the
                             Checkpointer restores its checkpoint, attaches the probes and
                             ends the process after its last step (labcoat.torch.checkpoint._replay)
LABCOAT_REPLAY_BUDGET (user) record for replay: the Checkpointer keeps every checkpoint and
                             saves as often as this fraction of training time allows (e.g. 0.07)
LABCOAT_PROFILE_ON_SLOW (user) N: a phase timer (labcoat.torch.time_phases) that sees one of
                             its phases get slower profiles the next N steps with torch.profiler,
                             the trace beside the journal; unset or 0: off
RANK, WORLD_SIZE     (torchrun) in a multi-rank trial (design `ranks: N`): this process's
                             rank and the group's size; rank r > 0 journals beside
                             LABCOAT_JOURNAL as journal-rank<r>.jsonl

Stdlib only: the trial SDK imports this.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME = "LABCOAT_HOME"
DB = "LABCOAT_DB"
JOURNAL = "LABCOAT_JOURNAL"
EXPERIMENT = "LABCOAT_EXPERIMENT"
TRIAL = "LABCOAT_TRIAL"
ATTEMPT = "LABCOAT_ATTEMPT"
ARM = "LABCOAT_ARM"
SEED = "LABCOAT_SEED"
PARAMS = "LABCOAT_PARAMS"
CHECKPOINT_DIR = "LABCOAT_CHECKPOINT_DIR"
MTBF = "LABCOAT_MTBF_SECONDS"
CHECKPOINT_FAULT = "LABCOAT_CHECKPOINT_FAULT"
JOURNAL_FAULT = "LABCOAT_JOURNAL_FAULT"
GUARD_REFERENCE = "LABCOAT_GUARD_REFERENCE"
REPLAY = "LABCOAT_REPLAY"
REPLAY_BUDGET = "LABCOAT_REPLAY_BUDGET"
PROFILE_ON_SLOW = "LABCOAT_PROFILE_ON_SLOW"


def home() -> Path:
    """The labcoat home directory (not created here)."""
    return Path(os.environ.get(HOME) or ".labcoat").absolute()


def database_url() -> str:
    """The store's SQLAlchemy URL: LABCOAT_DB, else SQLite under the home."""
    url = os.environ.get(DB)
    if url:
        return url
    return f"sqlite:///{home() / 'labcoat.db'}"
