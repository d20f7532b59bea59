"""The dashboard verb."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from labcoat.cli._common import console


def ui(
    host: Annotated[str, typer.Option(help="interface to listen on; anything but 127.0.0.1 "
                                      "requires a token")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    token: Annotated[str | None, typer.Option(
        help="secret every request must carry (generated and printed when --host is not "
             "loopback)")] = None,
) -> None:
    """The local dashboard (read-only): experiments, reports live while trials run, trials,
    and two experiments compared. Ctrl-C stops it."""
    from labcoat import web

    web.serve(web.UIConfig(host=host, port=port, token=token),
              say=lambda line: console.print(escape(line), soft_wrap=True))
