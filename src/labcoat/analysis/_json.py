"""Plain JSON-able data: what `--json`, the HTML report and the dashboard's API emit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def json_safe(value: Any) -> Any:
    """`value` with string keys, lists for tuples, Python numbers for numpy scalars, and
    None for NaN and infinity (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
