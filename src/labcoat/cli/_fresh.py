"""`labcoat evals fresh | gap | irt`: fresh items, the contamination gap, adaptive items.

`fresh` writes items from templates (or tinylm's task generators) with their seeds; `gap`
compares one model's scores on originals and on their fresh twins, paired; `irt` fits a
2PL model to per-item results of several models and picks the items that measure them.
The verbs parse flags and call `labcoat.evals` / `labcoat.stats`; every problem with the
inputs ends in one LabcoatError naming the file or flag and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.cli._common import print_json
from labcoat.errors import LabcoatError

if TYPE_CHECKING:
    from labcoat.evals import ContaminationGap, EvalItem

JsonFlag = Annotated[bool, typer.Option("--json", help="print machine-readable JSON")]


def fresh_command(
    out: Annotated[Path, typer.Option("--out", help="write the items here (.jsonl, a labcoat "
                                      "eval suite with each item's seed and slots)")],
    templates: Annotated[Path | None, typer.Argument(
        help="template file (.yaml/.json; see docs/fresh-items.md); leave out with --tinylm")
    ] = None,
    twins: Annotated[int, typer.Option("--twins", help="fresh twins per original item")] = 1,
    seed: Annotated[int, typer.Option(help="seed every item's own seed derives from")] = 0,
    distractors: Annotated[int, typer.Option(
        help="irrelevant clauses to insert per item (templates)")] = 0,
    magnitude: Annotated[float, typer.Option(
        help="stretch integer slot ranges upwards by this factor (templates; >= 1)")] = 1.0,
    shuffle: Annotated[bool, typer.Option(
        "--shuffle/--no-shuffle", help="shuffle multiple-choice options (templates)")] = True,
    originals: Annotated[bool, typer.Option(
        "--originals/--no-originals", help="write the original items too")] = True,
    tinylm: Annotated[bool, typer.Option(
        "--tinylm", help="twins of tinylm's eval set (needs torch) instead of templates")
    ] = False,
    items: Annotated[int, typer.Option(
        "--items", help="tinylm: eval items per task (its fixed eval set's first N)")] = 20,
    task: Annotated[list[str] | None, typer.Option(
        "--task", help="tinylm: only this task (repeat for more)")] = None,
    knob: Annotated[list[str] | None, typer.Option(
        "--knob", help="tinylm: NAME=VALUE, new items at this difficulty instead of twins "
        "(e.g. length=12; repeat for more)")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Write fresh eval items (new numbers, names, clauses; labels computed), with seeds.

    From templates (slots re-drawn, irrelevant clauses added, options shuffled, the answer
    recomputed by code) or from tinylm's task generators (isomorphic twins of its eval set,
    or new items at chosen difficulty knobs). Every item records its seed.
    """
    from labcoat.evals import Difficulty, write_items

    if twins < 0 or (twins == 0 and not originals):
        raise LabcoatError(f"--twins {twins}: give 1 or more (0 only with --originals)")
    if tinylm:
        if templates is not None:
            raise LabcoatError("give a template file or --tinylm, not both")
        generated, n_original = _tinylm_items(items, twins, seed, task or [], knob or [],
                                              originals)
    else:
        if templates is None:
            raise LabcoatError("give a template file (see docs/fresh-items.md) or --tinylm")
        if task or knob:
            raise LabcoatError("--task and --knob are for --tinylm; templates take "
                               "--distractors, --magnitude and --shuffle")
        from labcoat.evals import fresh_items, load_templates

        difficulty = Difficulty(distractors=distractors, magnitude=magnitude, shuffle=shuffle)
        suite = load_templates(templates)
        generated = fresh_items(suite, twins, seed, difficulty, originals=originals)
        n_original = len(suite.templates) if originals else 0
    written = write_items(generated, out)
    kinds = {"original": n_original, "fresh": written - n_original}
    summary = {"out": str(out), "items": written, **kinds, "seed": seed,
               "tasks": sorted({i.task for i in generated})}
    if as_json:
        print_json(summary)
        return
    Console().print(f"wrote {written} items ({kinds['original']} original, {kinds['fresh']} "
                    f"fresh) in {len(summary['tasks'])} tasks to {escape(str(out))}; each "
                    "records its seed, slots and knobs")


def _tinylm_items(n: int, k: int, seed: int, tasks: list[str], knobs: list[str],
                  originals: bool) -> tuple[list[EvalItem], int]:
    """(items, how many are originals): tinylm's eval set and twins, or new items."""
    try:
        from labcoat.workloads import tinylm
    except ImportError:
        raise LabcoatError("--tinylm needs torch: pip install 'labcoat[torch]'") from None
    chosen = tuple(tasks) or tuple(tinylm.TASKS)
    unknown = [t for t in chosen if t not in tinylm.TASKS]
    if unknown:
        raise LabcoatError(f"--task {unknown[0]}: no such tinylm task; choose from "
                           f"{', '.join(tinylm.TASKS)}")
    if n < 1:
        raise LabcoatError(f"--items {n}: give 1 or more")
    if knobs:
        values = {}
        for spec in knobs:
            name, sep, value = spec.partition("=")
            if not sep or not value.strip().lstrip("-").isdigit():
                raise LabcoatError(f"--knob {spec!r}: write NAME=INTEGER, e.g. length=12")
            values[name.strip()] = int(value)
        out = []
        for t in chosen:
            out += tinylm.fresh_examples(t, n, seed, **values)
        return [f.eval_item() for f in out], 0
    eval_set = tinylm.make_eval_set(n, chosen)
    found = list(tinylm.eval_suite(eval_set).items) if originals else []
    n_original = len(found)
    if k:
        found += [f.eval_item() for f in tinylm.fresh_twins(eval_set, k, seed)]
    return found, n_original


def gap_command(
    original: Annotated[Path, typer.Argument(
        help="one model's per-item scores on the original items (any format `labcoat "
             "compare` reads)")],
    fresh: Annotated[Path, typer.Argument(
        help="the same model's per-item scores on the fresh twins (ids <original id>~<j>)")],
    items: Annotated[Path | None, typer.Option(
        "--items", help="the fresh items file (`labcoat evals fresh --out`): its 'parent' "
        "fields pair twins with originals, whatever their ids")] = None,
    metric: Annotated[str | None, typer.Option(help="score field of result files")] = None,
    ci: Annotated[float, typer.Option(help="confidence level")] = 0.95,
    as_json: JsonFlag = False,
) -> None:
    """Contamination gap: score on original items minus score on their fresh twins, paired.

    One model's per-item scores on the originals and on their fresh isomorphic twins; the
    gap gets a paired CI and a verdict line (memorized originals score higher).
    """
    from labcoat.evals import gap_from_scores, load_item_scores

    if not 0 < ci < 1:
        raise LabcoatError(f"--ci {ci}: give a level between 0 and 1, e.g. 0.95")
    first, second = (load_item_scores(p, metric=metric) for p in (original, fresh))
    parents = _parents(items) if items is not None else None
    gap = gap_from_scores(_by_key(first), _by_key(second), parents, ci=ci)
    if as_json:
        print_json(gap.as_dict() | {"original_scores": str(original),
                                    "fresh_scores": str(fresh)})
        return
    _print_gap(gap, Console())


def _by_key(scores: Any) -> dict[tuple[str, str], float]:
    return {(t, i): float(s) for t, i, s in zip(scores.tasks, scores.items,
                                                scores.scores.tolist(), strict=True)}


def _parents(path: Path) -> dict[tuple[str, str], str]:
    from labcoat.evals import load_eval_items

    found = {(i.task, i.id): str(i.metadata["parent"]) for i in load_eval_items(path)
             if i.metadata.get("parent")}
    if not found:
        raise LabcoatError(f"--items {path}: no item has a 'parent' field; give the file "
                           "`labcoat evals fresh --out` wrote")
    return found


def _print_gap(gap: ContaminationGap, console: Console) -> None:
    colour = {"gap": "red", "fresh-easier": "yellow", "no-gap": "green"}[gap.decision]
    console.print(f"[{colour}]{escape(gap.line)}[/]")
    table = Table("task", "items", "original", "fresh", "gap", f"{gap.difference.ci:.0%} CI")
    for t in gap.tasks:
        d = t.difference
        table.add_row(escape(t.task), str(t.items), f"{t.original:.3f}", f"{t.fresh:.3f}",
                      "" if d is None else f"{d.estimate:+.3f}",
                      "" if d is None else f"{d.low:+.3f} to {d.high:+.3f}")
    console.print(table)
    if gap.unpaired:
        console.print(f"{len(gap.unpaired)} original items have no scored twin and were left "
                      "out")


def irt_command(
    sources: Annotated[list[str], typer.Argument(
        help="an experiment (each trial and step that scored the full suite is one model) or "
             "two or more per-item result files, one per model")],
    adaptive: Annotated[int, typer.Option(
        "--adaptive", help="also estimate each model from this many adaptive items (chosen "
        "one by one at its current ability, answered from its stored results)")] = 0,
    select: Annotated[int, typer.Option(
        "--select", help="choose this many items, the most informative about these models' "
        "abilities (about half right), for --out")] = 0,
    out: Annotated[Path | None, typer.Option(
        "--out", help="write the --select items here (an eval subset file, as `labcoat evals "
        "subset --out`, for in-training evals)")] = None,
    metric: Annotated[str | None, typer.Option(help="score field of result files")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Fit a 2PL IRT model to per-item 0/1 results of several models; pick adaptive items.

    Item difficulty and discrimination, each model's ability with its SE (marginal maximum
    likelihood), abilities from a few adaptive items, and the items most informative about
    these models (about half right) for a small subset.
    """
    import numpy as np

    from labcoat import stats
    from labcoat.cli._evals import _matrix, _write_subset

    if (select > 0) != (out is not None):
        raise LabcoatError("--select N and --out FILE go together")
    if adaptive < 0 or select < 0:
        raise LabcoatError("--adaptive and --select take a number of items >= 1")
    matrix = _matrix(sources, metric)
    scores = matrix.scores
    if len(matrix.models) < 2:
        raise LabcoatError(f"IRT needs the results of two or more models (or checkpoints) on "
                           f"the same items; got {len(matrix.models)}")
    if not np.all((scores == 0) | (scores == 1)):
        raise LabcoatError("IRT needs 0/1 item scores (correct or not); these results have "
                           "other values: threshold them first")
    keep = stats.informative_items(scores)
    if keep.sum() < 2:
        raise LabcoatError(f"only {int(keep.sum())} items separate these {len(matrix.models)} "
                           "models (every other item all right or all wrong); add models")
    fit = stats.fit_2pl(scores[:, keep])
    tasks = [t for t, k in zip(matrix.tasks, keep, strict=True) if k]
    names = [i for i, k in zip(matrix.items, keep, strict=True) if k]
    if adaptive > fit.n_items or select > fit.n_items:
        raise LabcoatError(f"--adaptive/--select {max(adaptive, select)}: only {fit.n_items} "
                           "informative items")
    models = []
    for m, model in enumerate(matrix.models):
        row: dict[str, Any] = {"model": model, "ability": float(fit.ability[m]),
                               "se": float(fit.ability_se[m]),
                               "mean_score": float(scores[m].mean())}
        if adaptive:
            answers = scores[m, keep]
            test = stats.adaptive_test(fit, lambda j, a=answers: a[j], adaptive)
            row |= {"adaptive": test.ability.theta, "adaptive_se": test.ability.se}
        models.append(row)
    item_rows = [{"task": t, "item": i, "discrimination": float(a), "difficulty": float(b),
                  "discrimination_se": float(sa), "difficulty_se": float(sb)}
                 for t, i, a, b, sa, sb in zip(tasks, names, fit.discrimination,
                                               fit.difficulty, fit.discrimination_se,
                                               fit.difficulty_se, strict=True)]
    data: dict[str, Any] = {"method": fit.method, "converged": fit.converged,
                            "models": models, "items": item_rows,
                            "dropped_items": int((~keep).sum()),
                            "dropped_models": matrix.dropped}
    if select:
        chosen = stats.select_items(fit, fit.ability, select)
        data["selected"] = [{"task": tasks[j], "item": names[j]} for j in chosen]
        assert out is not None  # checked above: --select goes with --out
        _write_subset(out, {"items": data["selected"], "size": select, "method": "irt",
                            "sources": sources})
        data["out"] = str(out)
    if as_json:
        print_json(data)
        return
    _print_irt(data, Console(), adaptive)


def _print_irt(data: dict[str, Any], console: Console, adaptive: int) -> None:
    items = data["items"]
    console.print(f"2PL fit ({escape(data['method'])}) on {len(items)} items x "
                  f"{len(data['models'])} models"
                  + (f"; {data['dropped_items']} items every model got right or wrong were "
                     "left out" if data["dropped_items"] else ""))
    table = Table("model", "mean score", "ability (logits)", "SE",
                  *([f"{adaptive} adaptive items", "SE"] if adaptive else []))
    for row in data["models"]:
        table.add_row(escape(row["model"]), f"{row['mean_score']:.3f}", f"{row['ability']:+.2f}",
                      f"{row['se']:.2f}",
                      *([f"{row['adaptive']:+.2f}", f"{row['adaptive_se']:.2f}"]
                        if adaptive else []))
    console.print(table)
    a = [i["discrimination"] for i in items]
    b = [i["difficulty"] for i in items]
    console.print(f"items: discrimination {min(a):.2f} to {max(a):.2f}, difficulty "
                  f"{min(b):+.2f} to {max(b):+.2f}")
    if data.get("out"):
        console.print(f"wrote {len(data['selected'])} items to {escape(data['out'])}")
