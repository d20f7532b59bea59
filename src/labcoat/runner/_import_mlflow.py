"""MLflow runs, read without MLflow or a server: the SQLite tracking store's tables
(`metrics`, `params`, `tags`, `runs`, `experiments`) and the legacy `mlruns/` file layout
(`<experiment>/<run>/metrics/<key>` lines "timestamp value step").

Values are what `MlflowClient.get_metric_history` returns: NaN where MLflow stored
`is_nan`, the stored double otherwise. Deleted runs and experiments are skipped.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import yaml

from labcoat.errors import LabcoatError
from labcoat.runner._external import ExternalRun
from labcoat.store import SeriesColumns

SQLITE_MAGIC = b"SQLite format 3\x00"
_MS = 1000.0  # MLflow's timestamps are milliseconds
# Metric files smaller than this (~450 lines) are parsed in Python: a PyArrow call costs
# ~0.2 ms however small the file, as much as ~250 lines (real mlruns/ often hold thousands
# of one-line files)
ARROW_FROM = 16 * 1024


def read_mlflow(path: Path, notes: list[str] | None = None) -> list[ExternalRun]:
    """Every active run under `path`: a SQLite tracking store's file, an `mlruns/`
    directory, or a directory holding `mlruns/` or `mlflow.db`. What is left out and
    why (runs of an experiment folder that lost its meta.yaml) is added to `notes`."""
    if path.is_file():
        return _read_sqlite(path)
    if path.is_dir():
        if (path / "mlruns").is_dir():
            path = path / "mlruns"
        elif (path / "mlflow.db").is_file():
            return _read_sqlite(path / "mlflow.db")
        return _read_file_store(path, [] if notes is None else notes)
    raise LabcoatError(f"{path}: no such MLflow store; give the tracking database "
                       "(mlflow.db, or sqlite:///path) or the mlruns/ directory")


def _read_sqlite(path: Path) -> list[ExternalRun]:
    with open(path, "rb") as f:
        if f.read(16) != SQLITE_MAGIC:
            raise LabcoatError(f"{path}: not an SQLite database (an MLflow tracking store is "
                               "mlflow.db or the mlruns/ directory); nothing was imported")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise LabcoatError(f"{path}: cannot open the MLflow database ({e})") from None
    try:
        return _sqlite_runs(db, path)
    except sqlite3.DatabaseError as e:
        raise LabcoatError(f"{path}: the MLflow database is damaged or not an MLflow tracking "
                           f"store ({e}); nothing was imported") from None
    finally:
        db.close()


def _sqlite_runs(db: sqlite3.Connection, path: Path) -> list[ExternalRun]:
    experiments = dict(db.execute("SELECT experiment_id, name FROM experiments "
                                  "WHERE lifecycle_stage = 'active'"))
    runs: dict[str, ExternalRun] = {}
    for run_id, name, exp_id in db.execute(
            "SELECT run_uuid, name, experiment_id FROM runs WHERE lifecycle_stage = 'active' "
            "ORDER BY start_time, run_uuid"):
        if exp_id not in experiments:
            continue
        run = runs[run_id] = ExternalRun("mlflow", run_id, str(path))
        run.keys.update({"run_id": run_id, "run_name": name or "",
                         "experiment": experiments[exp_id]})
    for table in ("params", "tags"):
        for key, value, run_id in db.execute(f"SELECT key, value, run_uuid FROM {table}"):  # noqa: S608
            if run_id in runs:
                runs[run_id].keys[f"{table}.{key}"] = value if value is not None else ""
    # A run at a time through MLflow's run_uuid index, in write (rowid) order, as columns.
    for run_id, run in runs.items():
        rows = db.execute("SELECT key, step, timestamp, value, is_nan FROM metrics "
                          "WHERE run_uuid = ? ORDER BY rowid", (run_id,)).fetchall()
        if not rows:
            continue
        keys, steps, stamps, values, nans = zip(*rows, strict=True)
        values = tuple(math.nan if n else float(v) for v, n in zip(values, nans, strict=True)) \
            if any(nans) else tuple(map(float, values))
        names = set(keys)
        if len(names) == 1:
            _series(run, keys[0], steps, stamps, values)
            continue
        rows_of: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            rows_of.setdefault(key, []).append(i)
        for key, index in rows_of.items():
            _series(run, key, [steps[i] for i in index], [stamps[i] for i in index],
                    [values[i] for i in index])
    return list(runs.values())


def _series(run: ExternalRun, key: str, steps: Sequence[int], stamps: Sequence[int],
            values: Sequence[float]) -> None:
    """One metric's points in write order; at a step written twice the later timestamp
    wins, then the later write (MLflow's own rule for a run's latest value)."""
    times = [t / 1000.0 for t in stamps]
    series = dict(zip(steps, zip(values, times, strict=True), strict=True))
    if len(series) < len(steps):
        order = sorted(range(len(steps)), key=lambda i: (steps[i], stamps[i]))  # stable
        series = {steps[i]: (values[i], times[i]) for i in order}
        run.repeated[key] = len(steps) - len(series)
    run.metrics[key] = series


def _read_file_store(root: Path, notes: list[str]) -> list[ExternalRun]:
    runs = []
    experiments = sorted(p for p in root.iterdir() if (p / "meta.yaml").is_file())
    if not experiments:
        raise LabcoatError(f"{root}: no MLflow experiments here (expected mlruns/<id>/meta.yaml);"
                           " give the mlruns/ directory or the tracking database")
    notes += _headless_experiments(root)
    for exp_dir in experiments:
        meta = _yaml(exp_dir / "meta.yaml")
        if meta.get("lifecycle_stage", "active") != "active":
            continue
        run_dirs = sorted(p for p in exp_dir.iterdir() if (p / "meta.yaml").is_file())
        name = str(meta.get("name", exp_dir.name))
        # Arrow parses without the GIL: runs read on every core (the first error, in run
        # order, is the one raised)
        with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
            runs += [run for run in pool.map(_file_run, run_dirs, [name] * len(run_dirs)) if run]
    runs.sort(key=lambda r: (float(r.keys.get("_start", 0)), r.id))
    for run in runs:
        run.keys.pop("_start", None)
    return runs


def _headless_experiments(root: Path) -> list[str]:
    """Folders of runs whose experiment lost its meta.yaml (deleted, or a copy that left
    it out): MLflow skips them with a warning, and so does the import, saying so."""
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
                         and not (p / "meta.yaml").is_file()):
        count = sum((run / "meta.yaml").is_file() for run in folder.iterdir() if run.is_dir())
        if count:
            found.append(f"{folder}: {count} run(s) left out: their experiment folder has no "
                         "meta.yaml (MLflow skips it too); restore the file to import them")
    return found


def _file_run(run_dir: Path, experiment: str) -> ExternalRun | None:
    meta = _yaml(run_dir / "meta.yaml")
    if meta.get("lifecycle_stage", "active") != "active":
        return None
    run_id = str(meta.get("run_id") or meta.get("run_uuid") or run_dir.name)
    run = ExternalRun("mlflow", run_id, str(run_dir))
    run.keys.update({"run_id": run_id, "run_name": str(meta.get("run_name") or ""),
                     "experiment": experiment, "_start": str(meta.get("start_time") or 0)})
    for kind in ("params", "tags"):
        folder = run_dir / kind
        for file in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if file.is_file():
                key = file.relative_to(folder).as_posix()
                # bytes decoded as they are: MLflow keeps a param's "\r\n" line endings
                run.keys[f"{kind}.{key}"] = file.read_bytes().decode("utf-8", errors="replace")
    folder = run_dir / "metrics"
    for file in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if file.is_file():
            _metric_file(run, file.relative_to(folder).as_posix(), file)
    return run


def _metric_file(run: ExternalRun, key: str, file: Path) -> None:
    """Lines "timestamp value [step]" (MLflow's FileStore); the later line at a step wins.

    Fast path, for files of ARROW_FROM bytes or more: PyArrow's CSV reader (the `mlflow`
    extra) parses the three columns in C, ~5x faster than Python (its doubles are
    correctly rounded, as Python's `float`, so the values are equal to the bit). A file
    it reads differently from MLflow's own parser (NaN, which Arrow also reads from
    "nan(1)"; repeated steps; two-field lines; a "+" sign; damage) is read line by line."""
    data = file.read_bytes()
    columns = None if key in run.metrics or len(data) < ARROW_FROM else _arrow_columns(data)
    series = None if columns is None else _one_per_step(*columns)
    if series is None:
        return _metric_lines(run, key, file, data.decode("utf-8", errors="replace"))
    run.metrics[key] = series


def _one_per_step(stamps: np.ndarray, values: np.ndarray, steps: np.ndarray
                  ) -> SeriesColumns | None:
    """The columns sorted by step; None for NaN (see `_metric_file`) or a step written
    twice (the line-by-line reader applies MLflow's rule for which one wins)."""
    if np.isnan(values).any():
        return None
    if len(steps) > 1 and not bool(np.all(steps[1:] > steps[:-1])):
        order = np.argsort(steps, kind="stable")
        stamps, values, steps = stamps[order], values[order], steps[order]
        if not bool(np.all(steps[1:] > steps[:-1])):
            return None
    return SeriesColumns(steps, values, stamps / _MS)


def _arrow_columns(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(timestamps, values, steps) of a file of lines "int float int", or None where
    PyArrow is absent or the file is anything else."""
    try:
        import pyarrow as pa
        import pyarrow.csv as csv
    except ImportError:
        return None
    names = ["t", "v", "s"]
    try:
        table = csv.read_csv(
            pa.py_buffer(data),
            read_options=csv.ReadOptions(column_names=names, use_threads=False,
                                         block_size=len(data) + 1),  # one chunk
            parse_options=csv.ParseOptions(delimiter=" ", quote_char=False,
                                           ignore_empty_lines=False),
            convert_options=csv.ConvertOptions(
                column_types=dict(zip(names, (pa.int64(), pa.float64(), pa.int64()),
                                      strict=True)),
                null_values=[], strings_can_be_null=False))
    except (pa.ArrowInvalid, ValueError):
        return None
    # numpy views of each column's buffer: ChunkedArray.to_numpy would import pandas (0.2 s)
    out = []
    for name, dtype in zip(names, (np.int64, np.float64, np.int64), strict=True):
        array = pa.concat_arrays(table.column(name).chunks)
        if array.null_count:
            return None
        out.append(np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array),
                                 offset=array.offset * 8))
    return out[0], out[1], out[2]


def _metric_lines(run: ExternalRun, key: str, file: Path, text: str) -> None:
    """Line by line: "timestamp value", "timestamp value step", or MLflow 3's "timestamp
    value step dataset digest" for a metric logged with a dataset. The step of that last
    form is the one written: MLflow's file client reads it as 0 (it takes the step only
    from three-field lines), while its SQLite store keeps it and drops the dataset, as
    labcoat does."""
    stamp: dict[int, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        try:
            if len(parts) not in (2, 3, 5):
                raise ValueError
            ts, value = int(parts[0]), float(parts[1])
            step = int(parts[2]) if len(parts) > 2 else 0
        except ValueError:
            raise LabcoatError(f"{file}:{number}: not an MLflow metric line "
                               f"(timestamp value step): {line.strip()[:80]!r}; the file "
                               "is damaged, nothing was imported") from None
        if stamp.get(step, ts) > ts:
            run.repeated[key] = run.repeated.get(key, 0) + 1
            continue
        stamp[step] = ts
        run.add(key, step, value, ts / 1000.0)


def _yaml(file: Path) -> dict:
    try:
        data = yaml.load(file.read_text(encoding="utf-8"), Loader=_Loader)
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise LabcoatError(f"{file}: not readable MLflow metadata ({e}); the file is damaged, "
                           "nothing was imported") from None
    if not isinstance(data, dict):
        raise LabcoatError(f"{file}: not MLflow metadata (expected a mapping); the file is "
                           "damaged, nothing was imported")
    return data


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
