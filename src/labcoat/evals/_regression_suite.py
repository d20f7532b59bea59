"""A regression suite on disk: harvested items, their provenance, the duplicates removed,
and the history of every model scored on it. One JSON file, versioned, written atomically.

Shape (format version 1; `version` is the file format, `revision` counts harvests):

    {"format": "labcoat.regression_suite", "version": 1, "name", "revision",
     "created", "updated", "config": {harvest settings},
     "harvests": [{"revision", "time", "sources", "added", "duplicates", ...}],
     "items": [{"task", "id", "input", "target", "choices", "split": "tune"|"holdout",
                "hash", "added_in", "kind": "scored"|"recorded_input",
                "first_failure": {"model", "sample", "experiment", "trial", "arm", "seed",
                                  "step", "commit", "source", "score"},
                "failures", "observations",
                "answers": {model: [n, c]}, "flaky", "pass_at": {k: value},
                "pass_hat": {k: value}}],
     "duplicates": [{"task", "id", "kind": "exact"|"near", "jaccard", "kept": [task, id],
                     "matched": [task, id], "first_failure"}],
     "history": [{entry of `labcoat evals regress`, see `_regression`}]}

Only `json` reads it (never pickle): a suite is safe to share. A file of a newer format
version is refused with a message saying so, never half-read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labcoat import environment
from labcoat.errors import LabcoatError
from labcoat.evals._eval_items import EvalItem

FORMAT = "labcoat.regression_suite"
VERSION = 1
SPLITS = ("all", "tune", "holdout")
ITEM_KEYS = ("task", "id", "input", "target", "split", "hash")


@dataclass
class RegressionSuite:
    """A regression suite as read from (or to be written to) its file."""

    name: str
    revision: int = 0
    created: str = ""
    updated: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    harvests: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)

    def keys(self, split: str = "all") -> list[tuple[str, str]]:
        """(task, id) of the items in `split` ("all", "tune" or "holdout")."""
        check_split(split)
        return [(i["task"], i["id"]) for i in self.items if split in ("all", i["split"])]

    def eval_items(self, split: str = "all") -> list[EvalItem]:
        """The items of `split` as eval items (for `EvalSuite` and the engine): tune on
        "tune", keep "holdout" for the final check."""
        check_split(split)
        return [EvalItem(task=i["task"], id=i["id"], input=i["input"],
                         target=i.get("target", ""),
                         choices=tuple(i["choices"]) if i.get("choices") else None)
                for i in self.items if split in ("all", i["split"])]

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "name": self.name,
                "revision": self.revision, "created": self.created, "updated": self.updated,
                "config": self.config, "harvests": self.harvests, "items": self.items,
                "duplicates": self.duplicates, "history": self.history}


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise LabcoatError(f"--split {split!r} is not one of {', '.join(SPLITS)}")
    return split


def suites_dir() -> Path:
    """Where suites named without a path live: $LABCOAT_HOME/suites."""
    return environment.home() / "suites"


def suite_path(ref: str | Path) -> Path:
    """A suite file from a path, or a name in `suites_dir()` (NAME or NAME.json)."""
    path = Path(ref)
    if path.suffix == ".json" or path.parent != Path("."):
        return path
    return suites_dir() / f"{ref}.json"


def list_suites(directory: Path | None = None) -> list[Path]:
    """The regression suite files in `directory` (default `suites_dir()`), by name."""
    directory = directory or suites_dir()
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            with path.open(encoding="utf-8") as f:
                head = f.read(200)
        except OSError:
            continue
        if FORMAT in head:
            found.append(path)
    return found


def load_regression_suite(ref: str | Path) -> RegressionSuite:
    """Read a suite file (see the module docstring); every problem names the file."""
    path = suite_path(ref)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        known = ", ".join(p.stem for p in list_suites()) or "none yet"
        raise LabcoatError(f"{path}: no such regression suite (suites in {suites_dir()}: "
                           f"{known}); build one with `labcoat evals harvest`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise LabcoatError(f"{path}: not a readable regression suite ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise LabcoatError(f"{path}: not a labcoat regression suite (no \"format\": "
                           f"\"{FORMAT}\"); give a file `labcoat evals harvest` wrote")
    version = data.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise LabcoatError(f"{path}: regression suite format version {version!r}; this "
                           f"labcoat reads version {VERSION} and older: upgrade labcoat")
    items = data.get("items")
    if not isinstance(items, list):
        raise LabcoatError(f"{path}: \"items\" is not a list; the file is damaged")
    for number, item in enumerate(items):
        if not isinstance(item, dict) or any(k not in item for k in ITEM_KEYS):
            raise LabcoatError(f"{path}: item {number} lacks one of {', '.join(ITEM_KEYS)}; "
                               "the file is damaged")
    return RegressionSuite(
        name=str(data.get("name") or path.stem), revision=int(data.get("revision", 0)),
        created=str(data.get("created", "")), updated=str(data.get("updated", "")),
        config=dict(data.get("config") or {}), harvests=list(data.get("harvests") or []),
        items=items, duplicates=list(data.get("duplicates") or []),
        history=list(data.get("history") or []))


def save_regression_suite(suite: RegressionSuite, ref: str | Path) -> Path:
    """Write atomically (a temporary file, then rename): a crash leaves the old file."""
    path = suite_path(ref)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(suite.as_dict(), indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise LabcoatError(f"{path}: cannot write the regression suite ({e.strerror})") from None
    return path
