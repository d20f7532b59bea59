"""W&B offline runs (`wandb/offline-run-*/run-<id>.wandb`), read through wandb's own
reader of its transaction log: `wandb leet inspect --json` (wandb >= 0.31 ships no Python
reader). Its binary, `wandb-core leet inspect`, is called directly, one process per run,
several at a time.

A run's keys: `config.<key>` (nested keys dotted), `run_id`, `name`, `group`, `job_type`,
`project`, `tags`. Its metrics: every numeric key of every history row at `_step`
(nested dicts dotted, `_`-prefixed keys skipped).
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from labcoat.errors import LabcoatError
from labcoat.runner._external import ExternalRun, flat


def read_wandb(path: Path) -> list[ExternalRun]:
    """Every run under `path`: a `.wandb` file, a run directory, or a directory holding
    them (e.g. `wandb/`)."""
    if not path.exists():
        raise LabcoatError(f"{path}: no such W&B directory or .wandb file")
    files = [path] if path.is_file() else sorted(path.rglob("run-*.wandb"))
    if not files:
        raise LabcoatError(f"{path}: no W&B run logs (run-<id>.wandb) here; give the wandb/ "
                           "directory or an offline-run-* directory")
    core = _core()
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda f: _read_run(core, f), files))


def _core() -> str:
    """The wandb-core binary that `wandb leet` runs (honouring wandb's own override)."""
    from importlib.util import find_spec

    override = os.environ.get("_WANDB_CORE_PATH")
    if override:
        return override
    spec = find_spec("wandb")
    if spec is None or not spec.submodule_search_locations:
        raise LabcoatError("reading W&B runs needs the wandb package (0.31 or later): "
                           "pip install 'labcoat[wandb]'")
    core = Path(next(iter(spec.submodule_search_locations))) / "bin" / "wandb-core"
    if not core.is_file():
        raise LabcoatError(f"wandb's reader {core} is missing; reinstall wandb (0.31 or later)")
    return str(core)


def _read_run(core: str, file: Path) -> ExternalRun:
    command = [core, "leet", "inspect", "--json", "--no-observability",
               "--run-file", str(file), str(file.parent.parent)]
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, "WANDB_MODE": "offline"})
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no message"]
        raise LabcoatError(f"{file}: wandb could not read this run log ({why[0][:200]}); the "
                           "file is damaged, nothing was imported")
    # wandb's reader exits 0 past a torn or corrupt record, saying so on stderr only.
    said = [line for line in done.stderr.splitlines() if "corrupt" in line or "incomplete" in line]
    if said:
        raise LabcoatError(f"{file}: damaged W&B run log ({said[0].strip()[:200]}); nothing was "
                           "imported. Move the run aside (or let it finish) and import again")
    run = ExternalRun("wandb", file.stem.removeprefix("run-"), str(file.parent))
    config: dict[str, Any] = {}
    saw_run = False
    for number, line in enumerate(done.stdout.splitlines(), start=1):
        if line.find('"type":"summary"', 0, 64) >= 0:  # half the records; not points
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise LabcoatError(f"{file}: wandb's reader printed a line that is not JSON (record "
                               f"{number}: {line[:80]!r}); nothing was imported") from None
        kind = record.get("type")
        if kind == "history":
            _history(run, record["history"])
        elif kind == "run":
            saw_run = True
            _run_keys(run, record["run"], config)
        elif kind == "config":
            _config(record["config"], config)
    if not saw_run:
        raise LabcoatError(f"{file}: no run record in this W&B log (is it damaged or empty?); "
                           "nothing was imported")
    for key, value in config.items():
        if key != "_wandb":
            flat(f"config.{key}", value, run.keys)
    return run


def _run_keys(run: ExternalRun, record: dict[str, Any], config: dict[str, Any]) -> None:
    run.id = str(record.get("run_id") or run.id)
    run.keys.update({"run_id": run.id, "name": str(record.get("display_name") or ""),
                     "group": str(record.get("run_group") or ""),
                     "job_type": str(record.get("job_type") or ""),
                     "project": str(record.get("project") or ""),
                     "tags": ",".join(str(t) for t in record.get("tags") or [])})
    _config(record.get("config") or {}, config)


def _config(record: dict[str, Any], config: dict[str, Any]) -> None:
    """A config record: {"update": {key: value}, "remove": [...]} (JSON already decoded)."""
    config.update(record.get("update") or {})
    for key in record.get("remove") or []:
        config.pop(key if isinstance(key, str) else str(key), None)


def _history(run: ExternalRun, record: dict[str, Any]) -> None:
    item = record.get("item") or {}
    step = (record.get("step") or {}).get("num", item.get("_step", 0))
    time = item.get("_timestamp")
    points: dict[str, Any] = {}
    for key, value in item.items():
        if not key.startswith("_"):
            _numbers(key, value, points)
    for key, value in points.items():
        run.add(key, int(step), value, time)


def _numbers(key: str, value: Any, out: dict[str, float]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if not str(k).startswith("_"):
                _numbers(f"{key}.{k}", v, out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out[key] = float(value)
    elif value in ("NaN", "Infinity", "-Infinity"):  # how JSON spells non-finite floats
        out[key] = float(value.replace("Infinity", "inf"))

