"""Largest-Triangle-Three-Buckets downsampling (Steinarsson 2013, "Downsampling Time
Series for Visual Representation", MSc thesis, University of Iceland, section 4.2).

A plot is a few hundred pixels wide: drawing 10,000 points per curve costs the
browser time and shows nothing more. LTTB keeps the first and last points and,
from each of n - 2 equal-count buckets between them, the point that forms the
largest triangle with the point kept from the previous bucket and the mean of
the next bucket, so peaks and dips (a loss spike) survive where plain decimation
would step over them.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def lttb(x: ArrayLike, y: ArrayLike, n: int) -> np.ndarray:
    """Indices of the `n` points LTTB keeps, increasing.

    x: (m,) increasing (e.g. steps), y: (m,) finite values. With m <= n every
    index is returned. n must be at least 3 (first, last, one chosen point).
    """
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.ndim != 1 or xs.shape != ys.shape:
        raise ValueError(f"x and y must be 1-d of one length; got {xs.shape} and {ys.shape}")
    if n < 3:
        raise ValueError(f"n={n}: LTTB keeps the first and last points, so n must be >= 3")
    m = xs.size
    if m <= n:
        return np.arange(m)
    # Bucket i spans [floor(i * every) + 1, floor((i + 1) * every) + 1), as in the reference
    # implementation (flot-downsample), including its floating-point order of operations.
    every = (m - 2) / (n - 2)
    edges = np.minimum(np.floor(np.arange(n) * every).astype(int) + 1, m)
    keep = np.empty(n, dtype=int)
    keep[0], keep[-1] = 0, m - 1
    a = 0
    for i in range(n - 2):
        lo, hi = edges[i], edges[i + 1]
        cx, cy = xs[edges[i + 1]:edges[i + 2]].mean(), ys[edges[i + 1]:edges[i + 2]].mean()
        # twice the triangle area (a, candidate, c); the constant 1/2 does not change argmax
        area = np.abs((xs[a] - cx) * (ys[lo:hi] - ys[a]) - (xs[a] - xs[lo:hi]) * (cy - ys[a]))
        a = lo + int(np.argmax(area))
        keep[i + 1] = a
    return keep


def downsample(x: ArrayLike, y: ArrayLike, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) reduced to at most `n` points by LTTB over the finite values; a non-finite
    value (a diverged loss) is kept where it is, so the plot shows the gap."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    finite = np.isfinite(ys)
    idx = np.flatnonzero(finite)
    chosen = idx[lttb(xs[idx], ys[idx], max(3, n))] if idx.size else idx
    keep = np.union1d(chosen, np.flatnonzero(~finite)[:n])
    return xs[keep], ys[keep]
