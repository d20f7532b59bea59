"""The monitors `labcoat run` attaches to every run."""

from __future__ import annotations

from sqlalchemy.orm import Session

from labcoat.monitor._early_warning import EarlyWarning
from labcoat.monitor._extrapolation import Extrapolation
from labcoat.monitor._slow_steps import SlowSteps
from labcoat.runner import MonitorFactory
from labcoat.store import Experiment


def _extrapolation(session: Session, experiment: Experiment) -> Extrapolation:
    return Extrapolation.for_experiment(experiment)


def standard_monitors() -> list[MonitorFactory]:
    """Scaling extrapolation (rule scaling.off_path; inert without `scales:`), early
    warning against reference trials (reference.behind; inert without references) and the
    slow-step alarm (phase.slow; inert for trials that time no phases)."""
    return [_extrapolation, EarlyWarning.for_experiment, SlowSteps.for_experiment]
