"""What every verb shares: the console, common flags, the store session, JSON output."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

console = Console()
if not console.is_terminal:  # a pipe or a log: lines stay whole (paths, commands), not cut at 80
    console.soft_wrap = True

JsonFlag = Annotated[bool, typer.Option("--json", help="print machine-readable JSON")]
ExpArg = Annotated[str, typer.Argument(help="experiment name (or id)")]


@contextmanager
def store_session() -> Iterator[Session]:
    """A session on the store for a read verb; ad-hoc runs that finished since the last
    read are ingested first (trials only journal; the reading side records them). A store
    is created only to record such runs: reading never leaves a new ./.labcoat behind
    (`store.open_store(create=False)`)."""
    from labcoat import environment, store
    from labcoat.runner import ingest_adhoc_runs

    db = store.open_store(create=(environment.home() / "adhoc").is_dir())
    try:
        for name in ingest_adhoc_runs(db):
            Console(stderr=True).print(f"[dim]recorded ad-hoc run {escape(name)}[/]")
        with db.session() as s:
            yield s
    finally:
        db.close()


def store_location() -> str:
    """Where the store is, as a user would look for it: the SQLite file's path, else the
    LABCOAT_DB URL without its password."""
    from sqlalchemy.engine import make_url

    from labcoat import environment

    url = make_url(environment.database_url())
    if url.get_backend_name() == "sqlite" and url.database:
        return url.database
    return url.render_as_string(hide_password=True)


def labcoat_command() -> str:
    """How to call labcoat from this shell, for the "next:" lines: `labcoat` if that is on
    PATH and is this install, else this install's script (`.venv/bin/labcoat`), else
    `python -m labcoat.cli` with this interpreter. A printed command must run as printed."""
    script = Path(sys.executable).parent / "labcoat"
    on_path = shutil.which("labcoat")
    if on_path and (not script.exists() or _same(Path(on_path), script)):
        return "labcoat"
    if script.exists():
        try:
            return str(script.absolute().relative_to(Path.cwd()))
        except ValueError:
            return str(script.absolute())
    return f"{sys.executable} -m labcoat.cli"


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def strict(value: float) -> float | None:
    """JSON has no NaN or infinity: null."""
    return value if math.isfinite(value) else None
