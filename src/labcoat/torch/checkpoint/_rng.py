"""Random number generator states as plain data that ``torch.load(weights_only=True)`` accepts.

Global generators (always captured): Python's ``random``, NumPy's legacy
``np.random.*`` functions, torch's CPU generator and, when CUDA is available,
every CUDA device's generator. Explicit generators a user tracks:
``torch.Generator``, ``random.Random``, ``numpy.random.Generator`` and
``numpy.random.RandomState``.

Plain data means tensors, numbers, strings, None, lists, tuples and dicts, so
a checkpoint never needs the pickle of an arbitrary class (and never runs one
when loaded). NumPy arrays inside NumPy states become their raw bytes (a
uint8 tensor) with dtype and shape, which round-trips every dtype exactly.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from labcoat.torch.checkpoint._errors import CheckpointError

# Kind names of the explicit generators, as stored in checkpoints.
TORCH_GENERATOR = "torch.Generator"
PYTHON_RANDOM = "random.Random"
NUMPY_GENERATOR = "numpy.random.Generator"
NUMPY_RANDOM_STATE = "numpy.random.RandomState"


def generator_kind(obj: object) -> str | None:
    """The kind of an explicit generator, or None if `obj` is not one."""
    if isinstance(obj, torch.Generator):
        return TORCH_GENERATOR
    if isinstance(obj, random.Random):
        return PYTHON_RANDOM
    if isinstance(obj, np.random.Generator):
        return NUMPY_GENERATOR
    if isinstance(obj, np.random.RandomState):
        return NUMPY_RANDOM_STATE
    return None


def get_state(obj: Any) -> Any:
    """The state of an explicit generator as plain data (a copy, safe to write later)."""
    kind = generator_kind(obj)
    if kind == TORCH_GENERATOR:
        return obj.get_state()  # a new CPU uint8 tensor, whatever the generator's device
    if kind == PYTHON_RANDOM:
        return python_state(obj)
    if kind == NUMPY_GENERATOR:
        return _plain(obj.bit_generator.state)
    if kind == NUMPY_RANDOM_STATE:
        return _plain(obj.get_state(legacy=False))
    raise TypeError(f"{type(obj).__name__} is not a random number generator")


def set_state(obj: Any, state: Any) -> None:
    """Put `obj` back in the state `get_state` returned."""
    kind = generator_kind(obj)
    if kind == TORCH_GENERATOR:
        obj.set_state(state)
    elif kind == PYTHON_RANDOM:
        set_python_state(obj, state)
    elif kind == NUMPY_GENERATOR:
        obj.bit_generator.state = _from_plain(state)
    elif kind == NUMPY_RANDOM_STATE:
        obj.set_state(_from_plain(state))
    else:
        raise TypeError(f"{type(obj).__name__} is not a random number generator")


def python_state(rng: Any) -> dict[str, Any]:
    """``rng.getstate()`` as plain data: version, the 625 Mersenne Twister words, gauss cache.

    rng: a ``random.Random``, or the ``random`` module itself for the global generator.
    """
    version, internal, gauss_next = rng.getstate()
    return {"version": version, "internal": list(internal), "gauss_next": gauss_next}


def set_python_state(rng: Any, state: dict[str, Any]) -> None:
    rng.setstate((state["version"], tuple(state["internal"]), state["gauss_next"]))


def capture_global() -> dict[str, Any]:
    """Every global generator's state."""
    return {
        "python": python_state(random),  # the generator behind random.random() etc.
        "numpy": _plain(np.random.get_state(legacy=False)),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def restore_global(state: dict[str, Any]) -> None:
    """Restore what `capture_global` captured.

    CUDA states are restored only on a machine with the same number of CUDA
    devices; anything else cannot continue the same random streams, so it is
    an error rather than a silently different run.
    """
    cuda = state.get("cuda")
    here = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if cuda is not None and len(cuda) != here:
        raise CheckpointError(
            f"the checkpoint holds RNG states of {len(cuda)} CUDA device(s) but this machine has "
            f"{here}; resume on a machine with the same devices to continue the same run"
        )
    set_python_state(random, state["python"])
    np.random.set_state(_from_plain(state["numpy"]))
    torch.set_rng_state(state["torch"])
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


_ARRAY = "__ndarray__"


def _plain(value: Any) -> Any:
    """NumPy RNG state (nested dicts of ints, strings and arrays) -> weights_only-safe data."""
    if isinstance(value, np.ndarray):
        raw = torch.frombuffer(bytearray(value.tobytes()), dtype=torch.uint8)
        return {_ARRAY: raw, "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _from_plain(value: Any) -> Any:
    if isinstance(value, dict):
        if _ARRAY in value:
            data = value[_ARRAY].numpy().tobytes()
            array = np.frombuffer(data, dtype=np.dtype(value["dtype"])).reshape(value["shape"])
            return array.copy()  # frombuffer's array is read-only
        return {k: _from_plain(v) for k, v in value.items()}
    return value
