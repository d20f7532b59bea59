"""Harvest a regression suite from failures: the items models failed (in the store, in
lm-eval-harness or Inspect logs) and the inputs recorded with crashes or guard alerts.

What one harvest does, in order:
1. groups the outcomes by item (task, id); an item is harvested if one outcome failed
   (score below `pass_score`, or a recorded input, which has no score);
2. keeps its provenance: the first failure (lowest step, then seed) with its experiment,
   trial, arm, seed, step and code commit, and how many outcomes failed;
3. measures flakiness where one model answered it several times (seeds of one arm at one
   step, Inspect epochs): n answers, c correct; flaky when 0 < c < n, with pass@k
   (Chen et al. 2021) and pass^k (all k correct) at its latest model;
4. removes exact and near duplicates among the new items and against the suite's own
   (`_dedup`): an existing item is always kept, then the earliest failure;
5. splits each new item into "tune" or "holdout" by the sha256 of its normalized text,
   so the split never depends on the order of harvests and an item has the same split in
   every suite: tune on "tune", judge on "holdout", and harvested items never leak from
   one to the other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from labcoat.errors import LabcoatError
from labcoat.evals._dedup import MAX_SHINGLE, content_key, find_duplicates
from labcoat.evals._eval_items import EvalItem
from labcoat.evals._ngrams import normalize_text
from labcoat.evals._regression_suite import RegressionSuite
from labcoat.stats import pass_at_k, pass_hat_k

RECORDED = "recorded_input"  # an input recorded with a crash or a guard alert


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """One answer of one model to one item.

    score: None for an input recorded with a crash or guard alert (a failure by itself).
    model: what answered, e.g. "EXP/ARM@STEP" (a checkpoint) or an Inspect log's model;
    sample: which of its answers (a trial/seed, an epoch): answers of one model are
    repeated samples, the ground of flakiness and pass@k.
    """

    task: str
    item: str
    score: float | None
    model: str
    sample: str
    step: int | None = None
    seed: int | None = None
    experiment: str | None = None
    trial: str | None = None
    arm: str | None = None
    commit: str | None = None
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class HarvestConfig:
    """pass_score: an item passes when its score is at least this (default 1: full credit,
    as Inspect's pass_at reducer). near: Jaccard similarity of character shingles at which
    two items are near duplicates. shingle: characters per shingle (1-8).
    numbers_must_match: near duplicates must hold the same numbers (templated items that
    differ in their numbers are different questions). holdout: share of new items kept
    out of tuning. permutations, bands, seed: MinHash LSH (see `_dedup`)."""

    pass_score: float = 1.0
    near: float = 0.7
    shingle: int = 5
    numbers_must_match: bool = True
    holdout: float = 0.2
    permutations: int = 128
    bands: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        if not math.isfinite(self.pass_score):
            raise LabcoatError(f"--pass-score {self.pass_score} must be a finite number")
        if not 0.0 < self.near <= 1.0:
            raise LabcoatError(f"--near {self.near} must be a Jaccard similarity in (0, 1]; "
                               "0.7 catches reworded copies, 1.0 exact shingle sets only")
        if not 1 <= self.shingle <= MAX_SHINGLE:
            raise LabcoatError(f"--shingle {self.shingle} must be 1-{MAX_SHINGLE} characters")
        if not 0.0 <= self.holdout < 1.0:
            raise LabcoatError(f"--holdout {self.holdout} must be a share in [0, 1), e.g. 0.2")
        if self.bands < 1 or self.permutations % self.bands:
            raise LabcoatError(f"permutations {self.permutations} must be a multiple of "
                               f"bands {self.bands}")


@dataclass
class HarvestReport:
    """What one harvest did, in numbers (the suite holds the items)."""

    revision: int
    outcomes: int
    failed_items: int
    added: int
    already_in_suite: int
    exact_duplicates: int
    near_duplicates: int
    flaky: int
    holdout: int
    recorded_inputs: int
    without_text: int
    candidates_checked: int
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def holdout_share(hash_hex: str) -> float:
    """A uniform number in [0, 1) from an item's content hash: the item is held out when it
    is below the holdout share (same item, same split, in any suite and any order)."""
    return int(hash_hex[:16], 16) / 16**16


def item_text(item: EvalItem) -> str:
    """The text that identifies an item for deduplication: input, choices and target."""
    return "\n".join([item.input, *(item.choices or ()), item.target])


def answers(outcomes: Iterable[Outcome], pass_score: float) -> dict[str, list[int]]:
    """{model: [n answers, c correct]} of one item's scored outcomes."""
    counts: dict[str, list[int]] = {}
    for o in outcomes:
        if o.score is None:
            continue
        pair = counts.setdefault(o.model, [0, 0])
        pair[0] += 1
        pair[1] += int(o.score >= pass_score)
    return counts


def harvest(outcomes: Iterable[Outcome], texts: Mapping[tuple[str, str], EvalItem],
            suite: RegressionSuite, config: HarvestConfig | None = None,
            sources: list[str] | None = None) -> HarvestReport:
    """Add the failed items of `outcomes` to `suite` (in place) as a new revision.

    texts: the text of each item by (task, id) (from the suite the models were scored on,
    or from the logs themselves); items without one are kept by id, unchecked for near
    duplicates.
    """
    config = config or HarvestConfig()
    if suite.config and suite.config.get("pass_score", config.pass_score) != config.pass_score:
        raise LabcoatError(f"suite {suite.name!r} was harvested with --pass-score "
                           f"{suite.config['pass_score']}; harvest into it with the same "
                           "threshold, or into a new suite")
    by_item: dict[tuple[str, str], list[Outcome]] = {}
    count = 0
    for o in outcomes:
        by_item.setdefault((o.task, o.item), []).append(o)
        count += 1
    existing = {(i["task"], i["id"]) for i in suite.items}
    failed = {key: group for key, group in by_item.items()
              if any(o.score is None or o.score < config.pass_score for o in group)}
    new = [key for key in failed if key not in existing]
    revision = suite.revision + 1
    now = datetime.now(UTC).isoformat(timespec="seconds")

    records = [_record(key, failed[key], texts.get(key), config, revision) for key in new]
    # dedup: the suite's items first (always kept), then new items by first failure
    pool = [(i, item_text_of(i)) for i in suite.items] + [(r, item_text_of(r)) for r in records]
    with_text = [p for p, (_, text) in enumerate(pool) if text]
    local = {p: j for j, p in enumerate(with_text)}
    order = sorted(with_text, key=lambda p: (p >= len(suite.items),
                                             _first_order(pool[p][0]), p))
    found = find_duplicates([pool[p][1] for p in with_text], threshold=config.near,
                            shingle=config.shingle,
                            numbers_must_match=config.numbers_must_match,
                            permutations=config.permutations, bands=config.bands,
                            seed=config.seed, prefer=[local[p] for p in order])
    dropped: set[int] = set()
    duplicates = []
    for j, p in enumerate(with_text):
        if found.kind[j] == "" or p < len(suite.items):
            continue  # an existing item is never dropped by a later harvest
        record = pool[p][0]
        kept = pool[with_text[int(found.group[j])]][0]
        matched = pool[with_text[int(found.matched[j])]][0]
        dropped.add(p)
        duplicates.append({"task": record["task"], "id": record["id"],
                           "kind": found.kind[j],
                           "jaccard": round(float(found.jaccard[j]), 6),
                           "kept": [kept["task"], kept["id"]],
                           "matched": [matched["task"], matched["id"]],
                           "revision": revision, "first_failure": record["first_failure"]})
    added = [pool[p][0] for p in range(len(suite.items), len(pool)) if p not in dropped]
    suite.items.extend(added)
    suite.duplicates.extend(duplicates)
    suite.revision = revision
    suite.created = suite.created or now
    suite.updated = now
    suite.config = {k: v for k, v in asdict(config).items()}
    report = HarvestReport(
        revision=revision, outcomes=count, failed_items=len(failed), added=len(added),
        already_in_suite=len(failed) - len(new),
        exact_duplicates=sum(d["kind"] == "exact" for d in duplicates),
        near_duplicates=sum(d["kind"] == "near" for d in duplicates),
        flaky=sum(r["flaky"] for r in added), holdout=sum(r["split"] == "holdout" for r in added),
        recorded_inputs=sum(r["kind"] == RECORDED for r in added),
        without_text=sum(not r["input"] for r in added),
        candidates_checked=found.candidates)
    if report.without_text:
        report.notes.append(f"{report.without_text} item(s) without text (their suite was not "
                            "given): kept by id, not checked for near duplicates; give "
                            "--suite ITEMS")
    suite.harvests.append({"revision": revision, "time": now, "sources": sources or [],
                           **{k: v for k, v in report.as_dict().items()
                              if k not in ("revision", "notes")}})
    return report


def item_text_of(record: dict[str, Any]) -> str:
    if not record.get("input"):
        return ""
    return "\n".join([record["input"], *(record.get("choices") or ()),
                      record.get("target", "")])


def _first_order(record: dict[str, Any]) -> tuple[float, float]:
    """Earliest failure first (step, then seed); ties keep the order of the sources."""
    first = record.get("first_failure") or {}
    step = first.get("step")
    seed = first.get("seed")
    return (math.inf if step is None else step, math.inf if seed is None else seed)


def _record(key: tuple[str, str], outcomes: list[Outcome], text: EvalItem | None,
            config: HarvestConfig, revision: int) -> dict[str, Any]:
    fails = [o for o in outcomes if o.score is None or o.score < config.pass_score]
    first = min(fails, key=lambda o: (math.inf if o.step is None else o.step,
                                      math.inf if o.seed is None else o.seed))
    counts = answers(outcomes, config.pass_score)
    repeated = {m: nc for m, nc in counts.items() if nc[0] >= 2}
    flaky = any(0 < c < n for n, c in repeated.values())
    latest = max(repeated, key=lambda m: _model_order(outcomes, m), default=None)
    pass_at, pass_hat = {}, {}
    if latest is not None:
        n, c = repeated[latest]
        pass_at = {str(k): pass_at_k(n, c, k) for k in range(1, n + 1)}
        pass_hat = {str(k): pass_hat_k(n, c, k) for k in range(1, n + 1)}
    task, item_id = key
    content = item_text(text) if text is not None else ""
    digest = content_key(normalize_text(content) if content else f"\0{task}\0{item_id}")
    return {
        "task": task, "id": item_id,
        "input": text.input if text else "", "target": text.target if text else "",
        "choices": list(text.choices) if text and text.choices else None,
        "split": "holdout" if holdout_share(digest) < config.holdout else "tune",
        "hash": digest, "added_in": revision,
        "kind": RECORDED if all(o.score is None for o in fails) else "scored",
        "first_failure": {"model": first.model, "sample": first.sample,
                          "experiment": first.experiment, "trial": first.trial,
                          "arm": first.arm, "seed": first.seed, "step": first.step,
                          "commit": first.commit, "source": first.source,
                          "score": first.score},
        "failures": len(fails), "observations": len(outcomes),
        "answers": counts, "flaky": flaky, "flaky_models": sorted(
            m for m, (n, c) in repeated.items() if 0 < c < n),
        "latest_model": latest, "pass_at": pass_at, "pass_hat": pass_hat,
    }


def _model_order(outcomes: list[Outcome], model: str) -> tuple[float, int]:
    """Latest model: the highest step, then the last seen."""
    steps = [o.step for o in outcomes if o.model == model and o.step is not None]
    last = max(i for i, o in enumerate(outcomes) if o.model == model)
    return (max(steps) if steps else -math.inf, last)
