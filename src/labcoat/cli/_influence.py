"""`labcoat inside ... --influence`: the items that flipped between the arms, traced to the
training examples they lean on (TracIn over each trial's checkpoints, EK-FAC with
--ekfac), and the training examples self-influence flags. docs/inside.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from labcoat.cli._common import console

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from labcoat.inside import InfluenceResult


def run_influence(session: Session, experiment: str, control: str, variant: str, *,
                  ekfac: bool, pool: int, top: int, max_items: int, seed: int,
                  workload: str | None, training_data: str | None) -> InfluenceResult:
    """`inside.attribute_flips` with the flags' settings, saved for the report's why
    section (`analysis.save_why`)."""
    from labcoat import analysis
    from labcoat.inside import InfluenceConfig, attribute_flips

    config = InfluenceConfig(methods=("tracin", "ekfac") if ekfac else ("tracin",), pool=pool,
                             top=top, max_items=max_items, seed=seed)
    result = attribute_flips(session, experiment, control, variant, config=config,
                             workload=workload, training_data=training_data)
    analysis.save_why(result.experiment, "influence", result.as_dict(), control=control,
                      variant=variant)
    return result


def print_influence(result: InfluenceResult) -> None:
    console.print(f"[bold]training-data attribution[/]: {result.flipped} eval item(s) flipped "
                  f"between {escape(result.control)} and {escape(result.variant)} "
                  f"({', '.join(result.methods)})")
    for t in result.trials:
        console.print(f"{t.role} trial {escape(t.trial)}: TracIn over checkpoints at steps "
                      f"{', '.join(map(str, t.checkpoints))}; {t.pool} of {t.training_size} "
                      "training examples scored")
        if t.items:
            table = Table(title_justify="left", title=f"{t.trial}: flipped items, top "
                          "proponent and opponent")
            for column in ("item", "C", "V", "method", "proponent", "opponent"):
                table.add_column(column)
            for item in t.items:
                for method in item.proponents:
                    table.add_row(escape(item.item), f"{item.control:g}", f"{item.variant:g}",
                                  method, _example(item.proponents[method]),
                                  _example(item.opponents[method]))
            console.print(table)
        if t.flagged:
            flags = "; ".join(f"#{e.index} {escape(e.text)} ({e.score:.3g})"
                              for e in t.flagged[:3])
            console.print(f"  highest self-influence (median {t.self_influence_median:.3g}): "
                          f"{flags}")
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def _example(examples: list[Any]) -> str:
    if not examples:
        return "-"
    e = examples[0]
    return f"#{e.index} {escape(e.text)} ({e.score:.3g})"
