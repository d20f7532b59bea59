"""Two-sample tests and effect sizes for runs: permutation, Mann-Whitney U, Hedges' g.

Welch's and the paired t test live in `_seeds.py`. Everything here compares
b with a (variant minus control): positive effects mean b is larger. Each
function warns (StatsWarning) when a group has fewer than 5 runs, and takes
optional run ids to catch several values per run (pseudoreplication).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special
from scipy import stats as sps

from labcoat.stats._checks import StatsWarning, check_ci
from labcoat.stats._seeds import _finite_1d, count_runs, warn_few_runs
from labcoat.stats._types import Interval

_BATCH = 8192  # permutations evaluated per vectorized batch (bounds memory)


@dataclass(frozen=True)
class PermutationResult:
    """A permutation test of mean(b) - mean(a) (or mean(b - a) when paired).

    p_value is two-sided: 2 * min(P(T <= t), P(T >= t)) under the permutation
    null, capped at 1 (the convention of scipy.stats.permutation_test).
    exact: every permutation was enumerated (`permutations` of them); otherwise
    `permutations` random ones were drawn and p = (count + 1) / (permutations + 1)
    (Phipson & Smyth 2010), which is never 0.
    """

    estimate: float
    p_value: float
    exact: bool
    permutations: int
    method: str
    n: int


@dataclass(frozen=True)
class MannWhitneyResult:
    """Mann-Whitney U test of b against a, with the probability of superiority.

    u: U statistic of b, the number of (a_i, b_j) pairs with b_j > a_i plus half
    the ties. superiority: u / (n_a * n_b) = P(B > A) + P(B = A) / 2, the
    common-language effect size (McGraw & Wong 1992; Vargha & Delaney 2000's A);
    0.5 means neither tends to be larger. method: "exact" or "asymptotic".
    """

    u: float
    p_value: float
    superiority: float
    method: str
    n_a: int
    n_b: int


def _generator(seed: int | np.random.Generator) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(
            f"seed={seed!r} must be an int or a numpy.random.Generator, so results repeat"
        )
    return np.random.default_rng(int(seed))


def permutation_test(
    a: ArrayLike, b: ArrayLike, *, reps: int = 10_000, seed: int | np.random.Generator = 0,
    paired: bool = False, runs_a: ArrayLike | None = None, runs_b: ArrayLike | None = None,
) -> PermutationResult:
    """Permutation test for a difference in means, exact when permutations are few.

    a: (n_a,), b: (n_b,) one value per run. Unpaired: the statistic is
    mean(b) - mean(a) and the null reshuffles group labels; exact when
    C(n_a + n_b, n_a) <= reps. paired=True: a, b are (n,) aligned by seed, the
    statistic is mean(b - a) and the null flips the sign of each difference;
    exact when 2**n <= reps. Otherwise `reps` random permutations drawn from
    `seed` (an int or a Generator; nothing else is random).
    runs_a, runs_b: optional run ids (unpaired only), see `welch`.
    """
    if isinstance(reps, bool) or not isinstance(reps, int | np.integer) or reps < 1:
        raise ValueError(f"reps={reps!r} must be a positive integer, e.g. 10_000")
    rng = _generator(seed)
    x, y = _finite_1d(a, "a"), _finite_1d(b, "b")
    if paired:
        if runs_a is not None or runs_b is not None:
            raise ValueError("runs_a/runs_b apply to unpaired data; paired values are per seed")
        if x.shape != y.shape:
            raise ValueError(
                f"paired permutation test needs aligned values: got {x.size} and {y.size}; "
                "use paired=False for unpaired runs"
            )
        warn_few_runs(x.size, "a and b", "permutation_test")
        d = y - x
        observed = float(d.mean())
        total = 2**d.size
        exact = total <= reps
        null = _sign_flips(d, total if exact else reps, None if exact else rng)
        method = "permutation-paired"
    else:
        for values, runs, name in ((x, runs_a, "a"), (y, runs_b, "b")):
            warn_few_runs(count_runs(values, runs, name), name, "permutation_test")
        z = np.concatenate([x, y])
        observed = float(y.mean() - x.mean())
        total = math.comb(z.size, y.size)
        exact = total <= reps
        null = _relabelings(z, x.size, total if exact else reps, None if exact else rng)
        method = "permutation"
    count_le = count_ge = 0
    # Permuted statistics equal to the observed one up to rounding count as ties
    # (scipy uses 100 eps relative to the observed value; we also scale by the data).
    scale = max(abs(observed), float(np.abs(x).max()), float(np.abs(y).max()))
    gamma = 100 * np.finfo(float).eps * scale
    for batch in null:
        count_le += int(np.count_nonzero(batch <= observed + gamma))
        count_ge += int(np.count_nonzero(batch >= observed - gamma))
    n_perm = total if exact else int(reps)
    extra = 0 if exact else 1  # Phipson & Smyth (2010): the observed labeling is one draw
    p_less = (count_le + extra) / (n_perm + extra)
    p_greater = (count_ge + extra) / (n_perm + extra)
    p = min(1.0, 2 * min(p_less, p_greater))
    return PermutationResult(observed, p, exact, n_perm, method, int(x.size + y.size))


def _relabelings(z: np.ndarray, n_a: int, count: int,
                 rng: np.random.Generator | None) -> Iterator[np.ndarray]:
    """Batches of mean(b) - mean(a) over relabelings of pooled z (n,): all when rng is None."""
    n = z.size
    n_b = n - n_a
    total = z.sum()
    if rng is None:
        combos = itertools.combinations(range(n), n_b)
        while chunk := list(itertools.islice(combos, _BATCH)):
            sum_b = z[np.array(chunk, dtype=np.intp)].sum(axis=1)
            yield sum_b / n_b - (total - sum_b) / n_a
        return
    done = 0
    while done < count:
        size = min(_BATCH, count - done)
        shuffled = rng.permuted(np.broadcast_to(z, (size, n)), axis=1)
        yield shuffled[:, n_a:].mean(axis=1) - shuffled[:, :n_a].mean(axis=1)
        done += size


def _sign_flips(d: np.ndarray, count: int,
                rng: np.random.Generator | None) -> Iterator[np.ndarray]:
    """Batches of mean(s * d) over sign vectors s: all 2**n of them when rng is None."""
    n = d.size
    done = 0
    while done < count:
        size = min(_BATCH, count - done)
        if rng is None:
            codes = np.arange(done, done + size, dtype=np.int64)[:, None]
            signs = 1.0 - 2.0 * ((codes >> np.arange(n, dtype=np.int64)) & 1)
        else:
            signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, n))
        yield (signs * d).mean(axis=1)
        done += size


def mann_whitney(a: ArrayLike, b: ArrayLike, *, runs_a: ArrayLike | None = None,
                 runs_b: ArrayLike | None = None) -> MannWhitneyResult:
    """Two-sided Mann-Whitney U test of b against a, with the probability of superiority.

    a: (n_a,), b: (n_b,) one value per run. The p-value is exact (the null
    distribution of U, no ties) when either group has at most 8 runs and no
    values tie; otherwise the normal approximation with tie and continuity
    corrections. These are scipy.stats.mannwhitneyu's defaults (method="auto").
    runs_a, runs_b: optional run ids, see `welch`.
    """
    x, y = _finite_1d(a, "a"), _finite_1d(b, "b")
    for values, runs, name in ((x, runs_a, "a"), (y, runs_b, "b")):
        warn_few_runs(count_runs(values, runs, name), name, "mann_whitney")
    n_a, n_b = x.size, y.size
    z = np.concatenate([x, y])
    ranks = sps.rankdata(z)  # average ranks for ties
    u_b = float(ranks[n_a:].sum() - n_b * (n_b + 1) / 2)  # Mann & Whitney (1947)
    u_a = n_a * n_b - u_b
    u_max = max(u_a, u_b)
    _, tie_sizes = np.unique(z, return_counts=True)
    ties = bool(np.any(tie_sizes > 1))
    if not ties and (n_a <= 8 or n_b <= 8):
        p = 2 * _u_tail(n_a, n_b, int(round(u_max)))
        method = "exact"
    else:
        # Normal approximation with tie correction (Lehmann 1975, eq. 1.52) and a
        # continuity correction of 0.5 toward the mean.
        n = n_a + n_b
        tie_term = float(np.sum(tie_sizes.astype(float) ** 3 - tie_sizes))
        var = n_a * n_b / 12 * ((n + 1) - tie_term / (n * (n - 1)))
        if var <= 0:  # every value equal: no evidence either way
            p = 1.0
        else:
            p = 2 * float(sps.norm.sf((u_max - n_a * n_b / 2 - 0.5) / math.sqrt(var)))
        method = "asymptotic"
    return MannWhitneyResult(u_b, min(1.0, p), u_b / (n_a * n_b), method, int(n_a), int(n_b))


def _u_tail(m: int, n: int, u: int) -> float:
    """P(U >= u) under the null, U = #{(x, y): x > y} for m x's and n y's without ties.

    The number of orderings with U = k is the coefficient of q^k in the Gaussian
    binomial [m+n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i) (Andrews
    1976, "The Theory of Partitions", ch. 3), built here with exact integers: one
    multiplication and one division per i, each a linear pass.
    """
    small, large = min(m, n), max(m, n)  # U's law is symmetric in the roles of m, n
    counts = np.zeros(small * large + small + 1, dtype=object)
    counts[0] = 1
    for i in range(1, small + 1):
        shift = large + i
        counts[shift:] = counts[shift:] - counts[:-shift]  # times (1 - q^(large+i))
        # divided by (1 - q^i): c[k] += c[k - i] in order, a cumulative sum per residue mod i
        padded = np.concatenate([counts, np.zeros(-counts.size % i, dtype=object)])
        counts = np.cumsum(padded.reshape(-1, i), axis=0).ravel()[:counts.size]
    total = math.comb(m + n, m)
    return float(Fraction(int(counts[u:small * large + 1].sum()), total))


def hedges_g(a: ArrayLike, b: ArrayLike, ci: float = 0.95, *,
             runs_a: ArrayLike | None = None, runs_b: ArrayLike | None = None) -> Interval:
    """Hedges' g of b versus a: (mean(b) - mean(a)) / pooled SD, bias-corrected, with a CI.

    a: (n_a,), b: (n_b,) one value per run; n_a + n_b >= 4. g = J * d with
    Cohen's d on the pooled SD and Hedges' exact correction
    J(df) = Gamma(df/2) / (sqrt(df/2) Gamma((df-1)/2)), df = n_a + n_b - 2
    (Hedges 1981; Hedges & Olkin 1985, eq. 5.7 and Table 2).

    Interval: noncentral-t inversion (Steiger & Fouladi 1997): t = d / sqrt(1/n_a
    + 1/n_b) has a noncentral t law with noncentrality delta * sqrt(1/n_a + 1/n_b);
    the ncp bounds are found by root finding, converted to d and multiplied by J,
    as R's effectsize::hedges_g does. Exact for normal data with equal variances.
    se: the large-sample SE J * sqrt((n_a+n_b)/(n_a n_b) + d^2 / (2 (n_a+n_b)))
    (Hedges & Olkin 1985, eq. 5.14; Borenstein et al. 2009, eqs. 4.20-4.24), for
    reference; the interval does not use it.
    """
    check_ci(ci)
    x, y = _finite_1d(a, "a"), _finite_1d(b, "b")
    if x.size < 2 or y.size < 2 or x.size + y.size < 4:
        raise ValueError(
            f"hedges_g needs at least 2 runs per group and 4 in all (got {x.size} and "
            f"{y.size}); add seeds"
        )
    for values, runs, name in ((x, runs_a, "a"), (y, runs_b, "b")):
        warn_few_runs(count_runs(values, runs, name), name, "hedges_g")
    n_a, n_b = x.size, y.size
    df = n_a + n_b - 2
    pooled = math.sqrt(((n_a - 1) * x.var(ddof=1) + (n_b - 1) * y.var(ddof=1)) / df)
    if pooled == 0:
        raise ValueError(
            "hedges_g is undefined when both groups are constant (pooled SD 0); "
            "report the raw difference instead"
        )
    d = float(y.mean() - x.mean()) / pooled
    j = math.exp(special.gammaln(df / 2) - 0.5 * math.log(df / 2)
                 - special.gammaln((df - 1) / 2))
    scale = math.sqrt(1 / n_a + 1 / n_b)
    t = d / scale
    alpha = 1 - ci
    # nct.cdf(t; ncp) falls as ncp grows: the lower bound leaves alpha/2 above t.
    ncp_low = _ncp_root(t, df, 1 - alpha / 2)
    ncp_high = _ncp_root(t, df, alpha / 2)
    n = n_a + n_b
    se = j * math.sqrt(n / (n_a * n_b) + d**2 / (2 * n))
    return Interval(j * d, j * ncp_low * scale, j * ncp_high * scale, se=se, n=int(n), ci=ci)


def _ncp_root(t: float, df: int, target: float) -> float:
    """The noncentrality c with nct.cdf(t, df, c) = target (the cdf falls as c grows).

    The bracket grows from c = t in doubling steps so it stays where scipy's
    nct.cdf is finite (it returns NaN for c hundreds of SDs away from t).
    """
    def gap(c: float) -> float:
        return float(sps.nct.cdf(t, df, c)) - target

    inner = t
    direction = 1.0 if gap(inner) > 0 else -1.0  # move c up to lower the cdf, down to raise
    step = 1.0
    while True:
        outer = t + direction * step
        if gap(outer) * direction <= 0:  # crossed the target
            break
        inner, step = outer, step * 2
    low, high = sorted((inner, outer))
    return float(optimize.brentq(gap, low, high, xtol=1e-12, rtol=1e-12))


def check_same_items(ids_a: Sequence[Any], ids_b: Sequence[Any]) -> list[Any]:
    """The item ids two score lists share, in ids_a's order; warns when the sets differ.

    Metrics computed on different item sets are not comparable (a model that
    skipped the hard items looks better), so compare on the shared ids only.
    Raises ValueError when an id repeats within a list or nothing is shared.
    """
    for ids, name in ((ids_a, "ids_a"), (ids_b, "ids_b")):
        seen: set[Any] = set()
        for item in ids:
            if item in seen:
                raise ValueError(f"{name} repeats item {item!r}; each item must appear once")
            seen.add(item)
    set_b = set(ids_b)
    shared = [item for item in ids_a if item in set_b]
    if not shared:
        raise ValueError(
            f"ids_a ({len(ids_a)} items) and ids_b ({len(ids_b)} items) share no item; "
            "check that both come from the same eval"
        )
    only_a, only_b = len(ids_a) - len(shared), len(set_b) - len(shared)
    if only_a or only_b:
        example = next((i for i in ids_a if i not in set_b), None)
        if example is None:
            set_a = set(ids_a)
            example = next(i for i in ids_b if i not in set_a)
        warnings.warn(
            f"the item sets differ: {only_a} items only in ids_a, {only_b} only in ids_b "
            f"(e.g. {example!r}); metrics over different items are not comparable. "
            f"Compare on the {len(shared)} shared items.",
            StatsWarning, stacklevel=2,
        )
    return shared
