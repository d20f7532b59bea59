"""`labcoat inside EXP --control C --variant V`: which components carry the difference
between two arms (activation patching, attribution screen) and, with --probe, what
each layer encodes (linear probes with selectivity). docs/inside.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from labcoat.cli._common import ExpArg, JsonFlag, console, print_json, store_session

if TYPE_CHECKING:
    from labcoat.inside import InsideResult, Share


def inside(
    experiment: ExpArg,
    control: Annotated[str, typer.Option(
        "--control", metavar="TRIAL|ARM",
        help="the control: a trial key, or an arm (its finished trials, paired by seed)")],
    variant: Annotated[str, typer.Option(
        "--variant", metavar="TRIAL|ARM", help="the variant: a trial key, or an arm")],
    component: Annotated[list[str] | None, typer.Option(
        "--component", "-c", help="a component to patch (repeatable): a found name such as "
        "blocks.0.attn.head2 or blocks.1.mlp, any module path (its output), or PATH:update; "
        "default: the blocks, attention and MLP outputs and heads labcoat finds")] = None,
    verify: Annotated[int | None, typer.Option(
        min=1, help="patch exactly only the N components the attribution screen ranks "
        "highest (default: all)")] = None,
    position: Annotated[int | None, typer.Option(
        help="patch one sequence position only (default: every position)")] = None,
    ig_steps: Annotated[int, typer.Option(
        min=0, help="intervals of the path between the arms' weights on which the screen "
        "integrates its gradient (0: one-pass attribution patching)")] = 4,
    reverse: Annotated[bool, typer.Option(
        help="also patch the control's activations into the variant")] = True,
    probe: Annotated[str | None, typer.Option(
        metavar="LABEL", help="also probe every block's output for this per-item label of "
        "the workload (tinylm: task, answer), with selectivity")] = None,
    workload: Annotated[str | None, typer.Option(
        metavar="MODULE:NAME", help="the workload object (labcoat.inside.Workload); default: "
        "INSIDE of the package the trial's command runs")] = None,
    correction: Annotated[str, typer.Option(
        help="multiple-comparison correction of the verdicts: holm, bh, bonferroni, none")
                          ] = "holm",
    ci: Annotated[float, typer.Option(min=0.5, max=0.999, help="family level")] = 0.95,
    reps: Annotated[int, typer.Option(min=100, help="bootstrap replications")] = 4000,
    seed: Annotated[int, typer.Option(min=0, help="seed of the bootstrap and probes")] = 0,
    influence: Annotated[bool, typer.Option(
        "--influence", help="also trace the eval items that flipped between the arms to the "
        "training examples they lean on (TracIn over each trial's checkpoints) and flag "
        "training examples by self-influence")] = False,
    patching: Annotated[bool, typer.Option(
        help="patch components (--no-patching with --influence: attribution only)")] = True,
    ekfac: Annotated[bool, typer.Option(
        "--ekfac", help="with --influence, also EK-FAC influence (Kronfluence, the inside "
        "extra) at the newest checkpoint")] = False,
    pool: Annotated[int, typer.Option(
        min=0, help="with --influence: training examples scored, a seeded sample of all "
        "(0: all; each costs a gradient per checkpoint)")] = 1000,
    top: Annotated[int, typer.Option(
        min=1, help="with --influence: training examples listed per flipped item")] = 5,
    training_data: Annotated[str | None, typer.Option(
        metavar="MODULE:NAME", help="with --influence: the training examples by index "
        "(labcoat.inside.TrainingData); default: TRAINING_DATA of the trial's package")
                             ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Why the variant differs: patch each component's activation between the control's
    and the variant's models (rebuilt from their newest verified checkpoints) on the eval
    items, with intervals over items and seeds and corrected verdicts."""
    from labcoat.errors import LabcoatError

    if not (patching or influence):  # before importing torch: a bad flag answers at once
        raise LabcoatError("--no-patching leaves nothing to do; add --influence")
    import torch

    from labcoat import analysis
    from labcoat.cli._influence import print_influence, run_influence
    from labcoat.inside import PatchingConfig, ProbeConfig, compare_trials

    config = PatchingConfig(components=component, verify=verify, reverse=reverse,
                            position=position, ig_steps=ig_steps, ci=ci, reps=reps, seed=seed,
                            correction=correction)
    threads = torch.get_num_threads()
    result = attribution = None
    with store_session() as session:
        if patching:
            result = compare_trials(session, experiment, control, variant, config=config,
                                    probe=probe, workload=workload,
                                    probe_config=ProbeConfig(ci=ci, reps=reps, seed=seed))
            # saved for the report's why section (docs/inside.md)
            analysis.save_why(result.experiment, "patching", result.as_dict(),
                              control=control, variant=variant)
        if influence:
            attribution = run_influence(session, experiment, control, variant, ekfac=ekfac,
                                        pool=pool, top=top, max_items=20, seed=seed,
                                        workload=workload, training_data=training_data)
    torch.set_num_threads(threads)
    if as_json:
        print_json((result.as_dict() if result else {})
                   | ({"influence": attribution.as_dict()} if attribution else {}))
        return
    if result is not None:
        print_inside(result)
    if attribution is not None:
        print_influence(attribution)


def _share(s: Share | None) -> str:
    if s is None:
        return "-"
    return f"{s.estimate:.2f} [{s.low:.2f}, {s.high:.2f}]"


def print_inside(result: InsideResult) -> None:
    p = result.patching
    pairs = ", ".join(f"{c.key} vs {v.key}" for c, v in result.pairs)
    d = p.difference
    console.print(f"[bold]{escape(result.experiment)}[/]: {escape(pairs)} "
                  f"({p.items} eval items, {p.seeds} seed pair{'s' * (p.seeds > 1)})")
    console.print(f"{p.metric}: control {p.control:.4g}, variant {p.variant:.4g}; difference "
                  f"{d.estimate:+.4g} [{d.low:+.4g}, {d.high:+.4g}] ({100 * d.ci:g}% CI, "
                  f"{d.method})")
    table = Table(title="share of the difference each component carries", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("component", no_wrap=True)
    for column in ("screen", "forward: V into C", "reverse: C into V", "carries"):
        table.add_column(column)
    for c in p.ranked():
        name = c.name if c.leaf else f"[dim]{c.name}[/]"
        table.add_row(str(c.rank), name, f"{c.attribution:.2f}", _share(c.forward),
                      _share(c.reverse), "yes" if c.carries else "")
    console.print(table)
    console.print(f"[dim]screen: integrated attribution ({p.ig_steps} intervals); Spearman "
                  f"with exact patching {p.agreement:.2f} over {p.family_size} patched "
                  f"exactly, {p.agreement_clear:.2f} over the {p.clear} with a clear effect, "
                  f"{p.agreement_both:.2f} against both directions averaged; top-3 recall "
                  f"{p.top_recall:.2f}. Verdicts: "
                  f"{p.correction} over {p.family_size}; intervals at its level. Dim rows are "
                  "groups whose parts are listed.[/]")
    if result.probes is not None:
        _print_probes(result)
    for note in result.notes + p.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def _print_probes(result: InsideResult) -> None:
    pr = result.probes
    assert pr is not None
    table = Table(title=f"probes for {pr.label!r} ({pr.classes} classes, chance {pr.chance:.2f})",
                  title_justify="left")
    table.add_column("layer", no_wrap=True)
    for column in ("control acc", "control sel.", "variant acc", "variant sel.", "acc V-C",
                   "sel. V-C"):
        table.add_column(column)
    for layer in pr.layers:
        table.add_row(layer.layer, _share(layer.control.accuracy),
                      _share(layer.control.selectivity), _share(layer.variant.accuracy),
                      _share(layer.variant.selectivity), _share(layer.accuracy_difference),
                      _share(layer.selectivity_difference))
    console.print(table)
