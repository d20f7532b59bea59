"""What every verb shares: the console, common flags, the store session, JSON output."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

console = Console()

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


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def strict(value: float) -> float | None:
    """JSON has no NaN or infinity: null."""
    return value if math.isfinite(value) else None
