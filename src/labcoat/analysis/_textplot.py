"""A log-log plot in text, for scaling fits in the terminal report: the observed
points (o), the fitted curve (*) and its 95% band (:), extrapolated past the data."""

from __future__ import annotations

import numpy as np


def loglog_plot(x: np.ndarray, y: np.ndarray, grid: np.ndarray, curve: np.ndarray,
                low: np.ndarray, high: np.ndarray, *, width: int = 60, height: int = 12
                ) -> list[str]:
    """Rows of text, top row first; axes log-scaled over everything drawn."""
    xs = np.log10(np.concatenate([x, grid]))
    ys = np.log10(np.concatenate([y, curve, low, high]))
    x0, x1 = xs.min(), xs.max()
    y0, y1 = ys.min(), ys.max()
    if x1 <= x0 or y1 <= y0:
        return []
    canvas = [[" "] * width for _ in range(height)]

    def put(xv: np.ndarray, yv: np.ndarray, mark: str) -> None:
        cols = np.rint((np.log10(xv) - x0) / (x1 - x0) * (width - 1)).astype(int)
        rows = np.rint((y1 - np.log10(yv)) / (y1 - y0) * (height - 1)).astype(int)
        for c, r in zip(cols, rows, strict=True):
            canvas[r][c] = mark

    put(grid, low, ":")
    put(grid, high, ":")
    put(grid, curve, "*")
    put(x, y, "o")
    label = max(len(f"{10**y1:.3g}"), len(f"{10**y0:.3g}"))
    lines = []
    for r, row in enumerate(canvas):
        tick = f"{10**y1:.3g}" if r == 0 else f"{10**y0:.3g}" if r == height - 1 else ""
        lines.append(f"{tick:>{label}} |{''.join(row)}")
    left, right = f"{10**x0:.3g}", f"{10**x1:.3g}"
    lines.append(" " * label + " +" + "-" * width)
    lines.append(" " * (label + 2) + left + right.rjust(width - len(left)))
    return lines
