"""Cheap device-side measurements, brought to the host in one transfer per hook.

The guard must not slow training: a per-tensor ``.item()`` would synchronize
an accelerator once per parameter. Instead a hook queues device tensors in a
`Transfer` (norms come from fused ``torch._foreach_norm`` kernels, one per
device and dtype) and `Transfer.resolve` concatenates them per dtype and
copies each concatenation once. On CPU the copy is free and only the kernel
count matters.

Hashes are linear in the data with fixed pseudo-random 64-bit position
weights (wrapping int64 arithmetic), so a row's hash is one fused multiply
and sum on the device, identical across processes and runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

_HASH_SEED = 0x1ABC0A7  # fixed: hashes must agree between processes (eval items, replicas)
_HASH_CHUNK = 1024
_weights: dict[tuple[str, int | None, int], torch.Tensor] = {}  # device, chunks -> weights

_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_NP_INT_VIEW = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


class Transfer:
    """Device tensors queued under names, copied to the host together by `resolve`.

    Tensors already on the CPU are read in place (no copy, no synchronization).
    """

    def __init__(self) -> None:
        self._parts: list[tuple[str, torch.Tensor]] = []
        self._ready: dict[str, np.ndarray] = {}

    def add(self, key: str, tensor: torch.Tensor) -> None:
        """Queue `tensor` (any shape) to come back flattened as ``resolve()[key]``."""
        t = tensor.detach().reshape(-1)
        if t.device.type == "cpu":
            self._ready[key] = _host(t)
        else:
            self._parts.append((key, t))

    def put(self, key: str, values: np.ndarray) -> None:
        """Add a value already on the host."""
        self._ready[key] = values

    def add_norms(self, key: str, tensors: Sequence[torch.Tensor]) -> None:
        """Queue the L2 norm of each tensor; ``resolve()[key]`` is (len(tensors),) float64."""
        if not tensors:
            self._ready[key] = np.zeros(0)
            return
        try:
            norms = torch._foreach_norm(list(tensors))
        except (RuntimeError, TypeError):  # sparse, or mixed devices or dtypes
            norms = [_norm(t).to(tensors[0].device, torch.float32) for t in tensors]
        if norms[0].device.type == "cpu":  # read one by one: cheaper than stack + copy
            self._ready[key] = np.array([n.item() for n in norms])
        else:
            self.add(key, torch.stack(norms))

    def __bool__(self) -> bool:
        return bool(self._parts or self._ready)

    def resolve(self) -> dict[str, np.ndarray]:
        """Everything queued, on the host: name -> 1-D float64 or int64 array."""
        out = self._ready
        by_kind: dict[tuple[torch.device, bool], list[tuple[str, torch.Tensor]]] = {}
        for key, t in self._parts:
            integer = not (t.is_floating_point() or t.is_complex())
            by_kind.setdefault((t.device, integer), []).append((key, t))
        for (_, integer), parts in by_kind.items():
            dtype = torch.int64 if integer else torch.float64
            flat = torch.cat([t.to(dtype) for _, t in parts]).cpu().numpy()
            start = 0
            for key, t in parts:
                out[key] = flat[start:start + t.numel()]
                start += t.numel()
        self._parts, self._ready = [], {}
        return out


def _host(t: torch.Tensor) -> np.ndarray:
    if t.is_floating_point():
        return t.numpy().astype(np.float64) if t.dtype in (torch.float32, torch.float64) \
            else t.to(torch.float64).numpy()
    return t.to(torch.int64).numpy() if t.dtype != torch.bool else t.numpy().astype(np.int64)


def _norm(t: torch.Tensor) -> torch.Tensor:
    values = t.coalesce().values() if t.is_sparse else t
    return torch.linalg.vector_norm(values.float())


def checksums(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """(n,) int64 exact checksums: each tensor's bits read as integers, summed with wraparound.

    Any single bit flip changes its tensor's checksum (by +-2^b), and the sum
    does not depend on the reduction order, so equal tensors give equal
    checksums on every rank and kernel.
    """
    out = []
    for t in tensors:
        t = t.detach()
        if t.is_sparse:
            t = t.coalesce().values()
        bits = t.view(_INT_VIEW[t.element_size()]) if t.is_floating_point() else t
        out.append(bits.sum(dtype=torch.int64))
    if not out:
        return torch.zeros(0, dtype=torch.int64)
    return torch.stack([o.to(out[0].device) for o in out])


def row_hashes(x: torch.Tensor, pad_id: int | None = None) -> torch.Tensor:
    """(B,) int64 hash of each row of `x` (B, ...), ignoring positions equal to `pad_id`.

    Padding contributes nothing, so a row padded to any length hashes like the
    unpadded row (train batches vs registered eval items).
    """
    x = x.detach()
    rows = x.reshape(x.shape[0], -1) if x.dim() else x.reshape(1, 1)
    if rows.is_floating_point():
        rows = rows.contiguous().view(_INT_VIEW[rows.element_size()])
    values = rows.to(torch.int64) + 1  # +1: token 0 must count
    if pad_id is not None:
        values = values * (rows != pad_id)
    return (values * _position_weights(rows.device, rows.shape[1])).sum(dim=1)


def row_hashes_host(x: torch.Tensor, pad_id: int | None = None) -> np.ndarray:
    """`row_hashes` of a CPU tensor with NumPy (same values; NumPy int64 wraps like torch's)."""
    a = x.detach().numpy()
    rows = a.reshape(a.shape[0], -1) if a.ndim else a.reshape(1, 1)
    if rows.dtype.kind == "f":
        rows = np.ascontiguousarray(rows).view(_NP_INT_VIEW[rows.itemsize])
    values = rows.astype(np.int64) + 1
    if pad_id is not None:
        values *= rows != pad_id
    weights = _position_weights(torch.device("cpu"), rows.shape[1]).numpy()
    return (values * weights).sum(axis=1)


def item_hashes(items: Any, pad_id: int | None = None) -> list[int]:
    """Hashes of eval items, comparable with training rows (see `row_hashes`).

    items: a (N, ...) tensor (one item per row, padded with `pad_id`) or a
    sequence of tensors or of int sequences (one item each, any lengths).
    """
    if isinstance(items, torch.Tensor):
        return row_hashes(items, pad_id).tolist()
    out = []
    for item in items:
        t = item if isinstance(item, torch.Tensor) else torch.as_tensor(item)
        out.extend(row_hashes(t.reshape(1, -1).cpu(), pad_id).tolist())
    return out


def _position_weights(device: torch.device, length: int) -> torch.Tensor:
    chunks = max(1, -(-length // _HASH_CHUNK))
    key = (device.type, device.index, chunks)
    if key not in _weights:
        parts = []
        for c in range(chunks):  # chunk c is the same whatever the total length
            gen = torch.Generator().manual_seed(_HASH_SEED + c)
            parts.append(torch.randint(-(2**62), 2**62, (_HASH_CHUNK,), generator=gen) * 2 + 1)
        _weights[key] = torch.cat(parts).to(device)
    return _weights[key][:length]
