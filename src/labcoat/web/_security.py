"""What every request passes before a page is built: read-only methods, the token when
one is set, a Host header naming this machine when bound to loopback (so a web page
elsewhere cannot reach the dashboard through DNS rebinding), and headers that keep the
browser from loading anything from elsewhere."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from labcoat.web._config import LOOPBACK_NAMES, UIConfig

READ_ONLY = ("GET", "HEAD")
COOKIE = "labcoat_token"
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # Plotly draws from inline scripts; everything else must come from this server.
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                               "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
                               "connect-src 'self'; frame-ancestors 'none'",
}


class AccessControl(BaseHTTPMiddleware):
    def __init__(self, app: object, config: UIConfig) -> None:
        super().__init__(app)
        self.config = config

    async def dispatch(self, request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = self.refuse(request)
        if response is None:
            response = await call_next(request)
            if _query_token(request) and self.config.token:
                # the link with ?token= was followed once: the cookie carries it from now on
                response.set_cookie(COOKIE, self.config.token, httponly=True, samesite="strict")
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    def refuse(self, request: Request) -> Response | None:
        if request.method not in READ_ONLY:
            return PlainTextResponse(
                f"{request.method} refused: the labcoat dashboard is read-only (GET only)",
                status_code=405, headers={"Allow": ", ".join(READ_ONLY)})
        if self.config.loopback and _host(request) not in LOOPBACK_NAMES:
            return PlainTextResponse("unknown Host header: the dashboard answers only to "
                                     "127.0.0.1 or localhost", status_code=400)
        token = self.config.token
        if token is not None and not _carries(request, token):
            return PlainTextResponse(
                "a token is required: open the URL `labcoat ui` printed (with ?token=...) or "
                "send Authorization: Bearer TOKEN", status_code=401,
                headers={"WWW-Authenticate": "Bearer"})
        if _query_token(request) and request.method == "GET" and not request.url.path.startswith(
                "/api/"):
            # drop the token from the address bar (and from history) once the cookie is set
            rest = [f"{quote(k)}={quote(v)}" for k, v in request.query_params.multi_items()
                    if k != "token"]
            target = request.url.path + ("?" + "&".join(rest) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, token or "", httponly=True, samesite="strict")
            return response
        return None


def _host(request: Request) -> str:
    host = request.headers.get("host", "")
    if host.startswith("["):  # [::1]:8000
        return host[1:host.find("]")]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _query_token(request: Request) -> str | None:
    return request.query_params.get("token")


def _carries(request: Request, token: str) -> bool:
    auth = request.headers.get("authorization", "")
    offered = [request.query_params.get("token"), request.cookies.get(COOKIE),
               auth[7:] if auth.lower().startswith("bearer ") else None]
    return any(o is not None and secrets.compare_digest(o.encode(), token.encode())
               for o in offered)
