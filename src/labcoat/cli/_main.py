"""The entry point: user errors become one message and exit code 2, never a traceback."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

from labcoat.errors import Interrupted, LabcoatError


def main() -> None:
    """Entry point: user errors become one message and exit code 2, never a traceback."""
    try:
        from labcoat.cli import app  # the app imports this module

        app()
    except Interrupted as e:
        Console(stderr=True, soft_wrap=True).print(f"[yellow]{escape(str(e))}[/]")
        sys.exit(130)
    except LabcoatError as e:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(str(e))}")
        sys.exit(2)
    except Exception as e:  # a store damaged after it was opened (a bad page, truncated)
        message = _damaged_store(e)
        if message is None:
            raise
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(message)}")
        sys.exit(2)


def _damaged_store(error: Exception) -> str | None:
    """The one line for SQLAlchemy's DatabaseError (not its programming errors), else None.
    SQLAlchemy is imported only if it raised: the CLI starts without it."""
    if not type(error).__module__.startswith("sqlalchemy"):
        return None
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DatabaseError, OperationalError

    from labcoat import environment, store

    if not isinstance(error, DatabaseError) or isinstance(error, OperationalError):
        return None
    where = make_url(environment.database_url()).render_as_string(hide_password=True)
    return store.unreadable(where, error)
