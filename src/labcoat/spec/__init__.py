"""Design files: schema, loading with file:line errors, expansion into trials."""

from labcoat.spec._checks import Problem, design_problems
from labcoat.spec._expand import (
    LARGE_DESIGN,
    ArmSpec,
    TrialSpec,
    arm_specs,
    design_hash,
    expand,
    factorial_runs,
    render_command,
    size_problem,
    trial_count,
)
from labcoat.spec._load import (
    DesignCheck,
    LocatedProblem,
    check_design_file,
    load_design,
    parse_design,
)
from labcoat.spec._scaling import fitted_metric, numeric_param, scale_variable
from labcoat.spec._schema import (
    MAX_RANKS,
    Arm,
    Budget,
    Design,
    EvalPlan,
    Factor,
    Hypothesis,
    Prediction,
    Resources,
    Restart,
    Scale,
    Shrink,
)
from labcoat.spec._yaml import line_of

__all__ = [
    "fitted_metric",
    "numeric_param",
    "scale_variable",
    "line_of",
    "LARGE_DESIGN",
    "MAX_RANKS",
    "Arm",
    "ArmSpec",
    "Budget",
    "Design",
    "DesignCheck",
    "EvalPlan",
    "Factor",
    "Hypothesis",
    "LocatedProblem",
    "Prediction",
    "Problem",
    "Resources",
    "Restart",
    "Scale",
    "Shrink",
    "TrialSpec",
    "arm_specs",
    "check_design_file",
    "design_hash",
    "design_problems",
    "expand",
    "factorial_runs",
    "load_design",
    "parse_design",
    "render_command",
    "size_problem",
    "trial_count",
]
