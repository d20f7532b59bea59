"""`labcoat rate`: rate many models from battles (Chatbot Arena's columns) or from
per-item results, with Bradley-Terry intervals, Elo beside it, a redundancy-invariant
Nash rating and a redundancy audit (docs/ratings.md).

Every problem with the input ends in one LabcoatError naming the file, line or column.
"""

from __future__ import annotations

import csv
import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from labcoat.cli._common import JsonFlag, console, print_json, strict
from labcoat.errors import LabcoatError

if TYPE_CHECKING:
    from labcoat.stats import Battles

COLUMNS = ("model_a", "model_b", "winner")
WINNERS = ("model_a", "model_b", "tie", "tie (bothbad)")  # Arena's values


class TiesChoice(StrEnum):
    davidson = "davidson"
    half = "half"


def rate(
    sources: Annotated[list[str], typer.Argument(
        help="a battles file (CSV or JSONL with model_a, model_b, winner = model_a | model_b "
             "| tie), or an experiment (its trials' item results), or two or more per-item "
             "result files, one per model (any format `labcoat compare` reads)")],
    cluster: Annotated[str | None, typer.Option(
        help="battles file: column with each prompt's topic (default: 'cluster' if present); "
             "needed for the Nash rating and the audit. Per-item results use the task")] = None,
    prompt: Annotated[str | None, typer.Option(
        help="battles file: column naming the prompt, so the bootstrap resamples prompts "
             "(default: 'question_id' or 'prompt' if present, else each battle)")] = None,
    ties: Annotated[TiesChoice, typer.Option(
        help="davidson: model ties (Davidson 1970); half: a tie is half a win each")
                    ] = TiesChoice.davidson,
    bootstrap: Annotated[int, typer.Option(min=0, help="bootstrap replicates")] = 1000,
    seed: Annotated[int, typer.Option(min=0, help="seed of the bootstrap and Elo orders")] = 0,
    ci: Annotated[float, typer.Option(min=0.5, max=0.999, help="interval level")] = 0.95,
    prior: Annotated[float, typer.Option(min=0.0, help="ridge on Bradley-Terry strengths "
                                         "(0: plain MLE)")] = 0.0,
    orders: Annotated[int, typer.Option(min=1, help="random orders for Elo's spread")] = 100,
    copies: Annotated[int, typer.Option(min=2, help="audit: copies of a duplicated cluster")
                      ] = 10,
    audit: Annotated[bool, typer.Option(help="run the redundancy audit (needs clusters)")
                     ] = True,
    metric: Annotated[str | None, typer.Option(help="score field of result files")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Rate models: Bradley-Terry with bootstrap and rank intervals, Elo and its spread over
    match orders, the Nash rating of the model-vs-cluster game, and how much each moves
    when a cluster is duplicated or dropped."""
    from labcoat import stats

    data, origin, dropped = _load(sources, cluster, prompt, metric)
    try:
        bt = stats.bradley_terry(data, ties=ties.value, prior=prior, bootstrap=bootstrap,
                                 ci=ci, seed=seed)
        el = stats.elo(data, orders=orders, ci=ci, seed=seed)
        nash = stats.nash_rating(data) if data.cluster is not None else None
        found = (stats.redundancy_audit(data, copies=copies, ties=ties.value, prior=prior,
                                        orders=min(orders, 20), seed=seed)
                 if audit and data.cluster is not None else None)
    except ValueError as e:
        raise LabcoatError(f"{origin}: {e}") from None
    out = _summary(origin, data, bt, el, nash, found) | {"dropped_models": dropped}
    if as_json:
        print_json(out)
    else:
        _print(out)


def _load(sources: list[str], cluster: str | None, prompt: str | None,
          metric: str | None) -> tuple[Battles, str, list[str]]:
    """The battles, where they came from, and models left out (per-item results: a model
    that missed items of the common set)."""
    from labcoat import stats

    if len(sources) == 1 and Path(sources[0]).is_file():
        return _read_battles(Path(sources[0]), cluster, prompt), sources[0], []
    if len(sources) == 1 and Path(sources[0]).suffix.lower() in (".csv", ".jsonl", ".json"):
        raise LabcoatError(f"{sources[0]}: no such file; give a battles file (CSV or JSONL)")
    if cluster is not None or prompt is not None:
        raise LabcoatError("--cluster and --prompt name columns of a battles file; per-item "
                           "results use each item as a prompt and its task as the cluster")
    from labcoat.cli._evals import _matrix

    matrix = _matrix(sources, metric)
    if len(matrix.models) < 2:
        raise LabcoatError(f"{' '.join(sources)}: {len(matrix.models)} model(s) scored every "
                           "item; rating needs 2 or more" + (
                               f" ({', '.join(matrix.dropped)} missed items)"
                               if matrix.dropped else ""))
    return stats.battles_from_scores(matrix.scores, matrix.models,
                                     clusters=matrix.tasks), " ".join(sources), matrix.dropped


def _read_battles(path: Path, cluster: str | None, prompt: str | None) -> Battles:
    """Rows of a CSV or JSONL battles file -> coded battles; errors name the line."""
    from labcoat import stats

    rows, fields = (_jsonl(path) if path.suffix.lower() in (".jsonl", ".json")
                    else _csv(path))
    missing = [c for c in COLUMNS if c not in fields]
    if missing:
        raise LabcoatError(f"{path}: missing column(s) {', '.join(missing)}; found: "
                           f"{', '.join(fields) or 'none'}; a battles file needs model_a, "
                           "model_b, winner (Chatbot Arena's columns)"
                           + ("; per-item results need two or more files, one per model"
                              if {"score", "item", "doc_id"} & set(fields) else ""))
    for flag, col in (("--cluster", cluster), ("--prompt", prompt)):
        if col is not None and col not in fields:
            raise LabcoatError(f"{path}: no column {col!r} (given by {flag}); found: "
                               f"{', '.join(fields)}")
    cluster = cluster or ("cluster" if "cluster" in fields else None)
    prompt = prompt or next((c for c in ("question_id", "prompt") if c in fields), None)
    if not rows:
        raise LabcoatError(f"{path}: no battles; add one row per battle")
    for line, row in rows:
        winner = str(row.get("winner", "")).strip()
        if winner not in WINNERS:
            raise LabcoatError(f"{path} line {line}: winner {winner!r} is not one of "
                               f"{', '.join(WINNERS)}; fix the row or remove it")
        a, b = str(row.get("model_a") or "").strip(), str(row.get("model_b") or "").strip()
        if not a or not b or a == b:
            raise LabcoatError(f"{path} line {line}: " + (
                "model_a or model_b is empty" if not a or not b else f"{a!r} plays itself")
                + "; fix the row or remove it")
        for col in (cluster, prompt):
            if col is not None and str(row.get(col) or "").strip() == "":
                raise LabcoatError(f"{path} line {line}: column {col!r} is empty; fill it in "
                                   "or remove the row")
    pick = [r for _, r in rows]
    return stats.battles(
        [str(r["model_a"]).strip() for r in pick], [str(r["model_b"]).strip() for r in pick],
        [str(r["winner"]).strip() for r in pick],
        prompts=None if prompt is None else [str(r[prompt]) for r in pick],
        clusters=None if cluster is None else [str(r[cluster]).strip() for r in pick])


def _csv(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            fields = [f.strip() for f in reader.fieldnames or []]
            rows = []
            for row in reader:
                clean = {(k or "").strip(): v for k, v in row.items()}
                if any(str(v or "").strip() for v in clean.values()):
                    rows.append((reader.line_num, clean))
    except UnicodeDecodeError:
        raise LabcoatError(f"{path} is not a UTF-8 text file; export it as CSV") from None
    except csv.Error as e:
        raise LabcoatError(f"{path}: not a readable CSV ({e}); check quoting") from None
    return rows, fields


def _jsonl(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    rows, fields = [], {}
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise LabcoatError(f"{path} is not a UTF-8 text file") from None
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as e:
            raise LabcoatError(f"{path} line {line}: not JSON ({e.msg}); one object per "
                               "line") from None
        if not isinstance(row, dict):
            raise LabcoatError(f"{path} line {line}: a JSON object per line is needed, got "
                               f"{type(row).__name__}")
        fields.update(dict.fromkeys(row))
        rows.append((line, row))
    return rows, list(fields)


def _summary(origin: str, data: Battles, bt: Any, el: Any, nash: Any,
             found: Any) -> dict[str, Any]:
    models = []
    for i in bt.rank.argsort():
        models.append({
            "model": bt.models[i], "games": int(bt.games[i]), "rank": int(bt.rank[i]),
            "rank_low": int(bt.rank_low[i]), "rank_high": int(bt.rank_high[i]),
            "bradley_terry": {"rating": float(bt.rating[i]), "low": strict(float(bt.low[i])),
                              "high": strict(float(bt.high[i])),
                              "strength": float(bt.strength[i])},
            "elo": {"rating": float(el.rating[i]), "mean": float(el.mean[i]),
                    "low": float(el.low[i]), "high": float(el.high[i])},
            "nash": None if nash is None else {"rating": float(nash.ratings[i]),
                                               "mix": float(nash.model_mix[i])}})
    audit = None if found is None else {"copies": found.copies, "rows": [
        {"change": r.change, "cluster": r.cluster,
         **{f"shift_{k}": None if v is None else dict(zip(found.models, v.tolist(),
                                                         strict=True))
            for k, v in (("bt", r.shift_bt), ("elo", r.shift_elo), ("nash", r.shift_nash))}}
        for r in found.rows]}
    return {"source": origin, "battles": len(data.a), "davidson_nu": bt.tie, "ci": bt.ci,
            "bootstrap": bt.bootstrap, "elo_orders": el.orders,
            "clusters": data.clusters, "models": models, "audit": audit}


def _print(out: dict[str, Any]) -> None:
    level = f"{out['ci']:.0%}"
    console.print(f"[bold]{escape(out['source'])}[/]: {out['battles']} battles, "
                  f"{len(out['models'])} models" + (f", {len(out['clusters'])} clusters"
                                                   if out["clusters"] else ""))
    table = Table(title="ratings: Elo scale; Elo in file order and its range over random "
                        "orders; Nash: score rate - 0.5 against the cluster mix")
    for col in ("rank", "model", f"Bradley-Terry [{level} CI]", "rank CI", "Elo",
                f"Elo, {out['elo_orders']} orders", "Nash", "games"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for m in out["models"]:
        b, e, n = m["bradley_terry"], m["elo"], m["nash"]
        ci = "" if b["low"] is None else f" [{b['low']:.0f}, {b['high']:.0f}]"
        table.add_row(str(m["rank"]), escape(m["model"]), f"{b['rating']:.0f}{ci}",
                      f"{m['rank_low']}-{m['rank_high']}", f"{e['rating']:.0f}",
                      f"{e['low']:.0f}-{e['high']:.0f}",
                      "-" if n is None else f"{n['rating']:+.3f}", str(m["games"]))
    console.print(table)
    if out["dropped_models"]:
        console.print(f"[yellow]warning:[/] left out (did not score every item): "
                      f"{escape(', '.join(out['dropped_models']))}")
    if out["audit"] is None:
        console.print("[dim]no clusters: give --cluster COLUMN for the Nash rating and the "
                      "redundancy audit[/]")
        return
    audit = Table(title=f"redundancy audit: largest change of any model's rating when a "
                        f"cluster is copied {out['audit']['copies']}x or dropped")
    for col in ("cluster", "change", "Bradley-Terry", "Elo", "Nash"):
        audit.add_column(col, justify="left" if col in ("cluster", "change") else "right")
    for r in out["audit"]["rows"]:
        cells = [("-" if r[k] is None else fmt.format(max(abs(v) for v in r[k].values())))
                 for k, fmt in (("shift_bt", "{:.1f}"), ("shift_elo", "{:.1f}"),
                                ("shift_nash", "{:.2g}"))]
        audit.add_row(escape(r["cluster"]), r["change"], *cells)
    console.print(audit)
