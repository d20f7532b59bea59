"""The `labcoat` command (Typer): thin, it parses flags and calls the library.

One module per group of verbs; heavy modules (SQLAlchemy, scipy, torch) are
imported inside the verbs so `labcoat --help` starts fast.
"""

from __future__ import annotations

import typer

from labcoat.cli import _design, _logs, _reproduce, _results, _run, _ui
from labcoat.cli._contamination import contamination
from labcoat.cli._evals import app as evals_app
from labcoat.cli._inside import inside
from labcoat.cli._ledger import ledger
from labcoat.cli._main import main
from labcoat.cli._rate import rate
from labcoat.cli._scaling import app as scaling_app
from labcoat.cli._shrink import shrink

__all__ = ["app", "main"]

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="labcoat: design, run and analyze ML experiments with error bars.",
)
app.add_typer(scaling_app, name="scaling")
app.command("contamination")(contamination)
app.add_typer(evals_app, name="evals")
app.command("rate")(rate)
app.command("inside")(inside)
for verb in (_design.init, _design.lint, _design.plan, _run.run, _results.status, _results.show,
             _results.export, _results.report, _results.compare):
    app.command()(verb)
app.command("import")(_run.import_command)
app.command()(_logs.logs)
app.command()(ledger)
app.command("diagnose")(_logs.diagnose_command)
app.command("shrink")(shrink)
for verb in (_run.demo, _reproduce.rerun, _reproduce.replay, _ui.ui):
    app.command()(verb)
