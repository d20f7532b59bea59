"""The error `labcoat.diagnose` raises for input a user can fix."""

from __future__ import annotations

from labcoat.errors import LabcoatError


class DiagnoseError(LabcoatError, ValueError):
    """Bad input to diagnose (a setting out of range, a line that is not text, an unknown
    trial). A `LabcoatError`, so the CLI prints it as one message; also a `ValueError`."""
