"""Shared by the integration tests: one torch thread (tiny models are fastest so)."""

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
