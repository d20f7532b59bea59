"""`labcoat ui`: serve the dashboard with uvicorn until Ctrl-C."""

from __future__ import annotations

import socket
from collections.abc import Callable

from labcoat.errors import LabcoatError
from labcoat.web._config import UIConfig

INSTALL_HINT = "pip install 'labcoat[ui]'"


def serve(config: UIConfig, say: Callable[[str], None] = print) -> None:
    try:
        import uvicorn

        from labcoat.web._app import create_app
    except ImportError as e:
        raise LabcoatError(f"`labcoat ui` needs FastAPI, uvicorn and plotly ({e.name} is not "
                           f"installed); install them with: {INSTALL_HINT}") from None
    _check_port(config)
    app = create_app(config)
    host = f"[{config.host}]" if ":" in config.host else config.host
    url = f"http://{host}:{config.port}/"
    if config.token:
        url += f"?token={config.token}"
    say(f"labcoat dashboard (read-only) at {url}" + (
        "" if config.loopback else "  - reachable from other machines: keep the token secret"))
    uvicorn.run(app, host=config.host, port=config.port, log_level="warning")


def _check_port(config: UIConfig) -> None:
    """Bind once before starting, so a port in use is one clear message (uvicorn would log
    it and exit with status 3)."""
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((config.host, config.port))
        except OSError as e:  # port taken, address not on this machine, unknown host
            raise LabcoatError(f"cannot listen on {config.host}:{config.port}: "
                               f"{e.strerror or e}; choose another --port or --host") from None
