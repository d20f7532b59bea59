"""Logs that explain failures: templates, noise, rank collapse and failure diagnosis.

    from labcoat import diagnose
    diagnose.mine_templates(lines)            # one template id per line (Drain3)
    diagnose.is_noise(lines)                  # one flag per line: banners, progress bars...
    diagnose.collapse_ranks(records)          # the same line from N ranks, once, x N
    diagnose.printed_steps(events)            # the step each captured line was printed at
    d = diagnose.diagnose(lines, references, end=AttemptEnd(cause="exit 1: ..."))
    d.cause, d.rank, d.step, d.suspects       # why, where, when, and the lines that say so
    diagnose.diagnose_trial(session, trial)   # the same, read from the store
    diagnose.summarize_templates(lines)       # per template: count, ranks, first step...
    diagnose.experiment_templates(session, experiment)  # the same, read from the store

Importing this package loads neither Drain3 nor the database layer; they load
when templates are first mined and when a stored trial is diagnosed.
"""

from labcoat.diagnose._causes import CAUSES, CauseHit, cause_of_end, match_cause
from labcoat.diagnose._collapse import RankGroup, collapse_ranks
from labcoat.diagnose._diagnosis import Diagnosis, NewTemplate, Reference, Suspect, diagnose
from labcoat.diagnose._errors import DiagnoseError
from labcoat.diagnose._experiment import (
    TemplateSummary,
    experiment_templates,
    failed_trials,
    find_trial,
    line_filter,
    summarize_templates,
)
from labcoat.diagnose._fields import body_of, rank_of
from labcoat.diagnose._masking import MASKS, mask
from labcoat.diagnose._noise import is_noise
from labcoat.diagnose._records import AttemptEnd, LogLine, MetricPoint, RunEvent
from labcoat.diagnose._steps import printed_steps
from labcoat.diagnose._templates import TemplateConfig, Templates, mine_templates
from labcoat.diagnose._traceback import Frame, PythonError, parse_tracebacks, user_frame
from labcoat.diagnose._trial import attempt_to_diagnose, diagnose_trial

__all__ = [
    "CAUSES",
    "MASKS",
    "AttemptEnd",
    "CauseHit",
    "DiagnoseError",
    "Diagnosis",
    "Frame",
    "LogLine",
    "MetricPoint",
    "NewTemplate",
    "PythonError",
    "RankGroup",
    "Reference",
    "RunEvent",
    "Suspect",
    "TemplateConfig",
    "TemplateSummary",
    "Templates",
    "attempt_to_diagnose",
    "body_of",
    "cause_of_end",
    "collapse_ranks",
    "diagnose",
    "diagnose_trial",
    "experiment_templates",
    "failed_trials",
    "find_trial",
    "line_filter",
    "is_noise",
    "mask",
    "match_cause",
    "mine_templates",
    "parse_tracebacks",
    "printed_steps",
    "rank_of",
    "summarize_templates",
    "user_frame",
]
