"""Small, meaningful subsets: items that keep the full suite's ranking of checkpoints and models.

Input: item-level results of several models (or checkpoints of one run),
``scores (n_models, n_items)``, all on the same items. The models are split
(seeded) into a selection set and a held-out set; items are chosen on the
selection set only and judged on the held-out one, so the reported rank
correlation is not flattered by the search (Polo et al. 2024, tinyBenchmarks,
evaluate anchor points the same way).

Selection is stratified and greedy: every task gets an equal quota (the suite
score is a macro average over tasks), and items are added one at a time,
each time the one that most increases the number of concordant model pairs
(Kendall's tau, as counts) between the subset score and the full-suite score;
ties go to the larger Pearson correlation. The subset score weights each
chosen item by 1 / (tasks x task quota), which is the macro average once the
subset is complete.

Reported: Kendall's tau and Spearman's rho (scipy) between subset and full
scores on the held-out models, the same for seeded random subsets with the
same quotas (the baseline to beat), and how much wider the intervals get:
the median 95% CI width of a model's macro mean (per-task `stats.eval_mean`,
combined as SE = sqrt(sum SE_t^2) / T) and of the paired difference between
neighbouring held-out models (`stats.paired_difference` per task,
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

MIN_MODELS = 4  # two to select on, two to judge on
RANDOM_DRAWS = 200  # random subsets behind the baseline correlation


@dataclass
class SubsetChoice:
    """A chosen subset and how well it stands in for the full suite.

    items: (task, item id) of the chosen items, in the order chosen.
    kendall, spearman: rank correlation of subset and full-suite scores over the
        held-out models; random_kendall, random_spearman: the median of the same
        over random subsets with the same per-task quotas.
    kendall_selection: Kendall's tau on the models used for selection.
    ci_width_ratio: median CI width of a model's macro mean, subset / full (None
        when a task has fewer than 2 chosen items: no per-task variance).
    difference_ci_width_ratio: the same for paired differences of neighbouring
        held-out models (None also when no two held-out models differ).
    """

    items: list[tuple[str, str]]
    size: int
    n_items: int
    quotas: dict[str, int]
    selection_models: list[str]
    held_out_models: list[str]
    kendall: float
    spearman: float
    random_kendall: float
    random_spearman: float
    kendall_selection: float
    ci_width_ratio: float | None
    difference_ci_width_ratio: float | None
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["items"] = [{"task": t, "item": i} for t, i in self.items]
        return out


def choose_subset(scores: np.ndarray, tasks: Sequence[str], items: Sequence[str], size: int, *,
                  models: Sequence[str] | None = None, held_out: float = 0.3, seed: int = 0,
                  clusters: Sequence[str] | None = None) -> SubsetChoice:
    """Choose `size` items of the suite whose macro score ranks models as the full suite does.

    scores: (n_models, n_items) item scores, every model on every item.
    tasks, items: (n_items,) task and item id of each column; clusters: (n_items,)
        optional cluster ids (cluster-robust CIs).
    held_out: fraction of models kept out of the selection (at least 2; at least
        2 stay in it). models: (n_models,) names for the report.
    """
    x = _check(scores, tasks, items, size, held_out)
    n_models, n_items = x.shape
    names = list(models) if models is not None else [f"model{i}" for i in range(n_models)]
    rng = np.random.default_rng(seed)
    order = rng.permutation(n_models)
    n_out = min(n_models - 2, max(2, round(held_out * n_models)))
    judge, select = np.sort(order[:n_out]), np.sort(order[n_out:])
    task_array = np.asarray(tasks)
    quotas = _quotas(task_array, size)
    weights = _weights(task_array, quotas)
    full = _macro(x, task_array)
    chosen = _greedy(x[select], full[select], task_array, quotas, weights)
    subset_score = _macro(x[:, chosen], task_array[chosen])
    kendall = _tau(subset_score[judge], full[judge])
    spearman = _rho(subset_score[judge], full[judge])
    random_k, random_s = _random_baseline(x[judge], full[judge], task_array, quotas, rng)
    ratio = diff_ratio = None
    found = []
    if min(q for q in quotas.values()) >= 2:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StatsWarning)
            ratio = _ci_ratio(x[judge], task_array, chosen, clusters)
            diff_ratio = _difference_ci_ratio(x[judge], full[judge], task_array, chosen,
                                              clusters)
        found = [str(w.message) for w in caught if issubclass(w.category, StatsWarning)]
    else:
        found.append(f"CI widths need at least 2 items per task; choose a size of at least "
                     f"{2 * len(quotas)} to see how much wider the intervals get")
    if len(judge) < 5:
        found.append(f"only {len(judge)} held-out models: their rank correlation can take few "
                     "values; results of more models or checkpoints make it informative")
    return SubsetChoice(
        items=[(str(tasks[i]), str(items[i])) for i in chosen], size=len(chosen),
        n_items=n_items, quotas=quotas,
        selection_models=[names[i] for i in select], held_out_models=[names[i] for i in judge],
        kendall=kendall, spearman=spearman, random_kendall=random_k, random_spearman=random_s,
        kendall_selection=_tau(subset_score[select], full[select]),
        ci_width_ratio=ratio, difference_ci_width_ratio=diff_ratio,
        warnings=list(dict.fromkeys(found)))


def _check(scores: np.ndarray, tasks: Sequence[str], items: Sequence[str], size: int,
           held_out: float) -> np.ndarray:
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2 or x.shape[1] != len(tasks) or len(items) != len(tasks):
        raise ValueError(f"scores must be (n_models, n_items) with one task and item id per "
                         f"column; got {x.shape}, {len(tasks)} tasks, {len(items)} ids")
    if not np.isfinite(x).all():
        raise LabcoatError("item scores must be finite; remove or fix the missing results")
    if x.shape[0] < MIN_MODELS:
        raise LabcoatError(f"choosing a subset needs item results of at least {MIN_MODELS} "
                           f"models or checkpoints on the same items (got {x.shape[0]}): "
                           "half to choose items with, half to check the choice on")
    n_tasks = len(set(tasks))
    if not n_tasks <= size <= x.shape[1]:
        raise LabcoatError(f"subset size {size} must be between the number of tasks "
                           f"({n_tasks}: one item each) and the number of items ({x.shape[1]})")
    if not 0 < held_out < 1:
        raise LabcoatError(f"held-out fraction {held_out} must be between 0 and 1, e.g. 0.3")
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


def _weights(tasks: np.ndarray, quotas: dict[str, int]) -> np.ndarray:
    """Each item's weight in the subset's macro score: 1 / (tasks x its task's quota)."""
    return np.array([1.0 / (len(quotas) * quotas[t]) for t in tasks.tolist()])


def _macro(x: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """(n_models,) mean over tasks of each task's mean item score."""
    return np.mean([x[:, tasks == t].mean(axis=1) for t in dict.fromkeys(tasks.tolist())], axis=0)


def _greedy(x: np.ndarray, full: np.ndarray, tasks: np.ndarray, quotas: dict[str, int],
            weights: np.ndarray) -> list[int]:
    """Add the item that most raises concordant pairs with `full` (see the module docstring).

    x: (m, n_items) selection models' scores; full: (m,) their full-suite scores.
    """
    m = x.shape[0]
    i, j = np.triu_indices(m, k=1)
    truth = np.sign(full[i] - full[j])  # (pairs,)
    partial = np.zeros(m)
    left = dict(quotas)
    available = np.ones(x.shape[1], dtype=bool)
    chosen: list[int] = []
    for _ in range(sum(quotas.values())):
        open_task = np.isin(tasks, [t for t, q in left.items() if q > 0])
        candidates = np.flatnonzero(available & open_task)
        # Rounded so that scores tied in exact arithmetic tie here too (sign 0, as in tau).
        trial = np.round(partial[:, None] + x[:, candidates] * weights[candidates], 12)
        concordant = (np.sign(trial[i] - trial[j]) * truth[:, None]).sum(axis=0)
        best = candidates[np.lexsort((-_pearson(trial, full), -concordant))[0]]
        chosen.append(int(best))
        partial += x[:, best] * weights[best]
        available[best] = False
        left[str(tasks[best])] -= 1
    return chosen


def _pearson(columns: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Pearson correlation of each column of (m, C) with target (m,); 0 for constant columns."""
    a = columns - columns.mean(axis=0)
    b = target - target.mean()
    denominator = np.sqrt((a**2).sum(axis=0) * (b**2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (a * b[:, None]).sum(axis=0) / denominator
    return np.nan_to_num(r)


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
    """Median held-out Kendall and Spearman of random subsets with the same task quotas."""
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
    """The same for paired differences between neighbours in the held-out models' ranking."""
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
