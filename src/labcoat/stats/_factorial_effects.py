"""Factorial effects: main effects and declared interactions by OLS on every seed of every
run, with t intervals (conventions: `labcoat.stats._factorial`)."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from labcoat.stats._checks import StatsWarning, check_ci
from labcoat.stats._factorial import FEW_DF, _check_names, _indices, _label, _order
from labcoat.stats._types import Difference


def factorial_effects(
    design_runs: np.ndarray,
    values: Sequence[Sequence[float]],
    *,
    factors: Sequence[str],
    interactions: Sequence[tuple[str, ...]] = (),
    ci: float = 0.95,
) -> dict[str, Difference]:
    """Main effects and declared interactions of a two-level factorial, with t intervals.

    design_runs: (n_runs, k) coded -1 (baseline) / +1, one row per run (e.g.
        FactorialDesign.runs; a full or fractional design, rows may repeat or be missing
        as long as the model stays estimable).
    values: n_runs entries, each the results of that run's seeds: a sequence (n_seeds_i,)
        or a single number; a (n_runs, n_seeds) array works too. Seeds may differ in
        number between runs.
    factors: the k names of design_runs' columns.
    interactions: interaction terms to estimate, each a tuple of two or more factor
        names, e.g. [("lr", "wd")]. Interactions not declared are assumed zero.

    Fits y = b0 + sum_i b_i x_i + sum_terms b_t prod(x) by OLS on every observation
    (each seed of each run is one row), and reports each term's effect 2 b: the mean
    response at +1 minus the mean at -1, averaged over the other factors (Box, Hunter
    & Hunter 2005, ch. 5: a coefficient of the coded model is half the effect, and
    V(effect) = 4 sigma^2 / N; Montgomery 2013, ch. 6). For an interaction AB this is
    half the difference between A's effect at B = +1 and at B = -1. With equal seeds per
    run in an orthogonal design it equals ybar(+) - ybar(-) exactly, and its SE is
    2 sigma / sqrt(N); sigma^2 is estimated by the residual mean square with
    df = N - p (N observations, p = 1 + k + len(interactions) coefficients), and
    intervals and two-sided p-values use Student's t with those df.

    Returns {name: Difference(b - a = high - low)}: main effects in factor order, then
    interactions in the given order, named as in the module docstring ("lr*wd").

    Raises ValueError when two requested terms (or a term and the mean) share one
    column in the design, i.e. are aliased, naming them; when the terms are linearly
    dependent otherwise (missing runs); when no residual df remain; or when the model
    fits every observation exactly. Warns (StatsWarning) when df < 5, and when an
    estimated term is aliased with a two-factor interaction left out of the model:
    its estimate is then the signed sum of both.
    """
    check_ci(ci)
    names = _check_names(factors, "factors")
    k = len(names)
    runs = np.asarray(design_runs, dtype=float)
    if runs.ndim != 2 or runs.shape[1] != k:
        raise ValueError(
            f"design_runs must have shape (n_runs, {k}) for factors {names}, got shape "
            f"{runs.shape}"
        )
    bad = np.argwhere((runs != 1) & (runs != -1))
    if bad.size:
        r, c = bad[0]
        raise ValueError(
            f"design_runs must be coded -1 (baseline) / +1; run {r}, factor {names[c]!r} is "
            f"{runs[r, c]!r}. Code the levels first (FactorialDesign.runs already is)"
        )
    y_runs = _run_values(values, runs.shape[0])
    terms = _terms(interactions, names)
    labels = [_label(mask, names) for mask in terms]

    # One row per run: the mean, then the product column of each term.
    columns = [np.ones(runs.shape[0])] + [np.prod(runs[:, _indices(m)], axis=1) for m in terms]
    z = np.column_stack(columns)
    _check_estimable(z, ["the mean"] + labels, [0] + terms)
    hidden = _hidden_aliases(runs, terms, names)

    counts = np.array([v.size for v in y_runs])
    x = np.repeat(z, counts, axis=0)
    y = np.concatenate(y_runs)
    n, n_coef = x.shape
    df = n - n_coef
    if df < 1:
        raise ValueError(
            f"{n} observations fit {n_coef} coefficients (the mean, {k} main effect(s), "
            f"{len(terms) - k} interaction(s)) exactly, leaving no residual degrees of "
            "freedom to estimate the noise, so no interval exists; run more seeds per run "
            "or declare fewer interactions"
        )
    q, r = np.linalg.qr(x)
    beta = np.linalg.solve(r, q.T @ y)
    residual = y - x @ beta
    rss = float(residual @ residual)
    scale = float(np.max(np.abs(y)))
    if rss <= n * (1e-10 * scale) ** 2:
        raise ValueError(
            "the model fits every observation exactly (residual variance 0), so every "
            "effect would look certain; check that the seeds really differ (identical "
            "results across seeds mean the seed is not reaching the run)"
        )
    sigma2 = rss / df
    r_inv = np.linalg.inv(r)
    var_beta = sigma2 * np.sum(r_inv**2, axis=1)  # diag((X'X)^-1) = row norms of R^-1
    if df < FEW_DF:
        warnings.warn(
            StatsWarning(
                f"the factorial effects rest on {df} residual degrees of freedom (fewer than "
                f"{FEW_DF}): the noise estimate is rough and the t intervals wide. Run more "
                "seeds per run (each seed adds one df per run) or declare fewer interactions.",
                "few-df",
            ),
            stacklevel=2,
        )
    if hidden:
        warnings.warn(
            StatsWarning(
                "some estimated effects are aliased with two-factor interactions left out "
                "of the model: " + "; ".join(
                    f"{label} = {' = '.join(others)}" for label, others in hidden.items()
                ) + ". Each such estimate is the signed sum of the aliased effects; read it "
                "as the named effect only if the others are negligible.",
                "aliased",
            ),
            stacklevel=2,
        )
    quantile = float(sps.t.ppf(0.5 + ci / 2, df))
    result = {}
    for j, label in enumerate(labels, start=1):
        estimate = 2 * float(beta[j])
        se = 2 * math.sqrt(float(var_beta[j]))
        p_value = float(2 * sps.t.sf(abs(estimate) / se, df))
        method = "factorial effect (OLS, 2b)"
        if label in hidden:
            method += "; aliased with " + ", ".join(hidden[label])
        result[label] = Difference(estimate, estimate - quantile * se, estimate + quantile * se,
                                   se, p_value, method, n=n, df=float(df), ci=ci,
                                   aliases=tuple(hidden.get(label, ())))
    return result


def _run_values(values: Sequence[Sequence[float]], n_runs: int) -> list[np.ndarray]:
    if isinstance(values, str | bytes):
        raise ValueError("values must be one sequence of per-seed results per run")
    rows = list(values)
    if len(rows) != n_runs:
        raise ValueError(
            f"values has {len(rows)} entries for {n_runs} runs in design_runs; give one "
            "entry (that run's per-seed results) per run, in the same order"
        )
    out = []
    for i, row in enumerate(rows):
        array = np.asarray(row, dtype=float).ravel()
        if array.size == 0:
            raise ValueError(
                f"run {i} has no values; drop its row from design_runs and values (the "
                "other runs may still estimate the model) or rerun it"
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"run {i} has NaN or inf values; drop or fix failed seeds first")
        out.append(array)
    return out


def _terms(interactions: Sequence[tuple[str, ...]], names: list[str]) -> list[int]:
    terms = [1 << i for i in range(len(names))]
    if isinstance(interactions, str):
        raise ValueError(
            f"interactions must be a list of tuples of factor names, e.g. [('lr', 'wd')], "
            f"got the string {interactions!r}"
        )
    for term in interactions:
        if isinstance(term, str) or not isinstance(term, Sequence):
            raise ValueError(
                f"interaction {term!r} must be a tuple of factor names, e.g. ('lr', 'wd')"
            )
        unknown = [name for name in term if name not in names]
        if unknown:
            raise ValueError(
                f"interaction {tuple(term)} names {unknown}, not among the factors {names}"
            )
        mask = 0
        for name in term:
            mask |= 1 << names.index(name)
        if _order(mask) != len(term) or len(term) < 2:
            raise ValueError(
                f"interaction {tuple(term)} must name two or more different factors (main "
                "effects are always in the model)"
            )
        if mask in terms:
            raise ValueError(f"interaction {tuple(term)} is declared twice; give it once")
        terms.append(mask)
    return terms


def _check_estimable(z: np.ndarray, labels: list[str], masks: list[int]) -> None:
    """Refuse aliased or otherwise linearly dependent terms (z: (n_runs, 1 + terms))."""
    for i, j in itertools.combinations(range(z.shape[1]), 2):
        same, opposite = np.array_equal(z[:, i], z[:, j]), np.array_equal(z[:, i], -z[:, j])
        if not (same or opposite):
            continue
        if i == 0:
            raise ValueError(
                f"{labels[j]} is aliased with the mean: its column is "
                f"{'+1' if same else '-1'} in every run, so the design cannot estimate it. "
                + ("Its factor never changes; vary it or drop it from factors"
                   if _order(masks[j]) == 1 else
                   "Drop it from interactions (it is a word of the defining relation)")
            )
        raise ValueError(
            f"{labels[i]} and {labels[j]} are aliased in this design: their columns are "
            f"{'identical' if same else 'opposite'} in every run, so the data cannot separate "
            f"them (the estimate would be {labels[i]} {'+' if same else '-'} {labels[j]}). "
            "Declare only one of them in interactions, or add the runs that separate them "
            "(the other fraction, or the full factorial)"
        )
    rank = np.linalg.matrix_rank(z)
    if rank < z.shape[1]:
        _, _, vt = np.linalg.svd(z)
        null = vt[-1]
        involved = [labels[i] for i in np.flatnonzero(np.abs(null) > 1e-8)]
        raise ValueError(
            f"the terms {', '.join(involved)} are linearly dependent in these runs (are runs "
            "missing?), so they cannot all be estimated; add the missing runs or declare "
            "fewer interactions"
        )


def _hidden_aliases(runs: np.ndarray, terms: list[int], names: list[str]) -> dict[str, list[str]]:
    """For each term in the model, the two-factor interactions outside it sharing its column."""
    k = len(names)
    in_model = set(terms)
    outside = [(1 << i) | (1 << j) for i, j in itertools.combinations(range(k), 2)
               if (1 << i) | (1 << j) not in in_model]
    if not outside:
        return {}
    columns = {m: np.prod(runs[:, _indices(m)], axis=1) for m in outside}
    hidden: dict[str, list[str]] = {}
    for term in terms:
        column = np.prod(runs[:, _indices(term)], axis=1)
        for m in outside:
            if np.array_equal(column, columns[m]):
                hidden.setdefault(_label(term, names), []).append(_label(m, names))
            elif np.array_equal(column, -columns[m]):
                hidden.setdefault(_label(term, names), []).append(_label(m, names, -1))
    return hidden


