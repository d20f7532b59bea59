"""The local dashboard (`labcoat ui`): a read-only FastAPI app over the store.

Pages: experiments with status and verdicts, an experiment's report (live while
trials run), a trial (curves, alerts, attempts, checkpoints, logs), and two
experiments side by side; the same data as JSON under /api. Binds to 127.0.0.1
unless told otherwise, and then requires a token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labcoat._lazy import lazy_exports

if TYPE_CHECKING:
    from labcoat.web._app import create_app
    from labcoat.web._config import UIConfig
    from labcoat.web._serve import serve

# FastAPI loads only when a name is used: `labcoat --help` stays fast.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "_app": ("create_app",),
    "_config": ("UIConfig",),
    "_serve": ("serve",),
})
