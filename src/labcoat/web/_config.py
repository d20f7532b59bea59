"""Settings of `labcoat ui`, checked when built."""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass

from labcoat.errors import LabcoatError

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


@dataclass(kw_only=True)
class UIConfig:
    """host: interface to bind; anything but loopback requires a token.
    port: TCP port (0: any free one).
    token: the secret every request must carry (?token=, a Bearer header, or the cookie
        the first visit sets); generated when the host is not loopback and none is given.
    database: store URL (default: LABCOAT_DB / LABCOAT_HOME, as every verb).
    refresh: seconds between reloads of a page whose experiment is running.
    suites: directory of regression suites for /regression (default: $LABCOAT_HOME/suites,
        where `labcoat evals harvest --name` writes them).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    database: str | None = None
    refresh: int = 5
    suites: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise LabcoatError(f"--port {self.port} is not a TCP port; choose 1-65535 "
                               "(0 = any free port)")
        if self.token is not None and len(self.token) < 8:
            raise LabcoatError("--token is shorter than 8 characters; use a long random one "
                               "(or leave it out and labcoat generates one)")
        if not self.loopback and self.token is None:
            self.token = secrets.token_urlsafe(24)

    @property
    def loopback(self) -> bool:
        """Whether only this machine can connect."""
        if self.host in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False
