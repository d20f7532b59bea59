"""Shared by the guard tests."""

from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install torch==2.13.0")


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models: one thread is fastest, and immune to a busy machine's other threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
