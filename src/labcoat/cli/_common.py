"""What every verb shares: the console, common flags, the store session, JSON output."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from labcoat.errors import LabcoatError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def make_console() -> Console:
    """The CLI's console, as the environment and stdout are now (rich reads them here)."""
    made = Console()
    if not made.is_terminal:  # a pipe or a log: lines stay whole (paths, commands), not cut at 80
        made.soft_wrap = True
    return made


console = make_console()

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

    locked = read_only_file()
    if locked is not None:
        db = open_read_only(locked)
    else:
        db = store.open_store(create=(environment.home() / "adhoc").is_dir())
    try:
        if locked is not None:
            _note_unrecorded(db, locked)
        else:
            said = Console(stderr=True)
            for name, n in Counter(ingest_adhoc_runs(db)).items():  # one line a trial
                runs = "ad-hoc run" if n == 1 else f"{n} ad-hoc runs of"
                said.print(f"[dim]recorded {runs} {escape(name)}[/]")
        with db.session() as s:
            yield s
    finally:
        db.close()


def find_experiment(session: Session, ref: str, verb: str) -> Any:
    """`store.find_experiment`, and where REF is "EXP/TRIAL" of a known experiment (a
    trial given to a verb that takes an experiment), a line saying how to name it."""
    from labcoat import store

    try:
        return store.find_experiment(session, ref)
    except LabcoatError:
        head, _, tail = ref.rpartition("/")
        if not head or not tail or not known_experiment(session, head):
            raise
    store.find_trial(store.find_experiment(session, head), tail)  # else: its trials
    how = {"logs": f"labcoat logs {head} --trial {tail}",
           "logs templates": f"labcoat logs templates {head} --trial {tail}",
           "export": f"labcoat export {head} (every line names its trial)"}.get(
        verb, f"labcoat {verb} {head}; one trial: labcoat show {ref} --provenance")
    raise LabcoatError(f"`labcoat {verb}` takes an experiment, and {ref!r} names trial "
                       f"{tail!r} of {head!r}: {how}")


def known_experiment(session: Session, name: str) -> bool:
    """Whether the store holds an experiment named (or numbered) `name`."""
    from labcoat import store

    try:
        store.find_experiment(session, name)
    except LabcoatError:
        return False
    return True


def read_only_file() -> Path | None:
    """The SQLite store's file when this process may read but not write it (the file, or
    its directory, where SQLite keeps its journal); None otherwise. Read verbs then open it
    read-only instead of refusing it as "not writable"."""
    from sqlalchemy.engine import make_url

    from labcoat import environment

    try:
        url = make_url(environment.database_url())
    except Exception:  # store.open_store says what is wrong with the URL
        return None
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    path = Path(url.database)
    if not path.is_file() or not os.access(path, os.R_OK):
        return None
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)
    return None if writable else path


def open_read_only(path: Path) -> Any:
    """The store at `path`, opened read-only (SQLite `mode=ro`; `immutable=1` where a
    WAL store's shared-memory file cannot be created beside it). Nothing is written: no
    migration, no WAL switch, no ad-hoc runs recorded."""
    import sqlite3

    from sqlalchemy import create_engine
    from sqlalchemy.exc import DatabaseError

    from labcoat import store

    uri = path.resolve().as_uri()

    def connect() -> sqlite3.Connection:
        try:
            db = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
            db.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except sqlite3.OperationalError:  # e.g. no -shm file and no right to create one
            db = sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)
        db.execute("PRAGMA query_only = 1")
        return db

    engine = create_engine(f"sqlite:///{path}", creator=connect)
    try:
        store.migrate(engine)  # a no-op on a current store; an old one would need a write
    except (DatabaseError, OSError) as e:
        engine.dispose()
        reason = getattr(e, "orig", None) or e
        raise LabcoatError(
            f"the store {path} is read-only for you and cannot be read as it is ({reason}): "
            "it may be from an older labcoat that needs a schema upgrade. Open it once with "
            "write access, or copy it somewhere writable and point LABCOAT_DB at the copy"
        ) from None
    return store.Store(engine)


def _note_unrecorded(db: Any, path: Path) -> None:
    """One line when ad-hoc runs wait to be recorded: a read-only store cannot take them."""
    from sqlalchemy import select

    from labcoat import environment, store
    from labcoat.journal import JOURNAL_NAME

    root = environment.home() / "adhoc"
    runs = [str(j.parent) for j in root.glob(f"*/*/*/{JOURNAL_NAME}")] if root.is_dir() else []
    if not runs:
        return
    with db.session() as session:
        known = set(session.scalars(select(store.Attempt.run_dir).where(
            store.Attempt.run_dir.in_(runs))))
    waiting = len(set(runs) - known)
    if waiting:
        Console(stderr=True).print(
            f"[dim]note: {waiting} ad-hoc run(s) in {escape(str(root))} not recorded: the store "
            f"{escape(str(path))} is read-only (a reader with write access records them)[/]",
            soft_wrap=True, highlight=False)


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
