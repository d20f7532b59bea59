"""Design files: schema, loading with file:line errors, expansion into trials."""

from labcoat.spec._expand import TrialSpec, design_hash, expand, render_command
from labcoat.spec._load import load_design, parse_design
from labcoat.spec._schema import Arm, Design, Hypothesis, Restart

__all__ = [
    "Arm",
    "Design",
    "Hypothesis",
    "Restart",
    "TrialSpec",
    "design_hash",
    "expand",
    "load_design",
    "parse_design",
    "render_command",
]
