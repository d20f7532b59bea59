"""Deciding from ranked suspects: the cause, the first sign, the rank and host, the phase,
and what is new against the references."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from labcoat.diagnose._localize import (
    Line,
    barrier_culprits,
    ends_first,
    launcher_verdict,
    missing_from,
    slowdown_onset,
    straggler,
)
from labcoat.diagnose._records import AttemptEnd, MetricPoint, RunEvent

# How strongly each cause explains a failure by itself (see the module docstring).
from labcoat.diagnose._suspects import ROOT_CAUSES, NewTemplate, Suspect, _Draft
from labcoat.diagnose._templates import Templates
from labcoat.diagnose._traceback import Frame


def _decide(suspects: list[Suspect], prepared: list[Line], end: AttemptEnd | None,
            alarming: set[int]) -> tuple[str | None, int | None, int | None, list[str]]:
    # a cause needs evidence successful runs do not also print
    top = next((s for s in suspects if s.cause is not None and not s.discounted), None)
    cause = top.cause if top else None
    evidence: list[str] = []
    if top is not None and top.cause in ROOT_CAUSES and top.rank is not None:
        return cause, top.rank, _first_sign(top, suspects, evidence), evidence
    rank, step = _where(cause, top, suspects, prepared, alarming, evidence,
                        end.last_step if end is not None else None)
    if top is not None and top.cause in ROOT_CAUSES and top.step is not None:
        # the failure line's own step beats where its rank was last seen
        step = _first_sign(top, suspects, evidence)
    if step is None and top is not None and top.rank in (None, rank):
        step = top.step
    if step is None and end is not None:
        step = end.last_step  # the journal's last step: the last sign of progress
    return cause, rank, step, evidence


def _first_sign(top: Suspect, suspects: list[Suspect], evidence: list[str]) -> int | None:
    """The step of the best suspect, or for a NaN the earliest step with a sign of it on
    the same rank: a run dies of a NaN some steps after the loss (or a guard, or a
    printed line) first showed it, and the issue is where it started."""
    if top.cause != "nan" or top.step is None:
        return top.step
    steps = [s.step for s in suspects if s.cause == "nan" and not s.discounted
             and s.step is not None and (s.rank is None or top.rank is None
                                         or s.rank == top.rank)]
    first = min(steps, default=top.step)
    if first < top.step:
        evidence.append(f"the first sign of NaN/Inf is at step {first}, "
                        f"{top.step - first} step(s) before the run stopped")
    return first


def _where(cause: str | None, top: Suspect | None, suspects: list[Suspect],
           prepared: list[Line], alarming: set[int], evidence: list[str],
           last_step: int | None) -> tuple[int | None, int | None]:
    """The rank where a secondary failure (signal, timeout, hang) started, and its step."""
    verdict = launcher_verdict(prepared)
    slow = straggler(prepared)
    timeouts = {r for s in suspects if s.cause == "collective_timeout" for r in s.ranks}
    missing = missing_from(timeouts, prepared) if timeouts else None
    barrier = barrier_culprits(prepared)
    first = ends_first(prepared, alarming)
    # the step a rank had reached: its last progress line, else the run's last step (a rank
    # that prints no progress, e.g. all but rank 0, moves in lockstep with the others)
    progress: dict[int, int] = {}
    printing = {line.rank for line in prepared if line.rank is not None and line.own_step}
    for line in prepared:
        if line.rank in printing and line.step is not None and not line.noise:
            progress[line.rank] = max(line.step, progress.get(line.rank, line.step))
    overall = last_step if last_step is not None else max(
        (line.step for line in prepared if line.step is not None), default=None)
    known_ranks = {line.rank for line in prepared if line.rank is not None}

    def reached(rank: int) -> int | None:
        return progress.get(rank, overall)

    def verdict_rank() -> tuple[int, int | None] | None:
        if verdict is None or (cause == "collective_timeout" and verdict.exit_code == -6):
            return None  # the first rank a watchdog aborted says nothing about the cause
        code = "" if verdict.exit_code is None else f" (exit code {verdict.exit_code})"
        evidence.append(f"the launcher reports rank {verdict.rank} failed first{code}")
        return verdict.rank, reached(verdict.rank)

    def slow_rank() -> tuple[int, int | None] | None:
        if slow is None:
            return None
        evidence.append(f"rank {slow.rank} is a straggler from step {slow.step}: {slow.how} "
                        f"were {slow.ratio:.1f}x its peers' until its log ended")
        return slow.rank, slow.step

    def barrier_rank() -> tuple[int, int | None] | None:
        if len(barrier) != 1:
            return None
        rank = next(iter(barrier))
        evidence.append(f"a monitored barrier names rank {rank} as not arriving")
        return rank, reached(rank)

    def missing_rank() -> tuple[int, int | None] | None:
        if missing is None:
            return None
        evidence.append(f"every rank but {missing} reports the collective timeout: rank "
                        f"{missing} never entered the collective")
        step = reached(missing)
        onset = slowdown_onset(prepared)
        if onset is not None and step is not None and onset[0] < step:
            evidence.append(f"every rank's step time rose {onset[1]:.1f}x from step "
                            f"{onset[0]}: rank {missing} slowed all of them before it stopped")
            step = onset[0]
        return missing, step

    def first_rank() -> tuple[int, int | None] | None:
        if first is None:
            return None
        evidence.append(f"rank {first[0]}'s log ends first: {first[1]}")
        return first[0], reached(first[0])

    def alone_rank() -> tuple[int, int | None] | None:
        # the best suspect is a message only one rank printed (e.g. its network error)
        if top is None or top.rank is None or len(top.ranks) != 1 or len(known_ranks) < 2:
            return None
        evidence.append(f"only rank {top.rank} printed the first {top.cause} message")
        return top.rank, top.step

    if cause in ("collective_timeout", "hang"):
        order = (slow_rank, barrier_rank, missing_rank, alone_rank, first_rank, verdict_rank)
    else:
        order = (verdict_rank, barrier_rank, alone_rank, first_rank, slow_rank, missing_rank)
    for attempt in order:
        found = attempt()
        if found is not None:
            return found
    if top is not None and top.rank is not None:
        return top.rank, top.step
    return None, None


_PHASE_WORDS = (("checkpoint", ("checkpoint", "save_checkpoint", "torch.save", ".ckpt",
                                 "state_dict", "saving")),
                ("evaluation", ("evaluat", " eval", "eval_", "validation")))


def _phase(cause: str | None, step: int | None, top: Suspect | None, prepared: list[Line],
           events: list[RunEvent]) -> str | None:
    """What the run was doing when it failed, from the words around the best suspect: the
    suspect itself, its evidence, and the few lines its rank printed just before it (a
    traceback's frames name the function that was running)."""
    if cause is None and top is None:
        return None
    if step is None and not any(line.own_step is not None for line in prepared):
        return "startup"
    words: list[str] = []
    if top is not None:
        words += [top.text, *top.evidence]
        if top.index is not None:
            before = [line for line in prepared[max(0, top.index - 12):top.index + 1]
                      if line.source == prepared[top.index].source]
            words += [line.body for line in before]
        if top.index is None and any(e.kind == "chaos.disk-full" for e in events):
            words.append("checkpoint")
    text = " ".join(words).lower()
    for phase, cues in _PHASE_WORDS:
        if any(cue in text for cue in cues):
            return phase
    return "training"


def _exception(drafts: list[_Draft], causing: list[Suspect]
               ) -> tuple[str | None, Frame | None]:
    """The exception (and user frame) behind the best suspect of the cause that is one."""
    for suspect in causing:
        if suspect.index is None:
            continue
        for draft in drafts:
            if draft.index == suspect.index and draft.exception:
                return draft.exception, draft.frame
    return None, None


def _new_templates(prepared: list[Line], miner: Templates, known: dict[int, bool]
                   ) -> tuple[NewTemplate, ...]:
    groups: dict[str, list[Line]] = {}
    for line in prepared:
        if not line.noise:
            groups.setdefault(line.template, []).append(line)
    out = []
    for tid, members in groups.items():
        if any(known.get(m.index, False) for m in members):
            continue
        first = members[0]
        out.append(NewTemplate(tid, miner.template(tid), first.text, len(members),
                               tuple(sorted({m.rank for m in members if m.rank is not None})),
                               first.index, first.step))
    out.sort(key=lambda t: t.first_index)
    return tuple(out)


def _metric_jump(metrics: list[MetricPoint]) -> tuple[str, int] | None:
    """The first step where a loss-like metric jumps far beyond its recent variation
    (10 robust standard deviations of its step-to-step changes)."""
    series: dict[str, list[MetricPoint]] = defaultdict(list)
    for point in metrics:
        if "loss" in point.name.lower() and point.rank is None:
            series[point.name].append(point)
    found: list[tuple[int, str]] = []
    for name, points in series.items():
        points.sort(key=lambda p: p.step)
        values = [p.value for p in points]
        for i in range(6, len(values)):
            if not math.isfinite(values[i]):
                found.append((points[i].step, name))
                break
            diffs = [values[j] - values[j - 1] for j in range(max(1, i - 20), i)
                     if math.isfinite(values[j]) and math.isfinite(values[j - 1])]
            if len(diffs) < 5:
                continue
            scale = 1.4826 * statistics.median(abs(d) for d in diffs) or 1e-12
            if abs(values[i] - values[i - 1]) > 10 * scale and \
                    abs(values[i] - values[i - 1]) > 0.2 * abs(values[i - 1]):
                found.append((points[i].step, name))
                break
    if not found:
        return None
    step, name = min(found)
    return name, step
