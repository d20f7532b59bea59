"""Regression verdicts over time: each model (checkpoint) scored on a regression suite is
one entry of the suite's history, judged against the entry before it.

An entry keeps, per item, n answers and c correct (seeds of one checkpoint, Inspect
epochs, result files), and per suite:
- pass@k and pass^k for k = 1..min n: the mean over items of each item's unbiased
  estimate (`stats.pass_at_k`, Chen et al. 2021), with a 95% interval over items
  (`stats.eval_mean`: Wilson for 0/1 values, else the CLT; Miller 2024, items are the
  sample);
- the paired verdict against the previous entry on the items both scored:
  `stats.paired_difference` of the per-item pass@1 (c / n), which for one answer per
  item is the exact McNemar test with Tango's interval and otherwise the paired CLT
  (Miller 2024, sec. 4.2). "regressed" when the interval lies below 0, "improved" above,
  else "no change"; and the items that regressed (every answer right before, every
  answer wrong now) or were fixed.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from labcoat import stats
from labcoat.errors import LabcoatError
from labcoat.evals._harvest import Outcome
from labcoat.evals._regression_suite import RegressionSuite, check_split

DECISIONS = ("regressed", "improved", "no change")


def score_entry(suite: RegressionSuite, outcomes: Iterable[Outcome], *, label: str,
                split: str = "all", ci: float = 0.95, pass_score: float | None = None,
                source: list[str] | None = None) -> dict[str, Any]:
    """Score one model on `suite` (its `outcomes` on the suite's items; other items are
    ignored) and judge it against the last entry of the same split. Returns the entry;
    `record_entry` appends it."""
    check_split(split)
    if not 0 < ci < 1:
        raise LabcoatError(f"--ci {ci} must be a level in (0, 1), e.g. 0.95")
    threshold = float(suite.config.get("pass_score", 1.0) if pass_score is None
                      else pass_score)
    wanted = suite.keys(split)
    if not wanted:
        raise LabcoatError(f"suite {suite.name!r} has no {split!r} items; choose --split all")
    index = {key: i for i, key in enumerate(wanted)}
    n = np.zeros(len(wanted), dtype=np.int64)
    c = np.zeros(len(wanted), dtype=np.int64)
    models, steps, commits = set(), set(), set()
    for o in outcomes:
        i = index.get((o.task, o.item))
        if i is None or o.score is None:
            continue
        n[i] += 1
        c[i] += int(o.score >= threshold)
        models.add(o.model)
        steps.add(o.step)
        commits.add(o.commit)
    scored = np.flatnonzero(n > 0)
    if scored.size == 0:
        example = ", ".join(f"{t}/{i}" for t, i in wanted[:3])
        raise LabcoatError(f"{label}: scored none of the {len(wanted)} items of suite "
                           f"{suite.name!r} (e.g. {example}); score the model on the suite's "
                           "items (same task names and item ids)")
    entry: dict[str, Any] = {
        "label": label, "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "split": split, "source": source or [], "revision": suite.revision,
        "models": sorted(models), "steps": sorted(s for s in steps if s is not None),
        "commits": sorted(x for x in commits if x), "ci": ci, "pass_score": threshold,
        "items": [[wanted[i][0], wanted[i][1], int(n[i]), int(c[i])] for i in scored],
        "missing": len(wanted) - int(scored.size),
    }
    with warnings.catch_warnings(record=True) as caught:  # kept in the entry, said once
        warnings.simplefilter("always", stats.StatsWarning)
        entry.update(_summaries(n[scored], c[scored], ci))
        previous = next((e for e in reversed(suite.history) if e.get("split") == split), None)
        entry["versus"] = versus(previous, entry, ci) if previous is not None else None
    entry["notes"] = list(dict.fromkeys(str(w.message) for w in caught
                                        if issubclass(w.category, stats.StatsWarning)))
    return entry


def record_entry(suite: RegressionSuite, entry: dict[str, Any]) -> None:
    """Append a scored entry to the suite's history (save the suite to keep it)."""
    suite.history.append(entry)


def _summaries(n: np.ndarray, c: np.ndarray, ci: float) -> dict[str, Any]:
    """pass@k and pass^k over items for k = 1..min(n) (items with fewer answers cannot
    estimate a larger k)."""
    out: dict[str, Any] = {"pass_at": {}, "pass_hat": {}, "flaky": int(np.sum((c > 0) & (c < n)))}
    for k in range(1, int(n.min()) + 1):
        for name, function in (("pass_at", stats.pass_at_k_items),
                               ("pass_hat", stats.pass_hat_k_items)):
            out[name][str(k)] = _interval(function(n, c, k), ci)
    return out


def _interval(values: np.ndarray, ci: float) -> dict[str, float]:
    if values.size == 1:
        return {"point": float(values[0]), "low": None, "high": None, "n": 1}  # JSON: no NaN
    interval = stats.eval_mean(values, ci=ci, bounds=(0.0, 1.0))
    return {"point": interval.point, "low": interval.low, "high": interval.high,
            "n": int(values.size)}


def versus(previous: dict[str, Any], entry: dict[str, Any], ci: float) -> dict[str, Any]:
    """The paired comparison of `entry` against `previous` on the items both scored."""
    before = {(t, i): (n, c) for t, i, n, c in previous["items"]}
    shared = [(t, i, n, c) for t, i, n, c in entry["items"] if (t, i) in before]
    result: dict[str, Any] = {"label": previous["label"], "items": len(shared)}
    if len(shared) < 2:
        return result | {"decision": "no comparison",
                         "note": f"{len(shared)} item(s) scored by both; need 2"}
    a = np.array([before[(t, i)][1] / before[(t, i)][0] for t, i, _, _ in shared])
    b = np.array([c / n for _, _, n, c in shared])
    if np.array_equal(a, b):
        diff = None
    else:
        diff = stats.paired_difference(a, b, ci=ci)
    if diff is None:
        result |= {"estimate": 0.0, "low": 0.0, "high": 0.0, "p_value": 1.0,
                   "method": "identical", "decision": "no change"}
    else:
        decision = ("regressed" if diff.high < 0 else "improved" if diff.low > 0
                    else "no change")
        result |= {"estimate": diff.estimate, "low": diff.low, "high": diff.high,
                   "p_value": diff.p_value, "method": diff.method, "decision": decision}
    result["regressed_items"] = [[t, i] for (t, i, _, _), x, y in zip(shared, a, b, strict=True)
                                 if x == 1.0 and y == 0.0]
    result["fixed_items"] = [[t, i] for (t, i, _, _), x, y in zip(shared, a, b, strict=True)
                             if x == 0.0 and y == 1.0]
    result["worse"] = int(np.sum(b < a))
    result["better"] = int(np.sum(b > a))
    return result
