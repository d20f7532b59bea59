"""Shared by the phase-timing tests: skipped where torch is absent; one torch thread each."""

import pytest

pytest.importorskip("torch", reason="needs torch: pip install torch==2.13.0")

from torch_threads import one_thread  # noqa: E402, F401
