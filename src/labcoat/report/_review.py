"""Rendering of `labcoat lint` findings and `labcoat plan` tables."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from labcoat.report._status import print_wide
from labcoat.review import Candidate, Finding, Plan

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def print_findings(findings: list[Finding], console: Console) -> None:
    if not findings:
        console.print("[green]no findings[/]: the design looks sound")
        return
    for f in findings:
        style = SEVERITY_STYLE[f.severity]
        console.print(f"{escape(f.where)}: [{style}]{f.severity}[/] {escape(f'[{f.rule}]')} "
                      f"{escape(f.message)}", soft_wrap=True)
        if f.fix:
            console.print(f"    fix: {escape(f.fix)}", soft_wrap=True, highlight=False)
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITY_STYLE}
    console.print(", ".join(f"{n} {s}(s)" for s, n in counts.items() if n))


def print_plan(plan: Plan, console: Console) -> None:
    console.print(f"[bold]Plan for {escape(plan.design)}[/] ({plan.seeds} seeds per arm as "
                  "designed; 80% power, two-sided, for the analysis the report will run)",
                  soft_wrap=True)
    for h in plan.hypotheses:
        effect = f"smallest effect {h.smallest_effect:g}" if h.smallest_effect else (
            "no smallest effect declared")
        kind = "SD of per-seed differences" if h.paired else "per-seed SD"
        console.print(f"\n[bold]{escape(h.id)}[/] ({escape(h.metric)}, {effect}); {kind}: "
                      + (f"{h.sd:.3g} from {escape(h.sd_source)}" if h.sd
                         else escape(h.sd_source)), soft_wrap=True)
        if h.analysis:
            console.print(f"  planned for: {escape(h.analysis)}", soft_wrap=True)
        if h.seeds_needed:
            console.print(f"  recommended: {h.seeds_needed} seeds per arm", soft_wrap=True)
        if h.items_needed:
            console.print(f"  recommended: {h.items_needed} eval items per task (item-difference"
                          f" variance {h.omega2:.3g})", soft_wrap=True)
        if h.information is not None:
            console.print(f"  expected information: {h.information:.2f} bits of at most 1 "
                          f"(prior {h.prior:g}, power {h.power:.2f}; docs/ledger.md)",
                          soft_wrap=True)
        elif h.prior is not None:
            console.print(f"  expected information: {escape(h.information_note)}",
                          soft_wrap=True)
        if h.mde_by_seeds:
            console.print(_mde_table("seeds per arm", h.mde_by_seeds))
        if h.mde_by_items:
            console.print(_mde_table("eval items per task", h.mde_by_items))
    if plan.factorial is not None:
        console.print(f"\n[bold]Testing the interventions together[/]: "
                      f"{escape(plan.factorial.summary)}", soft_wrap=True)
    console.print(f"compute: {plan.cost:g} {escape(plan.cost_unit)}", soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {escape(note)}", soft_wrap=True)


def print_ranking(ranked: list[Candidate], console: Console) -> None:
    """`labcoat plan A.yaml B.yaml`: designs by expected information per unit of compute."""
    unit = ranked[0].unit if ranked else "trials"
    table = Table("rank", "design", "expected information (bits)", f"compute ({unit})",
                  f"bits per {unit}", box=box.SIMPLE_HEAD,
                  title="Candidate designs, most informative per unit of compute first")
    for i, c in enumerate(ranked, start=1):
        table.add_row(str(i), escape(c.name), "-" if c.bits is None else f"{c.bits:.3f}",
                      f"{c.cost:g}", "-" if c.bits_per_cost is None else
                      f"{c.bits_per_cost:.3g}")
    print_wide(table, console)  # design paths are never cut
    for c in ranked:
        if c.why:
            console.print(f"note: {escape(c.name)}: {escape(c.why)}", soft_wrap=True)


def ranking_dict(ranked: list[Candidate]) -> dict[str, Any]:
    return {"ranking": [{**dataclasses.asdict(c), "bits_per_cost": c.bits_per_cost}
                        for c in ranked]}


def _mde_table(what: str, rows: list[tuple[int, float]]) -> Table:
    table = Table(what, "minimum detectable effect", box=box.SIMPLE_HEAD,
                  title_justify="left")
    for n, mde in rows:
        table.add_row(str(n), f"{mde:.3g}")
    return table


def plan_dict(plan: Plan) -> dict[str, Any]:
    data = dataclasses.asdict(dataclasses.replace(plan, factorial=None))
    if plan.factorial is not None:
        f = plan.factorial
        data["factorial"] = {"summary": f.summary, "runs": int(f.design.n_runs),
                             "generators": list(f.design.generators),
                             "resolution": f.design.resolution}
    return data
