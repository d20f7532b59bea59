"""`labcoat evals ...`: look at an eval suite; choose a small subset that keeps the ranking.

These verbs parse flags, read the inputs
(suite files, result files, or an experiment's item results from the store)
and call `labcoat.evals`; heavy imports happen inside the commands so
`labcoat --help` stays fast. Every problem ends in one LabcoatError naming
the file or flag and the fix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.cli._common import print_json, store_session
from labcoat.errors import LabcoatError

if TYPE_CHECKING:
    from labcoat.evals import ResultMatrix, SubsetChoice

SUBSET_FORMAT = "labcoat.eval_subset"
SUBSET_VERSION = 1

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Eval suites: check a suite file; choose a small subset that keeps the full suite's "
         "ranking of models and checkpoints.",
)
JsonFlag = Annotated[bool, typer.Option("--json", help="print machine-readable JSON")]


@app.command("show")
def show_command(
    suite: Annotated[Path, typer.Argument(help="items (.jsonl/.csv, or a directory with one "
                                          "file per task) or an lm-eval-harness task .yaml")],
    scorer: Annotated[str | None, typer.Option(
        help="exact_match, multiple_choice, numeric[:TOL] or module:function (default: "
             "multiple_choice when every item has choices, else exact_match)")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Load a suite as the engine would: tasks, item counts, scorer and a first item."""
    from labcoat.evals import load_suite

    loaded = load_suite(suite, scorer)
    tasks = {t: sum(1 for i in loaded.items if i.task == t) for t in loaded.tasks}
    first = loaded.items[0]
    if as_json:
        print_json({"suite": loaded.name, "scorer": loaded.scorer.kind,
                     "metric": loaded.scorer.metric, "delimiter": loaded.delimiter,
                     "items": len(loaded), "tasks": tasks,
                     "first": {"task": first.task, "id": first.id, "input": first.input,
                               "target": first.target, "choices": first.choices}})
        return
    console = Console()
    console.print(f"suite {escape(loaded.name)}: {len(loaded)} items in {len(tasks)} tasks, "
                  f"scored by {loaded.scorer.kind} (metric {loaded.scorer.metric})")
    table = Table("task", "items")
    for task, count in tasks.items():
        table.add_row(escape(task), str(count))
    console.print(table)
    choices = f" choices {list(first.choices)!r}" if first.choices else ""
    console.print(f"first item {escape(first.task)}/{escape(first.id)}: input "
                  f"{escape(repr(first.input))} target {escape(repr(first.target))}"
                  f"{escape(choices)}")


@app.command("subset")
def subset_command(
    sources: Annotated[list[str], typer.Argument(
        help="an experiment (its trials' item results at every step that scored the full "
             "suite, one model per trial and step) or two or more per-item result files, one "
             "per model (any format `labcoat compare` reads)")],
    size: Annotated[int, typer.Option("--size", help="items to keep")],
    folds: Annotated[int, typer.Option(
        "--folds", help="cross-validation folds of models: the reported rank correlations "
        "score each model with items chosen without it")] = 5,
    seed: Annotated[int, typer.Option(help="seed of the folds and the random baseline")] = 0,
    metric: Annotated[str | None, typer.Option(help="score field of result files")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="write the chosen items here (JSON) for in-training evals")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Choose --size items that rank models (or checkpoints) as the full suite does.

    Reports cross-validated Kendall and Spearman against random subsets, and how much
    wider the 95% CIs get.
    """
    from labcoat.evals import choose_subset

    if size < 1:
        raise LabcoatError(f"--size {size} must be >= 1")
    matrix = _matrix(sources, metric)
    try:
        choice = choose_subset(matrix.scores, matrix.tasks, matrix.items, size,
                               models=matrix.models, folds=folds, seed=seed)
    except LabcoatError as e:
        raise LabcoatError(f"{e}" + (f" ({len(matrix.dropped)} more did not score every "
                                     "item)" if matrix.dropped else "")) from None
    data = choice.as_dict() | {"sources": sources, "dropped_models": matrix.dropped}
    if out is not None:
        _write_subset(out, data)
    if as_json:
        print_json(data)
    else:
        _print_subset(choice, matrix, out)


def _matrix(sources: list[str], metric: str | None) -> ResultMatrix:
    from labcoat.evals import result_matrix

    files = [s for s in sources if Path(s).is_file()]
    if files and len(files) != len(sources):
        missing = next(s for s in sources if s not in files)
        raise LabcoatError(f"{missing}: no such file; give one experiment, or result files only")
    if not files:
        if len(sources) != 1:
            raise LabcoatError(f"{sources[0]}: no such file; give one experiment name, or two or "
                               "more per-item result files")
        return result_matrix(_experiment_records(sources[0]))
    from labcoat.evals import load_item_scores

    records = []
    for file in files:
        scores = load_item_scores(file, metric=metric)
        records += [(file, t, i, s) for t, i, s in zip(scores.tasks, scores.items,
                                                        scores.scores.tolist(), strict=True)]
    return result_matrix(records)


def _experiment_records(name: str) -> list[tuple[str, str, str, float]]:
    from labcoat import store

    with store_session() as session:
        exp = store.find_experiment(session, name)
        trials = {t.id: t.key for t in exp.trials}
        return [(f"{trials[row.trial_id]}@{row.step}", row.task, row.item, row.score)
                for row in store.eval_items(session, list(trials)) if row.variant == ""]


def _write_subset(path: Path, data: dict[str, Any]) -> None:
    payload = {"format": SUBSET_FORMAT, "version": SUBSET_VERSION, **data}
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise LabcoatError(f"--out {path}: cannot write ({e.strerror})") from None


def _print_subset(choice: SubsetChoice, matrix: ResultMatrix, out: Path | None) -> None:
    console = Console()
    console.print(f"{choice.size} of {choice.n_items} items "
                  f"({', '.join(f'{escape(t)} {q}' for t, q in choice.quotas.items())}) "
                  f"chosen on {len(choice.models)} models"
                  + (f" ({len(matrix.dropped)} dropped: not every item scored)"
                     if matrix.dropped else ""))
    table = Table("agreement with the full suite's ranking", "Kendall tau", "Spearman rho")
    table.add_row(f"chosen subsets, cross-validated ({len(choice.folds)} folds)",
                  f"{choice.kendall:.3f}", f"{choice.spearman:.3f}")
    table.add_row("random subsets, same quotas (median)", f"{choice.random_kendall:.3f}",
                  f"{choice.random_spearman:.3f}")
    table.add_row("chosen subset, on the models it was chosen on",
                  f"{choice.kendall_in_sample:.3f}", "")
    console.print(table)
    if choice.ci_width_ratio is not None:
        diff = (f"; paired differences x{choice.difference_ci_width_ratio:.2f}"
                if choice.difference_ci_width_ratio is not None else "")
        console.print(f"95% CIs get wider: a model's mean x{choice.ci_width_ratio:.2f}{diff} "
                      "(median over models)")
    for warning in choice.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    if out is not None:
        console.print(f"wrote {escape(str(out))}")


# `harvest`, `regress` and `history` (regression suites) live in their own module; importing
# it registers them on this group.
from labcoat.cli import _evals_harvest  # noqa: E402, F401

# Fresh items, the contamination gap and IRT (issue 35) live in their own module.
from labcoat.cli._fresh import fresh_command, gap_command, irt_command  # noqa: E402

app.command("fresh")(fresh_command)
app.command("gap")(gap_command)
app.command("irt")(irt_command)
