"""`labcoat ledger`: every prediction in the store, its outcome, and the forecasters' scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from labcoat.cli._common import JsonFlag, console, print_json, store_session
from labcoat.errors import LabcoatError


def ledger(
    as_json: JsonFlag = False,
    html: Annotated[Path | None, typer.Option(
        "--html", help="also write a self-contained HTML page (reliability diagrams, opens "
        "offline) to this file; needs labcoat[ui]")] = None,
) -> None:
    """Predictions (`predict:`) against labcoat's verdicts: prior, outcome, surprise; Brier
    (Murphy decomposition), log score, CRPS and calibration by author and tag."""
    from labcoat import analysis
    from labcoat import report as reports

    if html is not None and as_json:
        raise LabcoatError(f"--json and --html {html} print different things; use one: "
                           f"labcoat ledger --json, or labcoat ledger --html {html}")
    with store_session() as session:
        found = analysis.ledger(session)
    if as_json:
        print_json(analysis.ledger_dict(found))
        return
    if html is not None:
        page = reports.ledger_html(found)
        try:
            html.write_text(page, encoding="utf-8")
        except OSError as e:
            raise LabcoatError(f"cannot write {html}: {e.strerror or e}; choose a file in a "
                               "directory you can write") from None
        console.print(f"wrote {escape(str(html))} ({len(page) / 1e6:.1f} MB, self-contained)")
        return
    reports.print_ledger(found, console)
