"""The fixture tests/guard and tests/checkpoint share (each conftest imports it after
skipping its folder where torch is absent)."""

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models: one thread is fastest, and immune to a busy machine's other threads."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
