"""Scoring probability forecasts of binary outcomes, and the information an experiment gives.

- brier_score and murphy_decomposition: the Brier score (Brier 1950) split into
  reliability - resolution + uncertainty (Murphy 1973), with the two within-bin terms of
  Stephenson et al. (2008) that make the identity exact when forecasts are binned;
- log_score: the mean surprise -log2 p(outcome), in bits;
- crps_normal / crps_interval: the continuous ranked probability score of a normal
  forecast (Gneiting & Raftery 2007, eq. 21), or of an 80% interval read as a normal;
- reliability_bins: observed frequency per forecast bin with Wilson intervals (the
  points of a reliability diagram); calibration_by_level: "your 80% predictions came true
  55% of the time";
- spiegelhalter_z: a test of calibration (Spiegelhalter 1986);
- expected_information: what a test of a claim teaches about it, in bits (Lindley 1956).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as st

# A forecaster is flagged as miscalibrated when Spiegelhalter's test rejects at this level:
# a flag is a public judgement on a person, so false alarms are kept to 1 in 100.
CALIBRATION_ALPHA = 0.01


def _forecasts(p: ArrayLike, outcome: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    f = np.asarray(p, dtype=float).ravel()
    o = np.asarray(outcome, dtype=float).ravel()
    if f.shape != o.shape:
        raise ValueError(f"{f.size} forecasts but {o.size} outcomes; give one outcome each")
    if f.size == 0:
        raise ValueError("no forecasts to score")
    if np.any((f < 0) | (f > 1)) or np.any(np.isnan(f)):
        raise ValueError("forecasts are probabilities: each must lie in [0, 1]")
    if np.any((o != 0) & (o != 1)):
        raise ValueError("outcomes are 0 (did not happen) or 1 (happened)")
    return f, o


def brier_score(p: ArrayLike, outcome: ArrayLike) -> float:
    """Mean squared difference between the forecast probability and the 0/1 outcome."""
    f, o = _forecasts(p, outcome)
    return float(np.mean((f - o) ** 2))


def brier_score_multi(p: ArrayLike, outcome: ArrayLike) -> float:
    """Brier's (1950) original score over k exclusive outcomes: the mean over forecasts of
    sum_k (p_k - 1[outcome = k])^2, between 0 and 2. p: n x k probabilities (rows sum to
    1); outcome: the index of what happened, per forecast."""
    f = np.asarray(p, dtype=float)
    o = np.asarray(outcome)
    if f.ndim != 2 or o.shape != (f.shape[0],):
        raise ValueError(f"p must be n x k and outcome n indices; got {f.shape} and {o.shape}")
    if np.any((f < 0) | (f > 1)) or np.any(np.abs(f.sum(axis=1) - 1) > 1e-9):
        raise ValueError("each row of p is a distribution: entries in [0, 1] summing to 1")
    if np.any((o < 0) | (o >= f.shape[1])) or not np.issubdtype(o.dtype, np.integer):
        raise ValueError(f"outcomes are indices 0..{f.shape[1] - 1}")
    hit = np.zeros_like(f)
    hit[np.arange(f.shape[0]), o] = 1
    return float(np.mean(np.sum((f - hit) ** 2, axis=1)))


def log_score(p: ArrayLike, outcome: ArrayLike) -> float:
    """Mean surprise, -log2 of the probability given to what happened (bits; lower is
    better; infinite for a certain forecast that was wrong)."""
    f, o = _forecasts(p, outcome)
    given = np.where(o == 1, f, 1 - f)
    with np.errstate(divide="ignore"):
        return float(np.mean(-np.log2(given)))


def _bin_ids(f: np.ndarray, bins: int) -> np.ndarray:
    """Equal-width bins on [0, 1] as scikit-learn's calibration_curve cuts them: bin k
    holds edges[k] < p <= edges[k+1] (the first bin includes 0)."""
    if bins < 1:
        raise ValueError(f"bins {bins}: use 1 or more")
    edges = np.linspace(0.0, 1.0, bins + 1)
    return np.searchsorted(edges[1:-1], f)


@dataclass(frozen=True)
class Murphy:
    """brier = reliability - resolution + uncertainty + within_variance - within_covariance.

    reliability: how far each bin's mean forecast is from its observed frequency (0 is
    perfectly calibrated); resolution: how far the bins' frequencies spread from the base
    rate (higher is better); uncertainty: base rate x (1 - base rate), the Brier score of
    always forecasting the base rate. The within-bin terms (Stephenson et al. 2008) vanish
    when every forecast in a bin is the same value.
    """

    brier: float
    reliability: float
    resolution: float
    uncertainty: float
    within_variance: float
    within_covariance: float
    n: int


def murphy_decomposition(p: ArrayLike, outcome: ArrayLike, bins: int = 10) -> Murphy:
    """The Brier score's decomposition over `bins` equal-width forecast bins; exact."""
    f, o = _forecasts(p, outcome)
    ids = _bin_ids(f, bins)
    n, base = f.size, float(o.mean())
    rel = res = wbv = wbc = 0.0
    for k in np.unique(ids):
        fk, ok = f[ids == k], o[ids == k]
        fbar, obar = fk.mean(), ok.mean()
        rel += fk.size * (fbar - obar) ** 2
        res += fk.size * (obar - base) ** 2
        wbv += float(np.sum((fk - fbar) ** 2))
        wbc += 2 * float(np.sum((ok - obar) * (fk - fbar)))
    return Murphy(float(np.mean((f - o) ** 2)), rel / n, res / n, base * (1 - base),
                  wbv / n, wbc / n, n)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion (Wilson 1927)."""
    if n <= 0:
        return (0.0, 1.0)
    z = float(st.norm.ppf(0.5 + confidence / 2))
    phat = successes / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class ReliabilityBin:
    """One point of a reliability diagram."""

    low: float  # the bin's edges
    high: float
    n: int
    mean_forecast: float
    observed: float  # frequency of the outcome among these forecasts
    ci_low: float  # Wilson 95% interval of the observed frequency
    ci_high: float


def reliability_bins(p: ArrayLike, outcome: ArrayLike, bins: int = 10,
                     confidence: float = 0.95) -> list[ReliabilityBin]:
    """Non-empty equal-width bins (as `sklearn.calibration.calibration_curve` with
    strategy="uniform"), each with a Wilson interval on its observed frequency."""
    f, o = _forecasts(p, outcome)
    ids = _bin_ids(f, bins)
    out = []
    for k in np.unique(ids):
        fk, ok = f[ids == k], o[ids == k]
        hits = int(ok.sum())
        low, high = wilson_interval(hits, fk.size, confidence)
        out.append(ReliabilityBin(k / bins, (k + 1) / bins, int(fk.size), float(fk.mean()),
                                  hits / fk.size, low, high))
    return out


@dataclass(frozen=True)
class LevelCalibration:
    """How often forecasts stated at one confidence level came true."""

    level: float  # e.g. 0.8: forecasts of 0.8 for the outcome (or 0.2, for its opposite)
    n: int
    hits: int
    rate: float
    ci_low: float
    ci_high: float

    @property
    def words(self) -> str:
        return (f"your {self.level:.0%} predictions came true {self.rate:.0%} of the time "
                f"[{self.ci_low:.0%}, {self.ci_high:.0%}] ({self.hits} of {self.n})")


def calibration_by_level(p: ArrayLike, outcome: ArrayLike,
                         confidence: float = 0.95) -> list[LevelCalibration]:
    """Forecasts folded to the side they favour (0.2 for "supported" is 0.8 for "not") and
    rounded to the nearest 10%: how often each level's favoured outcome happened, with a
    Wilson interval. A calibrated forecaster's 80% predictions come true about 80% of the
    time."""
    f, o = _forecasts(p, outcome)
    level = np.round(np.maximum(f, 1 - f) * 10) / 10
    right = np.where(f >= 0.5, o, 1 - o)
    out = []
    for lv in np.unique(level):
        mask = level == lv
        hits, n = int(right[mask].sum()), int(mask.sum())
        low, high = wilson_interval(hits, n, confidence)
        out.append(LevelCalibration(float(lv), n, hits, hits / n, low, high))
    return out


@dataclass(frozen=True)
class CalibrationTest:
    z: float
    p_value: float
    n: int

    def flagged(self, alpha: float = CALIBRATION_ALPHA) -> bool:
        return self.p_value < alpha


def spiegelhalter_z(p: ArrayLike, outcome: ArrayLike) -> CalibrationTest:
    """Spiegelhalter's (1986) test that the forecasts are calibrated: under calibration,
    z = sum (o - p)(1 - 2p) / sqrt(sum (1 - 2p)^2 p (1 - p)) is standard normal. An
    overconfident forecaster (too close to 0 and 1) gives z > 0; two-sided p-value."""
    f, o = _forecasts(p, outcome)
    var = float(np.sum((1 - 2 * f) ** 2 * f * (1 - f)))
    if var <= 0:
        return CalibrationTest(float("nan"), float("nan"), f.size)
    z = float(np.sum((o - f) * (1 - 2 * f)) / math.sqrt(var))
    return CalibrationTest(z, float(2 * st.norm.sf(abs(z))), f.size)


def crps_normal(mean: ArrayLike, sd: ArrayLike, observed: ArrayLike) -> np.ndarray:
    """CRPS of a normal forecast N(mean, sd^2) at each observed value (closed form,
    Gneiting & Raftery 2007, eq. 21); in the observation's units, lower is better."""
    mu, sigma, y = np.broadcast_arrays(np.asarray(mean, float), np.asarray(sd, float),
                                       np.asarray(observed, float))
    if np.any(sigma <= 0):
        raise ValueError("a normal forecast needs sd > 0")
    z = (y - mu) / sigma
    return sigma * (z * (2 * st.norm.cdf(z) - 1) + 2 * st.norm.pdf(z) - 1 / math.sqrt(math.pi))


def interval_normal(low: float, high: float, coverage: float = 0.8,
                    centre: float | None = None) -> tuple[float, float]:
    """The normal an interval describes: centred on `centre` (default its midpoint), with the
    sd that gives the interval's width `coverage` probability."""
    if not low < high:
        raise ValueError(f"interval [{low}, {high}] must have low < high")
    z = float(st.norm.ppf(0.5 + coverage / 2))
    return ((low + high) / 2 if centre is None else centre), (high - low) / (2 * z)


def crps_interval(low: float, high: float, observed: float, coverage: float = 0.8,
                  centre: float | None = None) -> float:
    """CRPS of an effect forecast given as a `coverage` interval, read as a normal."""
    mean, sd = interval_normal(low, high, coverage, centre)
    return float(crps_normal(mean, sd, observed))


def _entropy(p: float) -> float:
    """Binary entropy in bits."""
    if p <= 0 or p >= 1:
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def expected_information(prior: float, power: float, alpha: float) -> float:
    """Expected information (bits) a test's verdict gives about a claim (Lindley 1956).

    The claim is true with probability `prior`; the verdict says "supported" with
    probability `power` if it is true and `alpha` if it is not. The answer is the mutual
    information I(claim; verdict) = H(verdict) - E[H(verdict | claim)], which equals the
    expected entropy reduction of the claim and the expected KL divergence of the posterior
    from the prior. 0 for a certain prior or a test with power = alpha; at most 1 bit.
    """
    for name, x in (("prior", prior), ("power", power), ("alpha", alpha)):
        if not 0 <= x <= 1:
            raise ValueError(f"{name} {x} is a probability: it must lie in [0, 1]")
    yes = prior * power + (1 - prior) * alpha
    return max(0.0, _entropy(yes) - prior * _entropy(power) - (1 - prior) * _entropy(alpha))
