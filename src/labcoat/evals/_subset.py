"""Small, meaningful subsets: items that keep the full suite's ranking of checkpoints and models.

Input: item-level results of several models (or checkpoints of one run),
``scores (n_models, n_items)``, all on the same items. The subset is chosen
on all models; how well such a choice carries over to models it was not
chosen on is estimated by cross-validation: the models are split (seeded)
into folds, items are chosen again without each fold, and each model's
subset score comes from the choice made without it, so the reported rank
correlation is not flattered by the search (Polo et al. 2024, tinyBenchmarks,
check anchor points on held-out models the same way).

Selection is stratified twice and needs no search: every task gets an equal
quota q (the suite score is a macro average over tasks); within a task, items
are sorted by difficulty (mean score over the models) into q bins of equal
count, and each bin gives its most discriminating item: the highest
item-rest correlation (Pearson correlation of the item's scores with the
models' total on the task's other items; classical test theory's corrected
item-total correlation). Items that separate strong from weak models carry
the ranking; spreading them over difficulty keeps both ends of the ranking
resolved. A greedy search that maximized Kendall's tau on the given models
overfits them; `benchmarks/subset_selection.py` compares both with random
subsets, cross-validated, on synthetic two-parameter-logistic results.

Reported: Kendall's tau and Spearman's rho (scipy) between cross-validated
subset scores and full scores, the same for seeded random subsets with the
same quotas (the baseline to beat), and how much wider the intervals get:
the median 95% CI width of a model's macro mean (per-task `stats.eval_mean`,
combined as SE = sqrt(sum SE_t^2) / T) and of the paired difference between
neighbouring models in the full ranking (`stats.paired_difference` per task,
`stats.macro_average`), subset over full.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats as sps

from labcoat import stats
from labcoat.errors import LabcoatError
from labcoat.stats import StatsWarning

MIN_MODELS = 4  # so that every fold leaves at least two models to choose items with
RANDOM_DRAWS = 200  # random subsets behind the baseline correlation


@dataclass
class SubsetChoice:
    """A chosen subset and how well it stands in for the full suite.

    items: (task, item id) of the chosen items, in the order chosen (on all models).
    kendall, spearman: cross-validated rank correlation of subset and full-suite
        scores: each model's subset score comes from the items chosen without its
        fold (`folds`, `fold_items`), pooled over all models.
    kendall_in_sample: the chosen items' Kendall tau on the models they were chosen on.
    random_kendall, random_spearman: the median over random subsets with the
        same per-task quotas (no search, so no cross-validation needed).
    ci_width_ratio: median over models of the CI width of a model's macro mean,
        subset / full (None when a task has fewer than 2 chosen items).
    difference_ci_width_ratio: the same for paired differences of neighbouring
        models in the full ranking (None also when no two models differ).
    """

    items: list[tuple[str, str]]
    size: int
    n_items: int
    quotas: dict[str, int]
    models: list[str]
    folds: list[list[str]]
    fold_items: list[list[tuple[str, str]]]
    kendall: float
    spearman: float
    kendall_in_sample: float
    random_kendall: float
    random_spearman: float
    ci_width_ratio: float | None
    difference_ci_width_ratio: float | None
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["items"] = [{"task": t, "item": i} for t, i in self.items]
        out["fold_items"] = [[{"task": t, "item": i} for t, i in f] for f in self.fold_items]
        return out


def choose_subset(scores: np.ndarray, tasks: Sequence[str], items: Sequence[str], size: int, *,
                  models: Sequence[str] | None = None, folds: int = 5, seed: int = 0,
                  clusters: Sequence[str] | None = None) -> SubsetChoice:
    """Choose `size` items of the suite whose macro score ranks models as the full suite does.

    scores: (n_models, n_items) item scores, every model on every item.
    tasks, items: (n_items,) task and item id of each column; clusters: (n_items,)
        optional cluster ids (cluster-robust CIs). models: (n_models,) names.
    folds: cross-validation folds of models (at most one per model) for the
        reported rank correlations; seed: the fold split and random baseline.
    """
    x = _check(scores, tasks, items, size, folds)
    n_models, n_items = x.shape
    names = list(models) if models is not None else [f"model{i}" for i in range(n_models)]
    rng = np.random.default_rng(seed)
    task_array = np.asarray(tasks)
    quotas = _quotas(task_array, size)
    full = _macro(x, task_array)
    chosen = _pick(x, task_array, quotas)
    fold_of = np.empty(n_models, dtype=np.int64)
    fold_of[rng.permutation(n_models)] = np.arange(n_models) % min(folds, n_models)
    cross_validated = np.empty(n_models)
    fold_items = []
    for fold in range(min(folds, n_models)):
        out = fold_of == fold
        picked = _pick(x[~out], task_array, quotas)
        cross_validated[out] = _macro(x[np.ix_(out, picked)], task_array[picked])
        fold_items.append(picked)
    random_k, random_s = _random_baseline(x, full, task_array, quotas, rng)
    ratio, diff_ratio, found = _ci_ratios(x, full, task_array, quotas, chosen, clusters)
    if n_models < 8:
        found.append(f"only {n_models} models: rank correlations over so few can take few "
                     "values; results of more models or checkpoints make them informative")
    key = [(str(t), str(i)) for t, i in zip(tasks, items, strict=True)]
    return SubsetChoice(
        items=[key[i] for i in chosen], size=len(chosen), n_items=n_items, quotas=quotas,
        models=names, folds=[[names[m] for m in np.flatnonzero(fold_of == f)]
                             for f in range(len(fold_items))],
        fold_items=[[key[i] for i in picked] for picked in fold_items],
        kendall=_tau(cross_validated, full), spearman=_rho(cross_validated, full),
        kendall_in_sample=_tau(_macro(x[:, chosen], task_array[chosen]), full),
        random_kendall=random_k, random_spearman=random_s,
        ci_width_ratio=ratio, difference_ci_width_ratio=diff_ratio,
        warnings=list(dict.fromkeys(found)))


def _ci_ratios(x: np.ndarray, full: np.ndarray, tasks: np.ndarray, quotas: dict[str, int],
               chosen: list[int], clusters: Sequence[str] | None
               ) -> tuple[float | None, float | None, list[str]]:
    """(mean CI width ratio, difference CI width ratio, warnings), see `SubsetChoice`."""
    if min(quotas.values()) < 2:
        return None, None, [f"CI widths need at least 2 items per task; choose a size of at "
                            f"least {2 * len(quotas)} to see how much wider the intervals get"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StatsWarning)
        ratio = _ci_ratio(x, tasks, chosen, clusters)
        diff_ratio = _difference_ci_ratio(x, full, tasks, chosen, clusters)
    return ratio, diff_ratio, [str(w.message) for w in caught
                               if issubclass(w.category, StatsWarning)]


def _check(scores: np.ndarray, tasks: Sequence[str], items: Sequence[str], size: int,
           folds: int) -> np.ndarray:
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2 or x.shape[1] != len(tasks) or len(items) != len(tasks):
        raise ValueError(f"scores must be (n_models, n_items) with one task and item id per "
                         f"column; got {x.shape}, {len(tasks)} tasks, {len(items)} ids")
    if not np.isfinite(x).all():
        raise LabcoatError("item scores must be finite; remove or fix the missing results")
    if x.shape[0] < MIN_MODELS:
        raise LabcoatError(f"choosing a subset needs item results of at least {MIN_MODELS} "
                           f"models or checkpoints on the same items (got {x.shape[0]}), to "
                           "choose items on some and check the choice on others")
    n_tasks = len(set(tasks))
    if not n_tasks <= size <= x.shape[1]:
        raise LabcoatError(f"subset size {size} must be between the number of tasks "
                           f"({n_tasks}: one item each) and the number of items ({x.shape[1]})")
    if folds < 2:
        raise LabcoatError(f"folds {folds} must be at least 2 (models are split into folds to "
                           "check the choice on models it was not made on)")
    return x


def _quotas(tasks: np.ndarray, size: int) -> dict[str, int]:
    """Equal items per task (largest tasks take the remainder), capped by each task's size."""
    counts = {t: int((tasks == t).sum()) for t in dict.fromkeys(tasks.tolist())}
    quotas = dict.fromkeys(counts, 0)
    left = size
    while left:
        open_tasks = sorted((t for t in counts if quotas[t] < counts[t]),
                            key=lambda t: (quotas[t], -counts[t]))
        quotas[open_tasks[0]] += 1
        left -= 1
    return quotas


def _macro(x: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """(n_models,) mean over tasks of each task's mean item score.

    Rounded to 12 decimals so that models tied in exact arithmetic tie here too,
    whatever order the float sums ran in (ties count in Kendall's tau-b).
    """
    means = [x[:, tasks == t].mean(axis=1) for t in sorted(set(tasks.tolist()))]
    return np.round(np.mean(means, axis=0), 12)


def _pick(x: np.ndarray, tasks: np.ndarray, quotas: dict[str, int]) -> list[int]:
    """Per task, the most discriminating item of each of `quota` difficulty bins.

    x: (m, n_items) the models' scores. Returns column indices, task by task,
    easiest bin first.
    """
    chosen: list[int] = []
    for task, quota in quotas.items():
        columns = np.flatnonzero(tasks == task)
        discrimination = item_rest_correlation(x[:, columns])
        by_difficulty = np.argsort(-x[:, columns].mean(axis=0), kind="stable")
        for bin_ in np.array_split(by_difficulty, quota):
            chosen.append(int(columns[bin_[np.argmax(discrimination[bin_])]]))
    return chosen


def item_rest_correlation(x: np.ndarray) -> np.ndarray:
    """(n_items,) Pearson correlation of each column of x (m, n_items) with the row sum of
    the other columns; -1 where either is constant (it cannot separate models)."""
    rest = x.sum(axis=1, keepdims=True) - x
    a = x - x.mean(axis=0)
    b = rest - rest.mean(axis=0)
    denominator = np.sqrt((a**2).sum(axis=0) * (b**2).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (a * b).sum(axis=0) / denominator
    return np.where(denominator > 0, r, -1.0)


def _tau(a: np.ndarray, b: np.ndarray) -> float:
    """scipy's Kendall tau-b; 0 when a score is constant (no ranking to agree with)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sps.ConstantInputWarning)
        return float(np.nan_to_num(sps.kendalltau(a, b).statistic))


def _rho(a: np.ndarray, b: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sps.ConstantInputWarning)
        return float(np.nan_to_num(sps.spearmanr(a, b).statistic))


def _random_baseline(x: np.ndarray, full: np.ndarray, tasks: np.ndarray, quotas: dict[str, int],
                     rng: np.random.Generator) -> tuple[float, float]:
    """Median Kendall and Spearman of random subsets with the same task quotas."""
    by_task = {t: np.flatnonzero(tasks == t) for t in quotas}
    kendalls, spearmans = [], []
    for _ in range(RANDOM_DRAWS):
        picked = np.concatenate([rng.choice(by_task[t], size=q, replace=False)
                                 for t, q in quotas.items() if q])
        score = _macro(x[:, picked], tasks[picked])
        kendalls.append(_tau(score, full))
        spearmans.append(_rho(score, full))
    return float(np.median(kendalls)), float(np.median(spearmans))


def _macro_se(per_task_se: list[float]) -> float:
    """SE of an unweighted mean of independent per-task means (as `stats.macro_average`)."""
    return float(np.sqrt(np.sum(np.square(per_task_se))) / len(per_task_se))


def _columns(tasks: np.ndarray, chosen: list[int] | None) -> dict[str, np.ndarray]:
    """task -> its item columns (all, or the chosen ones)."""
    keep = np.zeros(len(tasks), dtype=bool)
    keep[chosen if chosen is not None else slice(None)] = True
    return {t: np.flatnonzero((tasks == t) & keep) for t in dict.fromkeys(tasks.tolist())}


def _mean_ci_width(row: np.ndarray, columns: dict[str, np.ndarray],
                   clusters: Sequence[str] | None) -> float:
    se = [stats.eval_mean(row[c], clusters=_take(clusters, c)).se for c in columns.values()]
    return 2 * 1.959963984540054 * _macro_se(se)


def _take(clusters: Sequence[str] | None, columns: np.ndarray) -> list[str] | None:
    if clusters is None:
        return None
    picked = [clusters[i] for i in columns]
    return picked if len(set(picked)) >= 2 else None


def _ci_ratio(x: np.ndarray, tasks: np.ndarray, chosen: list[int],
              clusters: Sequence[str] | None) -> float:
    """Median CI width of a model's macro mean on the subset over that on the full suite."""
    sub, full = _columns(tasks, chosen), _columns(tasks, None)
    widths_sub = [_mean_ci_width(row, sub, clusters) for row in x]
    widths_full = [_mean_ci_width(row, full, clusters) for row in x]
    return _ratio(widths_sub, widths_full)


def _difference_ci_ratio(x: np.ndarray, full: np.ndarray, tasks: np.ndarray, chosen: list[int],
                         clusters: Sequence[str] | None) -> float | None:
    """The same for paired differences between neighbours in the models' full ranking."""
    order = np.argsort(full)
    pairs = [(a, b) for a, b in zip(order[:-1], order[1:], strict=True)
             if not np.array_equal(x[a], x[b])]
    if not pairs:
        return None
    sub, every = _columns(tasks, chosen), _columns(tasks, None)
    widths_sub = [_difference_width(x[a], x[b], sub, clusters) for a, b in pairs]
    widths_full = [_difference_width(x[a], x[b], every, clusters) for a, b in pairs]
    return _ratio(widths_sub, widths_full)


def _difference_width(a: np.ndarray, b: np.ndarray, columns: dict[str, np.ndarray],
                      clusters: Sequence[str] | None) -> float:
    per_task = [stats.paired_difference(a[c], b[c], clusters=_take(clusters, c))
                for c in columns.values()]
    combined = per_task[0] if len(per_task) == 1 else stats.macro_average(per_task)
    return combined.high - combined.low


def _ratio(sub: list[float], full: list[float]) -> float:
    sub_median, full_median = np.nanmedian(sub), np.nanmedian(full)
    return float(sub_median / full_median) if full_median > 0 else float("nan")


@dataclass
class ResultMatrix:
    """Item results of several models on the same items, ready for `choose_subset`.

    scores: (n_models, n_items); models: (n_models,); tasks, items: (n_items,).
    dropped: models left out because they did not score every item.
    """

    scores: np.ndarray
    models: list[str]
    tasks: list[str]
    items: list[str]
    dropped: list[str]


def result_matrix(records: Sequence[tuple[str, str, str, float]]) -> ResultMatrix:
    """(model, task, item, score) records -> the models that scored the most common item set.

    The item set is the largest any model scored (for a run, its full-suite
    evaluation); models (e.g. checkpoints evaluated on a subset only) that miss
    any of those items are dropped and listed.
    """
    by_model: dict[str, dict[tuple[str, str], float]] = {}
    for model, task, item, score in records:
        by_model.setdefault(model, {})[(task, item)] = float(score)
    if not by_model:
        raise LabcoatError("no item results to choose a subset from")
    keys = sorted(max(by_model.values(), key=len))
    wanted = set(keys)
    kept = [m for m, r in by_model.items() if wanted <= r.keys()]
    scores = np.array([[by_model[m][k] for k in keys] for m in kept])
    return ResultMatrix(scores, kept, [t for t, _ in keys], [i for _, i in keys],
                        [m for m in by_model if m not in kept])
