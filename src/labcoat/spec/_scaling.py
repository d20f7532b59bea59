"""A design's scaling terms: which parameter is its scale and which metric a law fits."""

from __future__ import annotations

import math
from typing import Any

from labcoat.spec._schema import Design


def scale_variable(design: Design) -> tuple[str | None, str]:
    """The numeric scale parameter that varies across `scales:` -> (name or None, note)."""
    names = list(dict.fromkeys(k for s in design.scales for k in s.params))
    varying = []
    for name in names:
        values = {numeric_param(s.params.get(name)) for s in design.scales}
        if None not in values and len(values) > 1:
            varying.append(name)
    if not varying:
        return None, ("no numeric scale parameter differs between the scales: nothing to fit "
                      "a scaling law against; give each scale a size, e.g. params: {width: 64}")
    note = ""
    if len(varying) > 1:
        note = (f"several scale parameters vary ({', '.join(varying)}); the law is fitted "
                f"against {varying[0]!r} alone")
    return varying[0], note


def fitted_metric(design: Design) -> str:
    """The primary metric when it is a scalar that should decrease (a loss), else `loss`."""
    hypotheses = design.all_hypotheses
    if hypotheses and hypotheses[0].direction == "decrease" and hypotheses[0].source == "scalar":
        return hypotheses[0].metric
    return "loss"


def numeric_param(value: Any) -> float | None:
    """A parameter's value as a finite float, or None when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
