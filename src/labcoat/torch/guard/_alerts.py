"""What the guard reports: `Alert`, severities, and the errors it raises.

An alert names the rule that broke, the optimizer step, how bad it is and the
evidence (plain JSON-ready numbers and names), so a reader can tell what
broke without rerunning anything. Severities, mildest first:

    warning   suspicious, often a real problem (a loss spike, a straggler)
    error     a silent bug that makes the model quietly worse (a frozen layer,
              labels visible in the inputs, dropout on during evaluation)
    critical  the run is broken or its numbers are wrong (NaN/Inf, a bit flip,
              replicas that disagree); ``stop_on="critical"`` stops here
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from labcoat.errors import LabcoatError

Severity = Literal["warning", "error", "critical"]
SEVERITIES: tuple[Severity, ...] = ("warning", "error", "critical")


@dataclass(frozen=True)
class Rule:
    """A rule as its check declares it: the severity of its alerts and the bug class it
    catches (one line). ``docs/guard.md``'s rule table is generated from these."""

    severity: Severity
    text: str

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"internal: severity {self.severity!r}")


def at_least(severity: str, floor: str) -> bool:
    """Whether `severity` is `floor` or worse."""
    return SEVERITIES.index(severity) >= SEVERITIES.index(floor)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Alert:
    """One broken rule.

    step: the optimizer step it was seen at (1-based, counting from the run's start).
    rule: dotted name, family first, e.g. ``grad.not_reset`` (see each check module).
    severity: ``warning``, ``error`` or ``critical``.
    message: one or two sentences: what broke, where, and the likely cause.
    evidence: JSON-ready numbers and names behind the judgement.
    """

    step: int
    rule: str
    severity: Severity
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"[{self.severity}] step {self.step} {self.rule}: {self.message}"


class GuardError(LabcoatError):
    """A guard that cannot be built as asked: a bad option, pattern or reference file."""


class GuardStop(LabcoatError):
    """Raised from a training hook or ``guard.record`` when an alert reaches ``stop_on``.

    The alert is already in ``guard.alerts`` and the journal; ``.alert`` holds it.
    """

    def __init__(self, alert: Alert) -> None:
        super().__init__(
            f"guard stopped the run at step {alert.step}: rule {alert.rule} ({alert.severity}): "
            f"{alert.message}"
        )
        self.alert = alert
