"""Inferred invariants: learn what clean runs look like, then check new runs against them.

A guard learns a *profile* of its run as it goes (``guard.profile()``, logged
as ``guard.profile`` at ``guard.close()``). Given profiles of clean reference
runs of the same configuration (``watch(reference=[...])``,
``reference_path=``, or ``$LABCOAT_GUARD_REFERENCE``), it checks the new run
against the relations that held in all of them:

    invariant.loss_range        warning  loss outside the references' range for its phase,
                                         3 steps running (e.g. far below: the model sees
                                         the answer; far above: it stopped learning)
    invariant.grad_norm_range   warning  gradient norm outside the phase's range, 2 steps running
    invariant.examples_range    warning  examples per step outside the phase's range
    invariant.lr_schedule       error    the lr of a check step differs from the one every
                                         reference used at that step
    invariant.param_updates     error    a parameter every reference updated at every step
                                         stopped changing (or one they never changed moves)
    invariant.modes             error    a module in a train/eval mode no reference ran it in
                                         for that kind of forward
    invariant.backwards         error    a number of backward passes per step no reference had
    invariant.label_alignment   error    labels aligned with the inputs differently than in
                                         every reference (e.g. not shifted from step 1 on)
    invariant.eval_length       warning  an evaluation forward on token ids longer than any
                                         in the references (generation past its token
                                         budget: max_new_tokens not respected, a prompt
                                         not trimmed); a bound, so one reference is enough
                                         (the same evaluation inputs, generation length at
                                         most prompt + budget in every clean run)

Phases double in length (steps 1-16, 17-32, 33-64, ...), so early training,
where everything moves fast, is judged at a fine grain. The range rule, per
quantity and phase:

- A quantity every reference held at one constant value in the phase (the
  batch size of a fixed pipeline) is an exact relation: one reference is
  enough, and any other value breaks it.
- A noisy quantity (loss, gradient norm) needs at least
  ``MIN_RANGE_REFERENCES`` (3) references; with fewer there is no range
  invariant at all. One or two clean runs cannot tell how much runs differ:
  by exchangeability a new clean run's phase median lies outside the span of
  K reference medians with probability 2/(K+1), i.e. always for K=1 and
  2 times in 3 for K=2.
- The range is the union of the references' [min, max] over the phase *and
  its two neighbours* (a clean run may learn up to twice as fast or as slow
  as its references: seeds differ in when the loss breaks through a
  plateau), widened on each side by `invariant_margin` times the larger of
  the within-run spread (the largest 5-95% spread of a reference in the
  phase) and the between-run spread (the span of the references' phase
  medians). Positive quantities are compared in log space.

Measured on tinylm (200 steps at lr 2e-2 without warmup, where seeds differ
most), every held-out clean seed of 10 against every set of K others: the
earlier rule (any K, the phase alone, within-run spread) flagged 41% of
(seed, reference set) pairs at K=1, 14% at K=2, 4% at K=3; this rule flags
none of the 3,360 pairs at K=3..5 (nor of 3,360 with a 33-step warmup).

Profile format (JSON, version 1)::

    {"format": "labcoat.guard.profile", "version": 1,
     "steps": [first, last], "count": check steps observed (per-parameter fractions),
     "params": {"names": [...], "with_grad": [...], "updated": [...]},   # fraction of steps
     "modes": {"train": [[modules in eval mode], ...], "eval": [[modules in train mode], ...]},
     "lr": {"steps": [check steps], "values": [[lr of group 0, ...], ...]},
     "phases": [{"start": 1, "end": 16,
                 "loss": {"n", "min", "q05", "q50", "q95", "max"} | null,
                 "grad_norm": {...} | null, "examples": {...} | null}, ...],
     "backwards": [counts seen], "alignment": "next" | "same" | "prev" | "none" | null,
     "eval_length": longest sequence (last dim) of an integer evaluation input | null}

Reference file: a JSON object ``{"format": "labcoat.guard.reference", "version": 1,
"profiles": [profile, ...]}`` (a bare profile or a JSON list of profiles is
accepted too).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from labcoat.torch.guard._alerts import GuardError, Rule
from labcoat.torch.guard._context import Check, Context, Forward, Record, Step
from labcoat.torch.guard._guard_config import REFERENCE_ENV

PROFILE_FORMAT = "labcoat.guard.profile"
REFERENCE_FORMAT = "labcoat.guard.reference"
VERSION = 1
FIRST_PHASE = 16  # steps 1..16, then phases double: 17-32, 33-64, ...
RESERVOIR = 256  # values kept per phase and quantity for the quantiles
CONFIRM = {"loss": 3, "grad_norm": 2, "examples": 1}  # observations out of range to alert
QUANTITIES = ("loss", "grad_norm", "examples")
MIN_RANGE_REFERENCES = 3  # references a noisy (non-constant) range needs


def phase_of(step: int) -> tuple[int, int]:
    """(start, end) of the phase holding `step` (1-based)."""
    if step <= FIRST_PHASE:
        return 1, FIRST_PHASE
    k = (step - 1).bit_length()  # step in (2^(k-1), 2^k]
    return 2 ** (k - 1) + 1, 2**k


class _PhaseSeries:
    """Values of one quantity, reservoir-sampled per phase (deterministically)."""

    def __init__(self) -> None:
        self.phases: dict[tuple[int, int], dict[str, Any]] = {}
        self.rng = random.Random(0)

    def add(self, step: int, value: float) -> None:
        if not math.isfinite(value):
            return
        ph = self.phases.setdefault(phase_of(step), {"n": 0, "min": value, "max": value,
                                                     "sample": []})
        ph["n"] += 1
        ph["min"], ph["max"] = min(ph["min"], value), max(ph["max"], value)
        if len(ph["sample"]) < RESERVOIR:
            ph["sample"].append(value)
        else:
            j = self.rng.randrange(ph["n"])
            if j < RESERVOIR:
                ph["sample"][j] = value

    def summary(self, key: tuple[int, int]) -> dict[str, float] | None:
        ph = self.phases.get(key)
        if ph is None:
            return None
        q05, q50, q95 = np.quantile(ph["sample"], (0.05, 0.5, 0.95)).tolist()
        return {"n": ph["n"], "min": ph["min"], "q05": q05, "q50": q50, "q95": q95,
                "max": ph["max"]}


class Invariants(Check):
    """Learns this run's profile; checks it against reference profiles when given."""

    family = "invariant"
    rules = {
        "invariant.loss_range": Rule("warning", "a loss no clean run had at this phase: the "
                                                "model sees the answer (too low) or stopped "
                                                "learning (too high)"),
        "invariant.grad_norm_range": Rule("warning", "gradient norms no clean run had at this "
                                                     "phase"),
        "invariant.examples_range": Rule("warning", "a batch size no clean run had"),
        "invariant.lr_schedule": Rule("error", "an lr schedule that differs from the clean "
                                               "runs'"),
        "invariant.param_updates": Rule("error", "parameters that stopped (or started) changing "
                                                 "unlike in every clean run"),
        "invariant.modes": Rule("error", "modules in a train/eval mode no clean run used for "
                                         "that forward"),
        "invariant.backwards": Rule("error", "a number of backward passes per step no clean run "
                                             "had"),
        "invariant.label_alignment": Rule("error", "labels aligned unlike in every clean run "
                                                   "(no shift, double shift)"),
        "invariant.eval_length": Rule("warning", "an evaluation input longer than in every "
                                                 "clean run: generation past its token budget"),
    }

    periodic = frozenset({"on_post_step"})

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.modules = [(name or "(model)", m) for name, m in ctx.model.named_modules()]
        self.series = {q: _PhaseSeries() for q in QUANTITIES}
        self.patterns: dict[str, dict[tuple[bool, ...], int]] = {"train": {}, "eval": {}}
        self.lr_steps: list[int] = []
        self.lr_values: list[list[float]] = []
        self.count = 0  # check steps seen
        self.with_grad = np.zeros(len(ctx.params), dtype=int)  # at check steps
        self.updated = np.zeros(len(ctx.params), dtype=int)
        self.backwards: set[int] = set()
        self.alignment: str | None = None
        self.eval_step = -1
        self.eval_length: int | None = None  # longest integer evaluation input (last dim)
        profiles = load_references(ctx.config)
        self.refs = _Reference(profiles, ctx) if profiles else None
        self.references = len(profiles)
        self.outside: dict[str, int] = {}
        # without references an observation only feeds the profile, so it is queued (one
        # append per step) and added at check steps, where the guard already does its
        # periodic work; with references each one is judged when it arrives
        self.deferred: list[tuple[str, int, float]] = []

    def active(self) -> bool:
        return (self.ctx.config.learn or bool(self.references)) and super().active()

    # --- observation -----------------------------------------------------------------------------

    def on_forward(self, fwd: Forward) -> None:
        if fwd.training:
            if fwd.index or not self.ctx.is_check_step(fwd.step):
                return
            context = "train"
        else:
            x = fwd.inputs  # token ids: every call of a generation loop (a few reads)
            if x is not None and x.dim() >= 2 and not x.is_floating_point() \
                    and x.shape[-1] > (self.eval_length or 0):
                self.eval_length = x.shape[-1]
                if self.refs is not None:
                    self.refs.check_eval_length(fwd.step, self.eval_length)
            if fwd.step == self.eval_step:  # once per evaluation burst
                return
            self.eval_step = fwd.step
            context = "eval"
        pattern = tuple(m.training for _, m in self.modules)
        seen = self.patterns[context]
        if pattern in seen:
            seen[pattern] += 1
            return
        seen[pattern] = 1
        if self.refs is not None:
            self.refs.check_modes(fwd.step, context, self._unusual(context, pattern))

    def _unusual(self, context: str, pattern: tuple[bool, ...]) -> list[str]:
        """Modules in the unexpected mode for the context (eval mode in training, or vice versa)."""
        want = context == "train"
        return [name for (name, _), on in zip(self.modules, pattern, strict=True) if on != want]

    def on_pre_step(self, step: Step) -> None:
        if step.check and self.deferred:
            self._flush()
        if step.grad_norm is not None and step.grad_norm > 0:
            self._observe("grad_norm", step.number, step.grad_norm)
        if step.check:
            examples = sum(f.inputs.shape[0] for f in step.forwards
                           if f.inputs is not None and f.inputs.dim())
            if examples:
                self._observe("examples", step.number, float(examples))
        if step.reset:
            self.backwards.add(step.backwards)
            if self.refs is not None:
                self.refs.check_backwards(step.number, step.backwards)
        if step.check:  # the lr schedule, sampled at check steps (compact, and cheap)
            self.lr_steps.append(step.number)
            self.lr_values.append(list(step.lrs))
            if self.refs is not None:
                self.refs.check_lr(step.number, step.lrs)

    def on_post_step(self, step: Step) -> None:
        if step.check:  # per-parameter relations, sampled at check steps
            self._grow(len(self.ctx.params))
            assert step.trained is not None and step.has_grad is not None
            self.count += 1
            self.with_grad += step.has_grad
            self.updated += step.trained if step.updated is None else step.updated
        if self.refs is not None and step.check:
            self.refs.check_updates(step)

    def on_record(self, rec: Record) -> None:
        if rec.loss is not None:
            self._observe("loss", rec.step, rec.loss)
        found = self.ctx.label_alignment
        if found is not None:
            self.ctx.label_alignment = None
            if self.alignment is None and found != "none":
                self.alignment = found
            if self.refs is not None:
                self.refs.check_alignment(rec.step, found)

    def _observe(self, quantity: str, step: int, value: float) -> None:
        if self.refs is None:  # learning only: add at the next check step (`_flush`)
            self.deferred.append((quantity, step, value))
            return
        self.series[quantity].add(step, value)
        verdict = self.refs.check_range(quantity, step, value)
        if verdict is None:
            self.outside[quantity] = 0
            return
        self.outside[quantity] = self.outside.get(quantity, 0) + 1
        if self.outside[quantity] >= CONFIRM[quantity]:
            self.refs.alert_range(quantity, step, value, verdict, CONFIRM[quantity])

    def _flush(self) -> None:
        """Add the deferred observations, in order (the reservoirs sample as if added live)."""
        series = self.series
        for quantity, step, value in self.deferred:
            series[quantity].add(step, value)
        self.deferred.clear()

    def _grow(self, n: int) -> None:
        extra = n - len(self.with_grad)
        if extra > 0:
            self.with_grad = np.append(self.with_grad, np.zeros(extra, dtype=int))
            self.updated = np.append(self.updated, np.zeros(extra, dtype=int))

    # --- the profile -----------------------------------------------------------------------------

    def build_profile(self) -> dict[str, Any]:
        self._flush()
        keys = sorted({k for s in self.series.values() for k in s.phases})
        count = max(self.count, 1)
        return {
            "format": PROFILE_FORMAT, "version": VERSION,
            "steps": [self.ctx.first_step, self.ctx.completed], "count": self.count,
            "params": {"names": list(self.ctx.params.names),
                       "with_grad": np.round(self.with_grad / count, 4).tolist(),
                       "updated": np.round(self.updated / count, 4).tolist()},
            "modes": {ctx: [self._unusual(ctx, p) for p in seen]
                      for ctx, seen in self.patterns.items()},
            "lr": {"steps": self.lr_steps, "values": self.lr_values},
            "phases": [{"start": a, "end": b,
                        **{q: self.series[q].summary((a, b)) for q in QUANTITIES}}
                       for a, b in keys],
            "backwards": sorted(self.backwards),
            "alignment": self.alignment,
            "eval_length": self.eval_length,
        }


class _Reference:
    """Reference profiles merged into the relations that held in every one of them."""

    def __init__(self, profiles: list[dict[str, Any]], ctx: Context) -> None:
        self.ctx = ctx
        self.count = len(profiles)
        self.ranges: dict[str, dict[tuple[int, int], tuple[float, float, bool]]] = {
            q: {} for q in QUANTITIES}
        self.lr: dict[int, list[float]] = {}
        self.modes: dict[str, list[set[str]]] = {"train": [], "eval": []}
        self.backwards: set[int] | None = None
        self.alignment: str | None = None
        self.eval_length: int | None = None
        self.always = np.zeros(len(ctx.params), dtype=bool)
        self.never = np.zeros(len(ctx.params), dtype=bool)
        self.always_idx: list[int] = []
        self.never_idx: list[int] = []
        self.still: set[int] = set()
        if profiles:
            self._merge(profiles)

    def _merge(self, profiles: list[dict[str, Any]]) -> None:
        margin = self.ctx.config.invariant_margin
        for q in QUANTITIES:
            by_phase: dict[tuple[int, int], list[dict[str, float]]] = {}
            for p in profiles:
                for ph in p.get("phases", []):
                    if ph.get(q):
                        by_phase.setdefault((ph["start"], ph["end"]), []).append(ph[q])
            self.ranges[q] = _ranges(by_phase, len(profiles), margin)
        lrs = [dict(zip(p["lr"]["steps"], p["lr"]["values"], strict=True)) for p in profiles
               if p.get("lr")]
        if len(lrs) == len(profiles):
            for step, values in lrs[0].items():
                if all(step in other and _same(other[step], values) for other in lrs[1:]):
                    self.lr[step] = values
        for context in ("train", "eval"):
            for p in profiles:
                self.modes[context].extend(set(m) for m in p.get("modes", {}).get(context, []))
        counts = [set(p.get("backwards", [])) for p in profiles]
        if all(counts):
            self.backwards = set().union(*counts)
        lengths = [p.get("eval_length") for p in profiles]
        if lengths and all(n is not None for n in lengths):
            self.eval_length = max(lengths)
        aligned = {p.get("alignment") for p in profiles}
        if len(aligned) == 1:
            self.alignment = aligned.pop()
        names = self.ctx.params.names
        self.always[:] = True
        self.never[:] = True
        for p in profiles:
            ref = dict(zip(p["params"]["names"], zip(p["params"]["with_grad"],
                                                     p["params"]["updated"], strict=True),
                           strict=True))
            for i, name in enumerate(names):
                with_grad, updated = ref.get(name, (None, None))
                if updated is None:
                    self.always[i] = self.never[i] = False
                    continue
                self.always[i] &= updated >= 0.99 and p["count"] >= 10
                self.never[i] &= updated == 0 and p["count"] >= 10
        self.always_idx = np.flatnonzero(self.always).tolist()
        self.never_idx = np.flatnonzero(self.never).tolist()

    # --- checks ----------------------------------------------------------------------------------

    def check_range(self, quantity: str, step: int, value: float) -> tuple[float, float] | None:
        """The (low, high) range `value` broke, or None if inside (or no range)."""
        rng = self.ranges[quantity].get(phase_of(step))
        if rng is None:
            return None
        lo, hi, log = rng
        if log:
            if value <= 0:
                return math.exp(lo), math.exp(hi)
            v = math.log(value)
            return None if lo <= v <= hi else (math.exp(lo), math.exp(hi))
        return None if lo <= value <= hi else (lo, hi)

    def alert_range(self, quantity: str, step: int, value: float, bounds: tuple[float, float],
                    confirm: int) -> None:
        start, end = phase_of(step)
        where = "below" if value < bounds[0] else "above"
        hint = {"loss": ("the model may see the answer (a missing mask, labels in the inputs, "
                         "eval data in training)" if where == "below" else
                         "training broke or stalled"),
                "grad_norm": "an instability, or a part of the model no longer trained",
                "examples": "the data pipeline changed the batch size"}[quantity]
        self.ctx.alert(
            f"invariant.{quantity}_range", "warning",
            f"{quantity} {value:.4g} at step {step} ({confirm} observations running) is {where} "
            f"the range [{bounds[0]:.4g}, {bounds[1]:.4g}] of {self.count} clean reference run(s) "
            f"around steps {start}-{end} (this phase and the ones beside it): {hint}",
            step=step, evidence={"value": value, "low": bounds[0], "high": bounds[1],
                                 "phase": [start, end], "references": self.count})

    def check_lr(self, step: int, lrs: Sequence[float]) -> None:
        want = self.lr.get(step)
        if want is None or _same(lrs, want):
            return
        self.ctx.alert(
            "invariant.lr_schedule", "error",
            f"step {step} runs at lr {_fmt(lrs)} but every clean reference run used "
            f"{_fmt(want)} at this step: the schedule is not applied (scheduler ignored, "
            "stuck or overwritten)",
            step=step, evidence={"lr": list(lrs), "reference": want})

    def check_updates(self, step: Step) -> None:
        """Check steps: parameters that stopped (or started) being updated, from versions."""
        pre, post = step.versions_pre, step.versions_post
        if len(pre) != len(self.always):
            return
        now_still = {i for i in self.always_idx if pre[i] == post[i]}
        stopped = now_still & self.still  # two check steps running
        self.still = now_still
        if stopped:
            names = [self.ctx.params.names[i] for i in sorted(stopped)]
            self.ctx.alert(
                "invariant.param_updates", "error",
                f"{', '.join(names[:4])}{' and more' if len(names) > 4 else ''} were not "
                f"updated at two check steps up to {step.number}, but at every step of "
                "every clean reference run: frozen, dropped from the optimizer, or its gradient "
                "cut off",
                step=step.number, evidence={"params": names[:20]}, subject="stopped")
        started = [i for i in self.never_idx if pre[i] != post[i]]
        if started:
            names = [self.ctx.params.names[i] for i in started]
            self.ctx.alert(
                "invariant.param_updates", "error",
                f"{', '.join(names[:4])}{' and more' if len(names) > 4 else ''} changed at step "
                f"{step.number} but never changed in the clean reference runs: a layer meant to "
                "stay frozen is trained",
                step=step.number, evidence={"params": names[:20]}, subject="started")

    def check_modes(self, step: int, context: str, unusual: list[str]) -> None:
        seen = self.modes[context]
        if not seen or set(unusual) in seen:
            return
        closest = min(seen, key=lambda s: len(s ^ set(unusual)))
        differ = sorted(set(unusual) ^ closest)
        mode = "eval" if context == "train" else "training"
        self.ctx.alert(
            "invariant.modes", "error",
            f"{'a training step' if context == 'train' else 'an evaluation'} at step {step} "
            f"runs {', '.join(differ[:4])}{' and more' if len(differ) > 4 else ''} in a mode no "
            f"clean reference run used there (expected {mode} mode only for "
            f"{', '.join(sorted(closest)[:4]) or 'no module'})",
            step=step, evidence={"context": context, "modules": differ[:20]},
            subject=context)

    def check_backwards(self, step: int, count: int) -> None:
        if self.backwards and count not in self.backwards:
            self.ctx.alert(
                "invariant.backwards", "error",
                f"{count} backward passes went into step {step}; the clean reference runs had "
                f"{sorted(self.backwards)} per step: a skipped optimizer step or broken "
                "accumulation",
                step=step, evidence={"backwards": count, "reference": sorted(self.backwards)})

    def check_eval_length(self, step: int, length: int) -> None:
        if self.eval_length is None or length <= self.eval_length:
            return
        self.ctx.alert(
            "invariant.eval_length", "warning",
            f"an evaluation forward after step {step} ran on {length} tokens, longer than any "
            f"in the clean reference runs ({self.eval_length}): generation past its token "
            "budget (max_new_tokens not respected, a prompt not trimmed to the context)",
            step=step, evidence={"length": length, "reference": self.eval_length})

    def check_alignment(self, step: int, found: str) -> None:
        if self.alignment is None or found in (self.alignment, "none"):
            return
        self.ctx.alert(
            "invariant.label_alignment", "error",
            f"labels at step {step} align with the inputs as '{found}', but as "
            f"'{self.alignment}' in every clean reference run: the next-token shift is missing "
            "or applied twice",
            step=step, evidence={"found": found, "reference": self.alignment})


def _ranges(by_phase: Mapping[tuple[int, int], list[dict[str, float]]], references: int,
            margin: float) -> dict[tuple[int, int], tuple[float, float, bool]]:
    """Phase -> (low, high, log) of one quantity, by the rule in the module doc."""
    keys = sorted(k for k, stats in by_phase.items() if len(stats) == references)
    out = {}
    for i, key in enumerate(keys):
        own = by_phase[key]
        exact = len({(s["min"], s["max"]) for s in own}) == 1 and own[0]["min"] == own[0]["max"]
        if exact:  # the same constant in every reference (e.g. the batch size): exact
            out[key] = (own[0]["min"], own[0]["max"], False)
            continue
        if references < MIN_RANGE_REFERENCES:
            continue  # a noisy quantity: too few runs to know how much runs differ
        stats = [s for k in keys[max(0, i - 1):i + 2] for s in by_phase[k]]  # and neighbours
        log = all(s["min"] > 0 for s in stats)
        f = math.log if log else (lambda v: v)
        lo, hi = min(f(s["min"]) for s in stats), max(f(s["max"]) for s in stats)
        within = max(f(s["q95"]) - f(s["q05"]) for s in own)
        medians = [f(s["q50"]) for s in own]
        slack = margin * max(within, max(medians) - min(medians))
        out[key] = (lo - slack, hi + slack, log)
    return out


def load_references(config: Any) -> list[dict[str, Any]]:
    """Profiles from ``reference``, ``reference_path`` or ``$LABCOAT_GUARD_REFERENCE``."""
    profiles = [dict(p) for p in config.reference]
    path = config.reference_path
    if path is None and not profiles:
        path = os.environ.get(REFERENCE_ENV) or None
    if path is not None:
        profiles.extend(read_reference_file(path))
    for i, p in enumerate(profiles):
        if p.get("format") != PROFILE_FORMAT:
            raise GuardError(f"reference profile {i} is not a guard profile (format "
                             f"{p.get('format')!r}); pass dicts from guard.profile()")
        if not isinstance(p.get("version"), int) or p["version"] > VERSION:
            raise GuardError(f"reference profile {i} has version {p.get('version')!r}; this "
                             f"labcoat reads version {VERSION} or older: upgrade labcoat")
    return profiles


def read_reference_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The profiles in a reference file (see the module doc for the format)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GuardError(f"guard reference file {path} does not exist (from reference_path or "
                         f"${REFERENCE_ENV})") from None
    except (OSError, ValueError) as err:
        raise GuardError(f"guard reference file {path} is not readable JSON: {err}") from None
    if isinstance(data, Mapping) and data.get("format") == REFERENCE_FORMAT:
        if not isinstance(data.get("version"), int) or data["version"] > VERSION:
            raise GuardError(f"guard reference file {path} has version {data.get('version')!r}; "
                             f"this labcoat reads version {VERSION} or older")
        data = data.get("profiles", [])
    if isinstance(data, Mapping):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(p, Mapping) for p in data):
        raise GuardError(f"guard reference file {path} must hold a profile, a list of profiles "
                         f"or {{\"format\": \"{REFERENCE_FORMAT}\", \"profiles\": [...]}}")
    return [dict(p) for p in data]


def write_reference_file(path: str | os.PathLike[str], profiles: Sequence[Mapping[str, Any]]
                         ) -> None:
    """Write `profiles` as a reference file (atomically: a temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"format": REFERENCE_FORMAT, "version": VERSION,
                               "profiles": list(profiles)}), encoding="utf-8")
    os.replace(tmp, path)


def _same(a: Sequence[float], b: Sequence[float]) -> bool:
    return len(a) == len(b) and all(
        abs(x - y) <= 1e-6 * max(abs(x), abs(y), 1e-30) for x, y in zip(a, b, strict=True))


def _fmt(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.6g}" for v in values)
