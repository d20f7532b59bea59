"""The "why" section's data: what `labcoat inside` found, saved beside the experiment.

`labcoat inside` (activation patching, probes, training-data attribution) needs the
trials' checkpoints and torch, and takes seconds to minutes; the report and the
dashboard must open in well under a second without torch. So the results are computed
on demand and saved, one JSON file per experiment, which the report only reads:

    $LABCOAT_HOME/runs/<experiment>/inside.json
    {"format": "labcoat.inside", "version": 1,
     "patching":  {"saved_at", "control", "variant", "result": <InsideResult.as_dict()>},
     "influence": {"saved_at", "control", "variant", "result": <InfluenceResult.as_dict()>}}

A file, not store rows: only the runner writes the store (trials journal, the reading
side ingests), and these are derived results a rerun of `labcoat inside` replaces
section by section. The file sits beside the experiment's run files, so with a shared
PostgreSQL store it is on the machine where `labcoat inside` ran.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labcoat import environment as env
from labcoat.analysis._json import json_safe
from labcoat.errors import LabcoatError

FORMAT = "labcoat.inside"
VERSION = 1
SECTIONS = ("patching", "influence")


def why_path(experiment: str) -> Path:
    """Where `labcoat inside` saves an experiment's results (see the module doc)."""
    return env.home() / "runs" / experiment / "inside.json"


def save_why(experiment: str, section: str, result: dict[str, Any], *, control: str,
             variant: str) -> Path:
    """Save one section (replacing the previous one of that name), written whole then
    renamed into place; returns the file's path."""
    if section not in SECTIONS:
        raise ValueError(f"section {section!r}; choose from {', '.join(SECTIONS)}")
    path = why_path(experiment)
    data = _read(path) if path.exists() else {}
    data.update({"format": FORMAT, "version": VERSION})
    data[section] = {"saved_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
                     "control": control, "variant": variant, "result": json_safe(result)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(data, indent=1, allow_nan=False), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise LabcoatError(f"cannot save labcoat inside's results to {path}: "
                           f"{err.strerror}") from None
    return path


@dataclass
class ComponentRow:
    """One patched component as the why section lists it (rank 1 first)."""

    rank: int
    name: str
    kind: str
    share: float | None  # forward patching's share of the difference; None: not verified
    low: float | None
    high: float | None
    reverse: float | None
    attribution: float
    carries: bool


@dataclass
class Why:
    """What the why section shows; any part may be missing (not computed yet)."""

    path: Path
    patching: dict[str, Any] | None = None  # the saved section: saved_at, control, ...
    influence: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)

    def components(self) -> list[ComponentRow]:
        """Patched components ranked (their interval at the verdict's level), leaves first."""
        if not self.patching:
            return []
        rows = []
        for c in self.patching["result"].get("patching", {}).get("components", []):
            forward, reverse = c.get("forward") or {}, c.get("reverse") or {}
            rows.append(ComponentRow(
                rank=int(c.get("rank", 0)), name=str(c.get("name", "?")),
                kind=str(c.get("kind", "")), share=forward.get("estimate"),
                low=forward.get("low"), high=forward.get("high"),
                reverse=reverse.get("estimate"), attribution=float(c.get("attribution", 0.0)),
                carries=bool(c.get("carries"))))
        return sorted(rows, key=lambda r: r.rank)


def load_why(experiment: str) -> Why | None:
    """The saved results of `labcoat inside` for `experiment`; None if never run. A file
    that cannot be read gives a Why with `problems` (the page says so, it does not fail)."""
    path = why_path(experiment)
    if not path.exists():
        return None
    try:
        data = _read(path)
    except LabcoatError as err:
        return Why(path=path, problems=[str(err)])
    why = Why(path=path, patching=data.get("patching"), influence=data.get("influence"))
    return why


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise LabcoatError(f"{path} is not a readable labcoat inside results file ({err}); "
                           "delete it and run labcoat inside again") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise LabcoatError(f"{path} is not a labcoat inside results file (format "
                           f"{data.get('format') if isinstance(data, dict) else None!r})")
    if data.get("version") != VERSION:
        raise LabcoatError(f"{path} has version {data.get('version')!r}; this labcoat reads "
                           f"version {VERSION}: run labcoat inside again")
    return data
