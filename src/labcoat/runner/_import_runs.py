"""`labcoat import mlflow|wandb|tensorboard`: runs another tracker recorded become the
trials of an experiment (arm and seed mapped from each run's params, tags, config or
directory), with a design the import writes from the hypothesis flags or a short design
file, so `labcoat report` gives per-arm intervals and a verdict.

Everything is read and checked before the store is opened, and written in one
transaction: a damaged file or a bad mapping imports nothing.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from labcoat import spec, store
from labcoat.errors import LabcoatError
from labcoat.runner._external import ExternalRun

IMPORT_TOOLS = ("mlflow", "wandb", "tensorboard")
# Where a bare key is looked up, in this order: `--arm-by lr` finds params.lr or config.lr.
NAMESPACES = ("params", "config", "tags", "path")
# What a short design file for an import may say (arms and seeds come from the runs).
DESIGN_KEYS = ("description", "hypothesis", "hypotheses", "secondary_metrics", "correction",
               "seed_analysis", "control")


@dataclass(kw_only=True)
class ImportHypothesis:
    """The hypothesis flags; any left None comes from the design file."""

    metric: str | None = None
    direction: str | None = None
    control: str | None = None
    smallest_effect: float | None = None
    claim: str | None = None
    design: Path | None = None


@dataclass
class RunsImport:
    experiment: str
    tool: str
    arms: dict[str, list[int]]  # arm -> seeds imported now
    points: int
    outcomes: dict[str, int]  # new / same / replaced -> runs
    notes: list[str] = field(default_factory=list)


def import_runs(tool: str, paths: list[str | Path], *, experiment: str, arm_by: str | None,
                seed_by: str | None, hypothesis: ImportHypothesis, where: list[str] | None = None,
                replace: bool = False) -> RunsImport:
    """Read every run under `paths` with `tool`'s reader, map each to (arm, seed) and store
    them as experiment `experiment` judged by `hypothesis`."""
    if tool not in IMPORT_TOOLS:
        raise LabcoatError(f"unknown source {tool!r}; choose among {', '.join(IMPORT_TOOLS)}")
    if not paths:
        raise LabcoatError(f"nothing to import: give the {tool} runs' path")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", experiment or ""):
        raise LabcoatError(f"--experiment {experiment!r} may use only letters, digits, '.', "
                           "'_', '-' (and starts with a letter or digit)")
    notes: list[str] = []
    reader = _reader(tool)
    runs = [run for p in paths for run in reader(_absolute(p), notes)]
    runs = _filter(runs, where or [], notes)
    mapped = _map(runs, arm_by, seed_by, notes)
    design = _design_dict(hypothesis, experiment, tool, mapped, runs)
    notes += _metric_notes(runs, mapped, design)
    return _store(tool, experiment, mapped, design, replace, notes, hypothesis.design)


def _absolute(path: str | Path) -> Path:
    """The path as recorded with each trial: absolute. A tracking URI is its path, as
    MLflow reads it: sqlite:///rel.db and sqlite:////abs.db, file:///abs/mlruns."""
    text = str(path)
    for scheme in ("sqlite:///", "file://"):
        if text.startswith(scheme):
            text = text.removeprefix(scheme)
    return Path(text).expanduser().absolute()


def _reader(tool: str):
    if tool == "mlflow":
        from labcoat.runner._import_mlflow import read_mlflow
        return read_mlflow
    if tool == "wandb":
        from labcoat.runner._import_wandb import read_wandb
        return read_wandb
    from labcoat.runner._import_tensorboard import read_tensorboard
    return read_tensorboard


# --- mapping runs to arms and seeds -------------------------------------------------------

def _lookup(run: ExternalRun, key: str, flag: str) -> str | None:
    """The run's value for `key` (exact, or under one of NAMESPACES); None if absent."""
    if key in run.keys:
        return run.keys[key]
    found = {f"{ns}.{key}": run.keys[f"{ns}.{key}"] for ns in NAMESPACES
             if f"{ns}.{key}" in run.keys}
    if len(set(found.values())) > 1:
        named = ", ".join(f"{k}={v!r}" for k, v in found.items())
        raise LabcoatError(f"{flag} {key} is ambiguous for {run.tool} run {run.id} ({run.path}):"
                           f" {named}; name one, e.g. {flag} {next(iter(found))}")
    return next(iter(found.values()), None)


def _keys_table(runs: list[ExternalRun], limit: int = 25) -> str:
    """The keys every run has, the ones that differ between runs first, with their values;
    then the keys most runs have (a sweep's later runs often log one more param)."""
    common = set.intersection(*(set(r.keys) for r in runs)) if runs else set()
    values = {k: sorted({r.keys[k] for r in runs}) for k in common}
    order = sorted(common, key=lambda k: (len(values[k]) == 1, k))
    shown = []
    for key in order[:limit]:
        v = values[key]
        some = ", ".join(repr(_cut(x)) for x in v[:4]) + (", ..." if len(v) > 4 else "")
        shown.append(f"{key} ({len(v)} value{'s' * (len(v) != 1)}: {some})")
    more = f"; and {len(order) - limit} more" if len(order) > limit else ""
    counts = Counter(k for r in runs for k in r.keys if k not in common)
    most = [f"{k} ({n:,} of {len(runs):,} runs)" for k, n in
            sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if 2 * n >= len(runs)]
    also = f". Keys most runs have: {', '.join(most[:10])}" if most else ""
    return ("; ".join(shown) + more if shown else "none") + also


def _cut(value: str, width: int = 24) -> str:
    """A value shortened for a listing, marked when it was: a cut id must not look whole."""
    return value if len(value) <= width else value[:width - 1] + "\u2026"


def _missing(runs: list[ExternalRun], run: ExternalRun, key: str, flag: str, what: str) -> None:
    raise LabcoatError(f"{flag} {key}: {run.tool} run {run.id} ({run.path}) has no key {key!r}."
                       f" Keys every run has, those that differ between runs first: "
                       f"{_keys_table(runs)}. Choose the key that names the {what}")


def _filter(runs: list[ExternalRun], where: list[str], notes: list[str]) -> list[ExternalRun]:
    if not runs:
        raise LabcoatError("no runs found at the given path(s)")
    for condition in where:
        key, sep, want = condition.partition("=")
        if not sep or not key:
            raise LabcoatError(f"--where {condition!r}: write KEY=VALUE, e.g. --where "
                               "experiment=baseline")
        kept = [r for r in runs if _lookup(r, key, "--where") == want]
        if not kept:
            seen = sorted({v for r in runs if (v := _lookup(r, key, "--where")) is not None})
            known = (f"values seen: {', '.join(map(repr, seen[:10]))}" if seen
                     else f"keys every run has: {_keys_table(runs)}")
            raise LabcoatError(f"--where {condition}: no run has {key} = {want!r} ({known})")
        if len(kept) < len(runs):
            notes.append(f"--where {condition}: {len(runs) - len(kept)} of {len(runs)} runs "
                         "left out")
        runs = kept
    return runs


def _map(runs: list[ExternalRun], arm_by: str | None, seed_by: str | None,
         notes: list[str]) -> dict[tuple[str, int], ExternalRun]:
    """(arm, seed) -> run; every run must have both keys and no two runs may share both."""
    for flag, key, what in (("--arm-by", arm_by, "arm (the thing compared)"),
                            ("--seed-by", seed_by, "seed (the replicate)")):
        if not key:
            raise LabcoatError(f"{flag} is missing: name the key whose value is each run's "
                               f"{what}. Keys every run has, those that differ between runs "
                               f"first: {_keys_table(runs)}")
    assert arm_by and seed_by
    mapped: dict[tuple[str, int], ExternalRun] = {}
    names: dict[str, str] = {}
    for run in runs:
        raw_arm = _lookup(run, arm_by, "--arm-by")
        if raw_arm is None:
            _missing(runs, run, arm_by, "--arm-by", "arm (the thing compared)")
        raw_seed = _lookup(run, seed_by, "--seed-by")
        if raw_seed is None:
            _missing(runs, run, seed_by, "--seed-by", "seed (the replicate)")
        arm = _arm_name(raw_arm, run, arm_by)
        if names.setdefault(arm, raw_arm) != raw_arm:
            raise LabcoatError(f"--arm-by {arm_by}: values {names[arm]!r} and {raw_arm!r} both "
                               f"become arm name {arm!r} (arm names keep letters, digits, "
                               "'.', '_', '-'); map by another key")
        seed = _seed(raw_seed, run, seed_by)
        other = mapped.get((arm, seed))
        if other is not None:
            raise LabcoatError(
                f"{run.tool} runs {other.id} ({other.path}) and {run.id} ({run.path}) both map "
                f"to arm {arm!r}{'' if arm == raw_arm else f' ({arm_by} = {raw_arm!r})'} "
                f"seed {seed} (--arm-by {arm_by}, --seed-by {seed_by}); map by "
                f"keys that tell them apart, or keep one with --where. Keys every run has: "
                f"{_keys_table(runs)}")
        mapped[(arm, seed)] = run
    renamed = {a: v for a, v in names.items() if a != v}
    if renamed:
        notes.append("arm names: " + ", ".join(f"{v!r} -> {a}" for a, v in renamed.items()))
    return mapped


def _arm_name(value: str, run: ExternalRun, key: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", value).strip("_")
    if not name:
        raise LabcoatError(f"--arm-by {key}: {run.tool} run {run.id} ({run.path}) has {key} = "
                           f"{value!r}, which names no arm; map by another key")
    return name


def _seed(value: str, run: ExternalRun, key: str) -> int:
    """An integer, possibly written as 3.0 or with a word before it (seed3, s_3)."""
    found = re.fullmatch(r"\s*[A-Za-z_-]*?(-?\d+)(?:\.0*)?\s*", value)
    if found is None:
        raise LabcoatError(f"--seed-by {key}: {run.tool} run {run.id} ({run.path}) has {key} = "
                           f"{value!r}, not an integer seed; map by a key holding the seed")
    return int(found[1])


# --- the design ---------------------------------------------------------------------------

def _design_dict(flags: ImportHypothesis, experiment: str, tool: str,
                 mapped: dict[tuple[str, int], ExternalRun],
                 runs: list[ExternalRun]) -> dict[str, Any]:
    """The analysis part of the design (hypotheses, control, ...) from the file and flags."""
    design = _design_file(flags.design) if flags.design else {}
    hypothesis = dict(design.get("hypothesis") or {})
    given = {"metric": flags.metric, "direction": flags.direction,
             "smallest_effect": flags.smallest_effect, "claim": flags.claim}
    hypothesis.update({k: v for k, v in given.items() if v is not None})
    if flags.control is not None:
        design["control"] = flags.control
    if hypothesis or not design.get("hypotheses"):
        for flag, key in (("--metric", "metric"), ("--direction", "direction")):
            if key not in hypothesis:
                names = _metric_names(runs)
                extra = f" (metrics the runs logged: {names})" if key == "metric" else \
                    " (increase or decrease: which way the variants should move the metric)"
                raise LabcoatError(f"{flag} is missing: the hypothesis needs its {key}{extra}; "
                                   "or give a design file with --design")
        hypothesis.setdefault("claim", f"the variants {hypothesis['direction']} "
                                       f"{hypothesis['metric']} relative to the control")
        design["hypothesis"] = hypothesis
    arms = sorted({arm for arm, _ in mapped})
    if len(arms) < 2:
        raise LabcoatError(f"every run maps to one arm ({arms[0]}): nothing to compare; map by "
                           f"the key that differs between arms. Keys every run has: "
                           f"{_keys_table(runs)}")
    if design.get("control") is None:
        raise LabcoatError(f"--control is missing: name the arm the others are compared with "
                           f"(arms: {', '.join(arms)})")
    for h in [design.get("hypothesis")] + list(design.get("hypotheses") or []):
        metric = (h or {}).get("metric")
        if metric and (h or {}).get("source", "scalar") == "scalar" and \
                not any(metric in r.metrics for r in mapped.values()):
            raise LabcoatError(f"metric {metric!r}: no imported run logged it; metrics the runs "
                               f"logged: {_metric_names(runs)}")
    design["description"] = design.get("description") or \
        f"{len(mapped)} {tool} runs imported by labcoat import"
    return design


def _design_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise LabcoatError(f"--design {path}: cannot read it ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise LabcoatError(f"--design {path}: not valid YAML ({e})") from None
    if not isinstance(data, dict):
        raise LabcoatError(f"--design {path}: expected a mapping with hypothesis: and "
                           f"control: (allowed keys: {', '.join(DESIGN_KEYS)})")
    extra = [k for k in data if k not in DESIGN_KEYS]
    if extra:
        raise LabcoatError(f"--design {path}: {', '.join(map(str, extra))} cannot be set for an "
                           f"import (arms and seeds come from the runs); allowed keys: "
                           f"{', '.join(DESIGN_KEYS)}")
    return dict(data)


def _metric_names(runs: list[ExternalRun], limit: int = 20) -> str:
    names = sorted({m for r in runs for m in r.metrics})
    return ", ".join(names[:limit]) + (f", and {len(names) - limit} more"
                                       if len(names) > limit else "") if names else "none"


def _metric_notes(runs: list[ExternalRun], mapped: dict[tuple[str, int], ExternalRun],
                  design: dict[str, Any]) -> list[str]:
    notes = []
    repeated: dict[str, list[tuple[ExternalRun, int]]] = defaultdict(list)
    for run in mapped.values():
        for metric, count in run.repeated.items():
            repeated[metric].append((run, count))
    for metric, runs_counts in sorted(repeated.items()):  # one line per metric, not per run
        (run, count), more = runs_counts[0], len(runs_counts) - 1
        others = f" (and in {more} more run(s), {sum(c for _, c in runs_counts)} times in all)" \
            if more else ""
        notes.append(f"{run.tool} run {run.id}: {metric} was logged {count} more time(s) at "
                     f"steps already logged{others}; the later value at each step is kept")
    metric = (design.get("hypothesis") or {}).get("metric")
    lacking = [f"{arm}-s{seed}" for (arm, seed), run in mapped.items()
               if metric and metric not in run.metrics]
    if lacking and (design.get("hypothesis") or {}).get("source", "scalar") == "scalar":
        notes.append(f"{len(lacking)} run(s) never logged {metric}: {', '.join(lacking[:10])}; "
                     "the report leaves them out of the verdict")
    return notes


def _full_design(experiment: str, tool: str, analysis: dict[str, Any],
                 arms: list[str], seeds: list[int]) -> str:
    control = analysis.get("control")
    if control not in arms:
        raise LabcoatError(f"--control {control!r} is not an arm of these runs (arms: "
                           f"{', '.join(arms)})")
    body = {k: v for k, v in analysis.items() if k != "control"}
    design = {"name": experiment, **body,
              "command": f"echo 'runs imported from {tool}: labcoat cannot rerun them'",
              "arms": {a: ({"control": True} if a == control else {}) for a in arms},
              "seeds": seeds}
    return yaml.safe_dump(design, sort_keys=False, allow_unicode=True)


# --- the store ----------------------------------------------------------------------------

def _store(tool: str, experiment: str, mapped: dict[tuple[str, int], ExternalRun],
           analysis: dict[str, Any], replace: bool, notes: list[str],
           design_path: Path | None) -> RunsImport:
    db = store.open_store()
    outcomes: dict[str, int] = defaultdict(int)
    try:
        with db.session() as session:
            exp, created = store.import_experiment(session, experiment)
            if not created and exp.design_yaml:
                _same_analysis(experiment, yaml.safe_load(exp.design_yaml), analysis)
            arms = sorted({t.arm for t in exp.trials} | {a for a, _ in mapped})
            seeds = sorted({t.seed for t in exp.trials if t.seed is not None}
                           | {s for _, s in mapped})
            text = _full_design(experiment, tool, analysis, arms, seeds)
            spec.parse_design(text, str(design_path or "the design built from the import flags"))
            exp.design_yaml = text
            runs = [store.RunImport(
                key=f"{arm}-s{seed}", arm=arm, seed=seed,
                params={k: v for k, v in run.keys.items() if k.split(".", 1)[0] in NAMESPACES[:2]},
                source={"tool": tool, "run": run.id, "path": run.path, "points": run.count(),
                        "repeated": dict(run.repeated)},
                metrics=run.metrics) for (arm, seed), run in sorted(mapped.items())]
            for outcome in store.record_run_imports(session, exp, runs, replace=replace):
                outcomes[outcome] += 1
            session.commit()
    finally:
        db.close()
    arms_now: dict[str, list[int]] = defaultdict(list)
    for arm, seed in sorted(mapped):
        arms_now[arm].append(seed)
    return RunsImport(experiment, tool, dict(arms_now), sum(r.count() for r in mapped.values()),
                      dict(outcomes), notes)


def _same_analysis(name: str, recorded: dict[str, Any], analysis: dict[str, Any]) -> None:
    """A later import adds runs; it may not change what the experiment is judged on."""
    control = next((a for a, v in (recorded.get("arms") or {}).items()
                    if (v or {}).get("control")), None)
    before = {k: recorded.get(k) for k in DESIGN_KEYS if k not in ("control", "description")}
    after = {k: analysis.get(k) for k in DESIGN_KEYS if k not in ("control", "description")}
    if before != after or control != analysis.get("control"):
        raise LabcoatError(f"experiment {name!r} was imported with another hypothesis or control "
                           f"({before.get('hypothesis') or before.get('hypotheses')}, control "
                           f"{control}); give the same flags to add runs, or import into a new "
                           "--experiment to judge another hypothesis")
