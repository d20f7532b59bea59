"""Input checks (invalid input raises ValueError naming the problem and the fix) and
the warnings that qualify a scaling fit: weak scale ranges, far extrapolation,
unconverged or unidentified fits."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from labcoat.stats import StatsWarning

# Thresholds of check_range. One order of magnitude of scale and five distinct
# sizes are rules of thumb, not theorems: with less, the exponent and the
# irreducible loss trade off against each other and extrapolations scatter
# (Besiroglu et al. 2024 show how wide the intervals already are with ~240
# points over 2.5 orders of magnitude of N). Extrapolating more than ~10x past
# the largest fitted scale is where published laws have broken.
MIN_SPAN = 10.0
MIN_SIZES = 5
MAX_EXTRAPOLATION = 10.0


class ScalingWarning(StatsWarning):
    """A scaling fit or prediction that may mislead. `kind` is one of:

    few-sizes, narrow-range (check_range); far-extrapolation (a target beyond
    10x the largest fitted scale); grid-edge (the estimate lies outside the
    starting grid); not-converged; starts-disagree (starts that reach the best
    objective end at different parameters, or only one start reaches it);
    unidentified (a term contributes almost nothing at every data point, or an
    exponent <= 0); bootstrap (replicates that failed to converge);
    backtest-miss (held-out points outside their prediction intervals); noisy (a Chinchilla
    fit whose scatter makes the E, A and alpha intervals under-cover).
    """


def check_ci(ci: float) -> None:
    if not 0 < ci < 1:
        raise ValueError(f"ci={ci!r} must be a probability in (0, 1), e.g. 0.95")


def positive_array(name: str, values: object, *, allow_none: bool = False) -> np.ndarray | None:
    """`values` as a 1-D float array of finite, positive numbers; ValueError otherwise."""
    if values is None:
        if allow_none:
            return None
        raise ValueError(f"{name}= is required: a 1-D array of positive numbers")
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per point); got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}]={arr[i]!r} is not a finite positive number; scaling "
                         f"laws are fitted in log space, so every {name} must be > 0 "
                         "(drop or fix that point)")
    return arr


def same_length(**arrays: np.ndarray | None) -> int:
    lengths = {k: len(v) for k, v in arrays.items() if v is not None}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k}: {n}" for k, n in lengths.items())
        raise ValueError(f"arrays must have one value per point, but lengths differ ({shown})")
    return next(iter(lengths.values()))


def check_seed(seed: object) -> np.random.Generator:
    """A Generator from `seed` (a non-negative int or a Generator, used as is)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool) and seed >= 0:
        return np.random.default_rng(int(seed))
    raise ValueError(f"seed={seed!r} must be a non-negative int or a numpy Generator "
                     "(np.random.default_rng(0)); results are reproducible only from a seed")


def check_range(N: Sequence[float] | np.ndarray, D: Sequence[float] | np.ndarray | None = None,
                *, target_N: float | Sequence[float] | None = None,
                target_D: float | Sequence[float] | None = None) -> list[ScalingWarning]:
    """Warnings about scale ranges too weak to trust a fit or an extrapolation.

    N, D: (n,) model sizes and tokens of the fitted points (D optional).
    target_N, target_D: scales you mean to predict at (scalars or arrays).
    Returns (does not emit) a list of ScalingWarning, empty if all is well:
    - few-sizes: fewer than 5 distinct values of N (or of D);
    - narrow-range: N (or D) spans less than one order of magnitude;
    - far-extrapolation: a target beyond 10x the largest fitted N (or D).
    """
    n_arr = positive_array("N", N)
    d_arr = positive_array("D", D, allow_none=True)
    if d_arr is not None:
        same_length(N=n_arr, D=d_arr)
    out: list[ScalingWarning] = []
    for name, arr in (("N", n_arr), ("D", d_arr)):
        if arr is None:
            continue
        distinct = np.unique(arr).size
        if distinct < MIN_SIZES:
            out.append(ScalingWarning(
                f"only {distinct} distinct {name} value(s) (fewer than {MIN_SIZES}): the "
                f"exponent and the irreducible loss are poorly separated; add scales",
                kind="few-sizes"))
        span = arr.max() / arr.min()
        if span < MIN_SPAN:
            out.append(ScalingWarning(
                f"{name} spans only {span:.3g}x ({arr.min():.3g} to {arr.max():.3g}), less "
                f"than one order of magnitude: extrapolations from this fit are weakly "
                f"constrained; widen the range of {name}", kind="narrow-range"))
    for name, arr, target in (("N", n_arr, target_N), ("D", d_arr, target_D)):
        if target is None or arr is None:
            continue
        t = positive_array(f"target_{name}", target)
        ratio = float(t.max() / arr.max())
        if ratio > MAX_EXTRAPOLATION:
            out.append(ScalingWarning(
                f"target {name}={t.max():.3g} is {ratio:.3g}x the largest fitted {name} "
                f"({arr.max():.3g}), beyond {MAX_EXTRAPOLATION:g}x: treat the prediction as a "
                "guess and check it with a backtest (scaling.backtest)",
                kind="far-extrapolation"))
    return out
