"""User-facing errors: the CLI prints these as one message, without a traceback."""

from __future__ import annotations


class LabcoatError(Exception):
    """Something the user can fix (a bad design file, flag, path or data).

    The message names the place (file:line, flag, trial) and says the fix.
    """


class Interrupted(LabcoatError):
    """A run was stopped (Ctrl-C or SIGTERM); what finished is kept."""
