"""The ledger: every prediction in the store, what happened, and how good the forecasters are.

A hypothesis' `predict:` is frozen with the pre-registered plan before its first trial
(runner registration). Its outcome is labcoat's own verdict, read automatically: the
hypothesis is *supported* when every comparison it judges is SUPPORTED, else *not
supported* (refuted, no effect, negligible, aliased or inconclusive), and *pending* while
trials run or before any result. Forecasts are scored only as stated before the first trial
(`original_predictions`): one edited after trials started is listed with its edit and
scored as first stated; one first stated after trials started is listed, never scored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from labcoat import stats, store
from labcoat.analysis._experiment import Analysis, HypothesisResult, analyze, verdict_word

SUPPORTED, NOT_SUPPORTED, PENDING = "supported", "not supported", "pending"
UNNAMED = "(no author)"
MIN_TESTED = 10  # fewer resolved forecasts: Spiegelhalter's normal approximation is too rough


@dataclass
class Entry:
    """One hypothesis with a prediction: prior, outcome, surprise."""

    experiment: str
    hypothesis: str
    claim: str
    prior: float | None  # P(supported) as frozen before the first trial; None: stated late
    author: str
    tag: str | None
    outcome: str  # supported | not supported | pending
    verdicts: list[str]  # labcoat's verdict per comparison, e.g. ["inconclusive"]
    surprise: float | None  # -log2 p(outcome), bits
    effect: tuple[float, float, float] | None = None  # predicted (guess, low, high), 80%
    observed: float | None = None  # the measured effect (variant - control), one comparison
    crps: float | None = None  # of the effect interval read as a normal
    frozen_at: str = ""
    edits: list[dict[str, Any]] = field(default_factory=list)  # after trials started
    note: str = ""  # why it is not scored, if it is not
    three: tuple[float, float, float] | None = None  # P(supported, refuted, other), if stated
    outcome3: int | None = None  # 0 supported, 1 refuted (any comparison), 2 other

    @property
    def scored(self) -> bool:
        return self.prior is not None and self.outcome != PENDING

    @property
    def change(self) -> str:
        """"H1: prior 0.60 -> SUPPORTED (surprise 0.74 bits)"."""
        prior = "no prior stated" if self.prior is None else f"prior {self.prior:.2f}"
        result = ("pending" if self.outcome == PENDING else
                  ", ".join(verdict_word(v) for v in self.verdicts))
        words = f"{self.hypothesis}: {prior} -> {result}"
        if self.surprise is not None:
            words += f" (surprise {self.surprise:.2f} bits)"
        if self.effect is not None and self.observed is not None:
            guess, low, high = self.effect
            words += (f"; effect predicted {guess:.3g} [{low:.3g}, {high:.3g}], "
                      f"measured {self.observed:.3g}")
        if self.edits:
            words += f"; prediction EDITED after trials started ({self.edits[-1]['at'][:19]})"
        elif self.note:
            words += f"; {self.note}"
        return words


@dataclass
class Score:
    """How one forecaster (or tag, or everyone) did on resolved predictions."""

    group: str  # "everyone", "author alice", "tag optimizers"
    n: int
    brier: stats.Murphy | None = None
    log_score: float | None = None  # bits per forecast
    crps: float | None = None  # mean over effect intervals
    crps_n: int = 0
    brier3: float | None = None  # over supported / refuted / other, where all three stated
    brier3_n: int = 0
    bins: list[stats.ReliabilityBin] = field(default_factory=list)
    levels: list[stats.LevelCalibration] = field(default_factory=list)
    calibration: stats.CalibrationTest | None = None

    @property
    def flagged(self) -> bool:
        return self.calibration is not None and self.calibration.flagged()

    @property
    def calibration_words(self) -> str:
        if self.n == 0:
            return "nothing resolved yet"
        if self.n < MIN_TESTED:
            return f"too few resolved forecasts to test calibration ({self.n} < {MIN_TESTED})"
        if self.calibration is None or math.isnan(self.calibration.z):
            return "calibration untested (too few forecasts off 50%)"
        test = self.calibration
        if not self.flagged:
            return (f"no evidence of miscalibration (Spiegelhalter z {test.z:.2f}, "
                    f"p {test.p_value:.2g})")
        side = "overconfident" if test.z > 0 else "underconfident"
        return (f"MISCALIBRATED, {side} (Spiegelhalter z {test.z:.2f}, p {test.p_value:.2g} "
                f"< {stats.CALIBRATION_ALPHA})")


@dataclass
class Ledger:
    entries: list[Entry]
    scores: list[Score]


def _predictions(registration: dict[str, Any]) -> tuple[dict, dict, list]:
    """(frozen before the first trial, current, edits after trials started)."""
    plan = registration.get("plan", {})
    current = plan.get("predictions", {})
    original = registration.get("original_predictions", current)
    edits = [e for e in registration.get("prediction_edits", []) if e.get("after_trials")]
    return original, current, edits


def outcome(result: HypothesisResult, status: str) -> tuple[str, list[str], float | None]:
    """(supported | not supported | pending, the verdicts, the measured effect if one
    comparison) from labcoat's own verdict on `result`."""
    judged = [c for c in result.comparisons if c.seeds is not None]
    if status in ("pending", "running") or not judged or len(judged) < len(result.comparisons):
        return PENDING, [c.verdict for c in result.comparisons], None
    verdicts = [c.verdict for c in judged]
    observed = judged[0].seeds.estimate if len(judged) == 1 else None
    won = all(v == "supported" for v in verdicts)
    return (SUPPORTED if won else NOT_SUPPORTED), verdicts, observed


def entries_of(analysis: Analysis) -> list[Entry]:
    """One entry per hypothesis of `analysis` (with or without a prediction)."""
    original, current, edits = _predictions(analysis.registration)
    out = []
    for result in analysis.results:
        h = result.hypothesis
        hid = str(h.id)
        stated = original.get(hid)
        shown = stated or current.get(hid) or {}
        state, verdicts, observed = outcome(result, analysis.status)
        prior = stated["supported"] if stated else None
        entry = Entry(analysis.experiment, hid, h.claim, prior,
                      shown.get("author") or UNNAMED, shown.get("tag"), state, verdicts, None,
                      observed=observed, frozen_at=str(analysis.registration.get(
                          "predictions_at", analysis.registration.get("frozen_at", ""))),
                      edits=[e for e in edits if e["hypothesis"] == hid])
        if stated is None and current.get(hid):
            entry.note = "prediction stated after trials started: not scored"
        if prior is not None and state != PENDING:
            p = prior if state == SUPPORTED else 1 - prior
            entry.surprise = -math.log2(p)
        if stated and ("refuted" in stated or "inconclusive" in stated):
            refuted = stated.get("refuted", 1 - stated["supported"] - stated.get(
                "inconclusive", 0))
            entry.three = (stated["supported"], refuted, 1 - stated["supported"] - refuted)
        if state != PENDING:
            entry.outcome3 = 0 if state == SUPPORTED else 1 if "refuted" in verdicts else 2
        if stated and "interval" in stated:
            low, high = stated["interval"]
            guess = stated.get("effect", (low + high) / 2)
            entry.effect = (guess, low, high)
            if observed is not None:
                entry.crps = stats.crps_interval(low, high, observed, centre=guess)
        out.append(entry)
    return out


def score(group: str, entries: list[Entry]) -> Score:
    """Brier (Murphy), log score, CRPS, reliability and calibration of resolved entries."""
    done = [e for e in entries if e.scored]
    result = Score(group, len(done))
    if not done:
        return result
    p = [e.prior for e in done]
    o = [int(e.outcome == SUPPORTED) for e in done]
    result.brier = stats.murphy_decomposition(p, o)
    result.log_score = stats.log_score(p, o)
    result.bins = stats.reliability_bins(p, o)
    result.levels = stats.calibration_by_level(p, o)
    if len(done) >= MIN_TESTED:
        result.calibration = stats.spiegelhalter_z(p, o)
    three = [e for e in done if e.three is not None]
    if three:
        result.brier3 = stats.brier_score_multi([e.three for e in three],
                                                [e.outcome3 for e in three])
        result.brier3_n = len(three)
    crps = [e.crps for e in done if e.crps is not None]
    if crps:
        result.crps, result.crps_n = sum(crps) / len(crps), len(crps)
    return result


def ledger(session: Session) -> Ledger:
    """Every hypothesis in the store that carries a prediction, and the forecasters' scores
    (everyone, then by author, then by tag)."""
    entries: list[Entry] = []
    for experiment in store.list_experiments(session):
        registration = experiment.analysis_plan or {}
        original, current, _ = _predictions(registration)
        if not (original or current):
            continue
        full = store.find_experiment(session, experiment.name)
        entries += [e for e in entries_of(analyze(session, full))
                    if e.prior is not None or e.note]
    scores = [score("everyone", entries)]
    for author in sorted({e.author for e in entries}):
        scores.append(score(f"author {author}", [e for e in entries if e.author == author]))
    for tag in sorted({e.tag for e in entries if e.tag}):
        scores.append(score(f"tag {tag}", [e for e in entries if e.tag == tag]))
    return Ledger(entries, scores)


def ledger_dict(found: Ledger) -> dict[str, Any]:
    """The `--json` form."""
    from dataclasses import asdict

    from labcoat.analysis._json import json_safe

    def entry(e: Entry) -> dict[str, Any]:
        return {**asdict(e), "scored": e.scored, "change": e.change}

    def one(s: Score) -> dict[str, Any]:
        return {**asdict(s), "flagged": s.flagged, "calibration_words": s.calibration_words,
                "levels": [{**asdict(lv), "words": lv.words} for lv in s.levels]}

    return json_safe({"entries": [entry(e) for e in found.entries],
                      "scores": [one(s) for s in found.scores]})
