"""Outcomes (`_harvest.Outcome`) and item texts from where labcoat finds them.

- The store: every trial's per-item scores (`run.log_items`), chosen by trial key, arm
  and step; the model is "EXP/ARM@STEP" (a checkpoint of an arm) and each trial (seed) one
  answer of it. The commit is the one the runner recorded at launch (provenance).
- Inputs recorded with crashes or guard alerts: labcoat records no model input by itself
  (a crash keeps its exit code and stderr, a guard alert its evidence: row indices,
  counts, statistics; `data.eval_leak` names rows, not their text). What a trial records
  is harvested: an event whose data has an `input` string (``run.event("crash.input",
  level="error", input=prompt, target=expected, task=..., item=...)``) or an alert whose
  evidence has one. Such an input is a failure without a score.
- Logs: Inspect AI logs (.eval, .json; each epoch one answer, the sample's input, target
  and choices as its text, the log's model and git commit as provenance) and
  lm-eval-harness samples (the first request's context as input, its target; one answer
  per document).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from labcoat.errors import LabcoatError
from labcoat.evals._eval_items import EvalItem
from labcoat.evals._harvest import Outcome

Texts = dict[tuple[str, str], EvalItem]


# --- the store ----------------------------------------------------------------------


def select_trials(experiment: Any, *, trials: Sequence[str] = (), arm: str | None = None
                  ) -> list[Any]:
    """The experiment's trials named by key (all if none), of `arm` if given."""
    from labcoat import store

    chosen = [store.find_trial(experiment, key) for key in trials] or list(experiment.trials)
    if arm is not None:
        arms = sorted({t.arm for t in experiment.trials})
        if arm not in arms:
            raise LabcoatError(f"experiment {experiment.name!r} has no arm {arm!r} "
                               f"(arms: {', '.join(arms)})")
        chosen = [t for t in chosen if t.arm == arm]
        if not chosen:
            raise LabcoatError(f"none of the trials {', '.join(trials)} is of arm {arm!r}")
    return chosen


def store_outcomes(session: Any, experiment: Any, trials: list[Any], *,
                   steps: Sequence[int] = (), last: bool = False) -> list[Outcome]:
    """Per-item scores of `trials` (default variant) at `steps` (all if empty; each
    trial's last eval step if `last`)."""
    from labcoat import store

    rows = [r for r in store.eval_items(session, [t.id for t in trials]) if r.variant == ""]
    if not rows:
        raise LabcoatError(f"experiment {experiment.name!r}: the chosen trials logged no "
                           "per-item eval results (run.log_items); nothing to harvest")
    have = sorted({r.step for r in rows})
    if steps:
        missing = [s for s in steps if s not in have]
        if missing:
            raise LabcoatError(f"experiment {experiment.name!r}: no item results at step "
                               f"{missing[0]} (steps with items: "
                               f"{', '.join(map(str, have[-12:]))})")
        rows = [r for r in rows if r.step in set(steps)]
    if last:
        final = {}
        for r in rows:
            final[r.trial_id] = max(final.get(r.trial_id, r.step), r.step)
        rows = [r for r in rows if r.step == final[r.trial_id]]
    by_id = {t.id: t for t in trials}
    commits = {t.id: trial_commit(session, t) for t in trials}
    return [Outcome(task=r.task, item=r.item, score=r.score,
                    model=f"{experiment.name}/{by_id[r.trial_id].arm}@{r.step}",
                    sample=by_id[r.trial_id].key, step=r.step, seed=by_id[r.trial_id].seed,
                    experiment=experiment.name, trial=by_id[r.trial_id].key,
                    arm=by_id[r.trial_id].arm, commit=commits[r.trial_id], source="store")
            for r in rows if r.score is not None]


def trial_commit(session: Any, trial: Any) -> str | None:
    """The git commit the runner recorded for the trial's last attempt, if any."""
    from labcoat import store

    recorded = store.provenance(session, trial)
    if not recorded:
        return None
    code = recorded[-1][1].get("code") or {}
    return code.get("commit") if isinstance(code, dict) else None


def recorded_inputs(session: Any, experiment: Any, trials: list[Any]
                    ) -> tuple[list[Outcome], Texts]:
    """Inputs recorded with events and guard alerts of `trials` (see the module doc)."""
    from labcoat import store

    by_id = {t.id: t for t in trials}
    outcomes, texts = [], {}
    found = [(e.trial_id, e.step, f"event:{e.kind}", e.data) for e in
             store.events(session, list(by_id))]
    found += [(a.trial_id, a.step, f"alert:{a.rule}", a.evidence) for a in
              store.alerts(session, list(by_id))]
    for trial_id, step, source, data in found:
        if not isinstance(data, dict) or not isinstance(data.get("input"), str) \
                or not data["input"].strip():
            continue
        trial = by_id[trial_id]
        text = data["input"]
        task = str(data.get("task") or "recorded")
        item = str(data.get("item") or "input-" + hashlib.sha256(
            text.encode("utf-8")).hexdigest()[:12])
        target = data.get("target")
        texts.setdefault((task, item), EvalItem(task=task, id=item, input=text,
                                                target="" if target is None else str(target)))
        outcomes.append(Outcome(task=task, item=item, score=None,
                                model=f"{experiment.name}/{trial.arm}@{step}",
                                sample=trial.key, step=step, seed=trial.seed,
                                experiment=experiment.name, trial=trial.key, arm=trial.arm,
                                commit=trial_commit(session, trial), source=source))
    return outcomes, texts


# --- logs -------------------------------------------------------------------------


def log_outcomes(path: str | Path, *, metric: str | None = None,
                 filter: str | None = None) -> tuple[list[Outcome], Texts]:  # noqa: A002
    """Outcomes and texts of an Inspect log, lm-eval-harness samples, a labcoat per-item
    result file, or a directory of logs."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and (
            p.suffix == ".eval" or (p.name.startswith("samples_") and
                                    p.name.removesuffix(".gz").endswith(".jsonl"))
            or (p.suffix == ".json" and _is_inspect(p))))
        if not files:
            raise LabcoatError(f"{path}: no Inspect logs and no lm-eval-harness "
                               "samples_<task>_<time>.jsonl files in this directory")
        outcomes, texts = [], {}
        for file in files:
            more, found = log_outcomes(file, metric=metric, filter=filter)
            outcomes += more
            texts.update(found)
        return outcomes, texts
    if not path.exists():
        raise LabcoatError(f"{path}: no such file or directory")
    if path.suffix == ".eval" or (path.suffix == ".json" and _is_inspect(path)):
        return _inspect(path, metric)
    from labcoat.evals._importers import load_item_scores

    scores = load_item_scores(path, metric=metric, filter=filter)
    texts = _lm_eval_texts(path) if scores.format == "lm-eval-harness" else {}
    model = path.parent.name if scores.format == "lm-eval-harness" else path.stem
    outcomes = [Outcome(task=t, item=i, score=float(s), model=model, sample=str(path),
                        source=str(path))
                for t, i, s in zip(scores.tasks, scores.items, scores.scores.tolist(),
                                   strict=True)]
    return outcomes, {(t, i): replace(texts[i], task=t) for t, i in scores.keys()
                      if i in texts} | _generic_texts(path, scores.format)


def _is_inspect(path: Path) -> bool:
    from labcoat.evals._inspect_logs import is_inspect_json

    try:
        return is_inspect_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False


def _inspect(path: Path, metric: str | None) -> tuple[list[Outcome], Texts]:
    from labcoat.evals._inspect_logs import _only_scorer, _read_zip, _value

    if path.suffix == ".eval":
        header, samples = _read_zip(path)
    else:
        header = json.loads(path.read_text(encoding="utf-8"))
        samples = [(f"{path}[sample {i}]", s) for i, s in enumerate(header.get("samples") or [])]
    if not samples:
        raise LabcoatError(f"{path}: an Inspect log without samples; re-run with samples")
    metric = metric or _only_scorer(path, samples)
    info = header.get("eval") or {}
    task = str(info.get("task") or path.stem)
    model = str(info.get("model") or path.stem)
    commit = ((info.get("revision") or {}).get("commit")
              if isinstance(info.get("revision"), dict) else None)
    outcomes, texts = [], {}
    for where, sample in samples:
        if not isinstance(sample, dict) or "id" not in sample:
            raise LabcoatError(f"{where}: not an Inspect sample (no 'id')")
        item = str(sample["id"])
        value = _value(sample.get("scores") or {}, metric, where)
        texts.setdefault((task, item), EvalItem(
            task=task, id=item, input=_message_text(sample.get("input")),
            target=_joined(sample.get("target")),
            choices=tuple(map(str, sample["choices"])) if sample.get("choices") else None))
        if value is None:
            continue
        outcomes.append(Outcome(task=task, item=item, score=value, model=model,
                                sample=f"epoch {sample.get('epoch', 1)}", commit=commit,
                                source=str(path)))
    return outcomes, texts


def _message_text(value: Any) -> str:
    """An Inspect input: a string, or chat messages (their text contents, joined)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for message in value:
            content = message.get("content") if isinstance(message, dict) else message
            if isinstance(content, list):
                content = " ".join(str(c.get("text", "")) for c in content
                                   if isinstance(c, dict))
            parts.append(str(content or ""))
        return "\n".join(parts)
    return "" if value is None else str(value)


def _joined(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(map(str, value))
    return "" if value is None else str(value)


def _lm_eval_texts(path: Path) -> dict[str, EvalItem]:
    """doc_id -> text of an lm-eval-harness samples file: the first request's context
    (`arguments`: [[context, continuation], ...] or {"gen_args_0": {"arg_0": ...}}) and
    the target; loglikelihood requests with several continuations are the choices."""
    from labcoat.evals._importers import _jsonl_rows, _read_text

    texts = {}
    for _, row in _jsonl_rows(_read_text(path), path):
        doc = str(row.get("doc_id"))
        if doc in texts:
            continue
        args = row.get("arguments")
        requests = list(args.values()) if isinstance(args, dict) else (args or [])
        pairs = [list(r.values()) if isinstance(r, dict) else list(r) for r in requests]
        context = str(pairs[0][0]) if pairs and pairs[0] else ""
        continuations = [str(p[1]) for p in pairs if len(p) > 1 and isinstance(p[1], str)]
        texts[doc] = EvalItem(task="", id=doc, input=context, target=_joined(row.get("target")),
                              choices=tuple(continuations) if len(continuations) > 1 else None)
    return texts


def _generic_texts(path: Path, fmt: str) -> Texts:
    """Texts in a labcoat result file that also carries `input` (and `target`) fields."""
    if fmt not in ("jsonl", "json"):
        return {}
    from labcoat.evals._importers import ITEM_KEYS, _json_rows, _jsonl_rows, _read_text

    text = _read_text(path)
    rows = _jsonl_rows(text, path) if fmt == "jsonl" else _json_rows(text, path)
    out = {}
    for _, row in rows:
        key = next((k for k in ITEM_KEYS if k in row), None)
        if key is None or not isinstance(row.get("input"), str):
            continue
        task, item = str(row.get("task") or "-"), str(row[key])
        out[(task, item)] = EvalItem(task=task, id=item, input=row["input"],
                                     target=str(row.get("target") or ""))
    return out
