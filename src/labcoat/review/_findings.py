"""A design-review finding: a rule, how serious, where in the file, what to do."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    file: str
    line: int | None
    message: str
    fix: str = ""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "where": self.where}
