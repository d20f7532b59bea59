"""Update integrity: does every optimizer step update what it should, with the intended lr?

Rules (family ``updates``). The ``update.*`` rules and ``trainable.unfrozen``
are judged at check steps (every ``check_every`` steps), the others at every full step
(every ``grad_norm_every`` steps and near check steps, see `_guard`):

    update.skipped            error     optimizer.step() ran with gradients but changed nothing
    update.param_unchanged    error     a parameter with a gradient was not touched by the step
    update.lost               error     touched at lr > 0, yet its value did not move (3 checks),
                                        while its gradient is still a sizeable fraction of its
                                        largest (a fit converged to rounding is not judged)
    update.outside_step       warning   weights changed in place between optimizer steps:
                                        seen across the step pair before a check step, and
                                        over a whole check interval by version accounting
                                        (a weight written more often than its optimizer steps
                                        account for: re-initialized, reloaded from an earlier
                                        checkpoint, a stray in-place op)
    update.corrupted          critical  weights changed between steps with no write at all
    update.norm_jump          error     a weight's norm changed between two check steps far
                                        beyond its own history of changes (robust z >
                                        spike_z, and at least 2x): rescaled, overwritten;
                                        from the second check step on, with no history, a
                                        growth of HUGE_JUMP x to an RMS above HUGE_RMS (one
                                        corruption: a weight scaled by 1e6, an exponent bit
                                        flipped)
    optimizer.missing_param   error     a parameter gets gradients but is in no param group
                                        (parameters the model gains after watch() count:
                                        the table is refreshed at check steps)
    optimizer.duplicate_param error     a parameter listed in two param groups: updated twice
    optimizer.step_counter    error     optimizer state reset, or its step counter off
                                        (also at a resume: a run watched with start_step > 0
                                        whose optimizer state starts fresh at its first step)
    trainable.frozen          error     a trainable (or declared trainable) parameter is frozen
    trainable.unfrozen        error     a declared-frozen parameter changed
    grad.missing              error     parameters that had a gradient at every step so far
                                        (learned over FED_STEPS full steps) get none, or an
                                        all-zero one: detached from the loss (a .detach(), a
                                        no_grad block, a skipped module) or zero_grad() between
                                        backward and step. Parameters declared with
                                        ``trainable=[...]`` are judged from the first step
                                        (no history needed): no gradient at a step, or an
                                        all-zero one at a check step after the first
    grad.not_reset            error     gradients carried over from the previous step
                                        (optimizer.zero_grad() missing)
    grad.accumulation         error     backward passes per optimizer step differ from the
                                        declared (or first-seen) count: a skipped step,
                                        broken accumulation (steps a ``grad_scaler`` skipped
                                        for inf gradients are expected)
    lr.mismatch               error     the applied lr differs from the scheduler/lr_schedule
    lr.scheduler_stalled      error     the scheduler stopped advancing with the optimizer

How "changed" is judged, cheaply: a tensor's version counter (bumped by any
in-place write through autograd-visible tensors, including the optimizer's
kernels) says whether it was *touched*; its L2 norm says whether its *value*
moved. Both are measured around check steps N: after step N-1, and before
and after step N. A parameter without gradient at a step (an unused
embedding, a skipped expert) is not expected to move under optimizers that
skip ``grad is None``; one with a gradient must be touched. Writes through
``.data`` and hardware faults move values without touching versions, which
is what ``update.corrupted`` looks for; an exact integer checksum of every
parameter every ``state_every`` steps catches the low-order bit flips a norm
cannot see. A weight changed between two steps is seen when the change
happens just before a check step (with ``check_every=1``: always), and by
version accounting anywhere in a check interval: an optimizer step bumps each
parameter's version by a fixed count (one per in-place kernel it runs on it:
AdamW's decay and update, SGD's add), learned at check steps as the largest
bump per step seen (the step alone, and the step pair before a check step,
which includes a per-step write of the loop's own such as weight clipping); a
parameter whose version advanced more over an interval than that count times
its steps was written outside the optimizer (a skipped step or an unused
parameter advances less, never more). Only the version counters the check steps
read anyway are used. Known false-alarm shape: weights swapped out and restored
around evaluation (an EMA's ``store()``/``copy_to()``/``restore()``, as in
diffusers' training scripts) are writes too, though the values come back; the
rule is a warning, ``disable=["update.outside_step"]`` if a loop does that.
"""

from __future__ import annotations

import collections
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from labcoat.torch.guard._alerts import GuardError, Rule
from labcoat.torch.guard._context import Check, Context, Step
from labcoat.torch.guard._measure import Transfer, checksums
from labcoat.torch.guard._robust import MAD_TO_SIGMA

LEARN_STEPS = 3  # steps that fix learned cadences (backward passes per step, scheduler steps)
NORM_RTOL = 1e-6  # norms closer than this are "unchanged" (rounding of a re-run reduction)
FED_CHECKS = 5  # check steps in which a parameter must have had a gradient (grad.missing),
FED_STEPS = 8  # ... or full steps, whichever come first (~step 20 by default, not ~84: a bug
# from step 30 or soon after a resume is judged; a parameter used now and then drops out)
JUMP_CHECKS = 20  # check intervals of |log norm ratio| kept per parameter (update.norm_jump)
JUMP_FLOOR = 0.1  # floor of the robust scale of those ratios, in log units (10%)
JUMP_MIN = math.log(2)  # and a jump is at least a factor 2, whatever the history
HUGE_JUMP = math.log(100.0)  # a norm grown 100x between two check steps ...
HUGE_RMS = 10.0  # ... to a root-mean-square value above 10: no optimizer step does both
# (weights of trained nets sit at RMS ~0.01-1; a zero-initialized bias can grow 100x, but
# not to 10), so it is judged with no history at all
LOST_CHECKS = 3  # check steps running with bit-equal norms before update.lost
CONVERGED_DROP = 1e-4  # a gradient norm this far below the parameter's largest one is at its
# rounding floor: a fit converged to float precision (a noiseless regression reaches gradients
# ~1e-7 of its first ones, float32's epsilon), whose updates are lost because there is nothing
# left to learn. Lost updates worth an error (bf16 weights, a tiny lr) come with gradients
# that stay within a few orders of magnitude of their peak: the model is not learning.


class Updates(Check):
    """Per-step update integrity, optimizer membership, trainability, gradient reset and lr."""

    family = "updates"
    rules = {
        "update.skipped": Rule("error", "`optimizer.step()` that changes nothing"),
        "update.param_unchanged": Rule("error", "a parameter with a gradient left alone by the "
                                                "step"),
        "update.lost": Rule("error", "updates below the dtype's resolution (bf16 weights, tiny "
                                     "lr); not judged for a parameter whose gradient fell below "
                                     "1e-4 of its largest (a fit converged to float precision), "
                                     "nor in a resumed run without the guard's state "
                                     "(`ckpt.track(guard=guard)`), whose gradient history is "
                                     "unknown"),
        "update.outside_step": Rule("warning", "weights written between steps (manual clipping, "
                                               "a stray in-place op)"),
        "update.corrupted": Rule("critical", "weights that change without any write: a flipped "
                                             "bit, a write through `.data`"),
        "update.norm_jump": Rule("error", "a weight's norm jumping between check steps far "
                                          "beyond its own history: rescaled, overwritten, "
                                          "reloaded; with no history (from the second check "
                                          "step on), a norm grown 100x to an RMS above 10: a "
                                          "weight corrupted once (scaled, an exponent bit "
                                          "flipped)"),
        "optimizer.missing_param": Rule("error", "a parameter that gets gradients but is in no "
                                                 "param group (also one the model gained after "
                                                 "`watch()`, a module added or replaced: seen "
                                                 "at the next check step)"),
        "optimizer.step_counter": Rule("error", "optimizer state reset, reloaded from an "
                                                "earlier step, or its step counter not "
                                                "advancing by one per step (judged at every "
                                                "full step)"),
        "trainable.frozen": Rule("error", "a layer frozen by mistake after the first step (or "
                                          "declared trainable and not trained); a freeze "
                                          "between `watch()` and the first step is taken as "
                                          "intent"),
        "trainable.unfrozen": Rule("error", "a layer declared frozen that is being trained"),
        "optimizer.duplicate_param": Rule("error", "a parameter listed in two param groups: "
                                                   "updated twice per step"),
        "grad.missing": Rule("error", "parameters that had a gradient at every step (learned "
                                      "over the first 8 full steps, ~20 steps after `watch()` "
                                      "or a resume) get none or an all-zero one: cut off from "
                                      "the loss (`.detach()`, `torch.no_grad()`, a module "
                                      "skipped by a flag), or `zero_grad()` between "
                                      "`backward()` and `step()`; parameters declared "
                                      "`trainable=[...]` are judged from the first step, so a "
                                      "cut at step 1 or at a resume is seen"),
        "grad.not_reset": Rule("error", "missing `optimizer.zero_grad()`: gradients accumulate "
                                        "across steps"),
        "grad.accumulation": Rule("error", "backward passes per step changed: a skipped step, a "
                                           "wrong accumulation condition"),
        "lr.mismatch": Rule("error", "the lr applied differs from the scheduler's"),
        "lr.scheduler_stalled": Rule("error", "`scheduler.step()` no longer called"),
    }

    periodic = frozenset({"queue_pre", "queue_post"})

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg, params = ctx.config, ctx.params
        self.declared_trainable = params.matching(cfg.trainable, "trainable")
        self.declared_frozen = params.matching(cfg.frozen, "frozen")
        both = self.declared_trainable & self.declared_frozen
        if both.any():
            raise GuardError(f"parameters {params.describe(both)} match both a trainable and a "
                             "frozen pattern; make the patterns disjoint")
        self.initially_trainable = np.array([t.requires_grad for t in params.tensors])
        self.last_rg: list[bool] | None = None
        self.prev: Step | None = None  # the previous step
        self.prev_stuck: np.ndarray | None = None  # check steps running each param was stuck
        self.grad_peak: np.ndarray | None = None  # largest gradient norm at check steps
        # grad_peak covers the run from its first step (a fresh run, or a resumed one whose
        # guard state was restored): without it a converged fit looks like lost updates
        self.history_known = ctx.config.start_step == 0
        self.reported: dict[str, set[str]] = {}
        self.backwards_seen: list[int] = []
        self.lr_ratios: list[float] | None = None
        self.sched_epochs: list[tuple[int, int]] = []  # (step, scheduler.last_epoch) judged
        self.counter: tuple[int, float, int] | None = None  # (param, step count, after step)
        self.count_pre: tuple[int, float | None, int] | None = None  # (param, count, step)
        # before the update of the step in progress
        self.count_seen: tuple[int, float] | None = None  # (param, step count) at the last judged
        # step, before its update
        self.state_size = 0
        self.scale: float | None = None  # the grad scaler's scale at the previous step
        self.checksum_prev: np.ndarray | None = None
        self.fed: np.ndarray | None = None  # a non-zero gradient at every check step so far
        self.fed_checks = 0
        self.fed_steps = 0
        self.fed_count = 0  # how many: fewer gradients at a step means some went missing
        self.bumps: np.ndarray | None = None  # largest version bumps per step seen
        self.anchor: tuple[int, list[int]] | None = None  # (check step, versions after it)
        self.jump_norms: np.ndarray | None = None  # parameter norms at the last check step
        self.jump_step = 0  # ... and its number
        self.jumps: collections.deque[np.ndarray] = collections.deque(maxlen=JUMP_CHECKS)
        # check intervals of history before judging: min_history // 2, or fewer when check
        # steps are sparse (about 5 x min_history steps: 100 by default), at least 5
        cfg = ctx.config
        self.jump_min_history = max(5, min(cfg.min_history // 2,
                                           math.ceil(5 * cfg.min_history / cfg.check_every)))
        self._index()

    def _index(self) -> None:
        """Index lists for the per-step loops (recomputed when the optimizer's groups change)."""
        params = self.ctx.params
        free = params.judged & ~self.declared_frozen
        self.watched = np.flatnonzero(free & params.in_optimizer).tolist()
        self.outside = np.flatnonzero(params.judged & ~params.in_optimizer).tolist()
        self.frozen = np.flatnonzero(self.declared_frozen).tolist()
        self.in_opt = np.flatnonzero(params.in_optimizer).tolist()

    # --- before the update -----------------------------------------------------------------------

    def queue_pre(self, step: Step, xfer: Transfer) -> None:
        if self.checksum_prev is not None:
            xfer.add("updates.checksum", checksums(self.ctx.params.tensors))

    def on_pre_step(self, step: Step) -> None:
        if self.ctx.table_changed:
            self._grow(len(self.ctx.params))
        if self.ctx.params.shape_changed or self.ctx.table_changed:
            self._index()
        if step.norms_pre is not None or self.checksum_prev is not None:  # else nothing to compare
            self._between_steps(step)
        grads = step.grads
        missing = [i for i in self.outside if grads[i] is not None] if self.outside else None
        if missing:
            self._once("optimizer.missing_param", "error", missing, step.number,
                       lambda names: f"{names} get gradients but are in no param group of the "
                                     "optimizer, so they never learn (module added after the "
                                     "optimizer was built? a filter dropped them?)")
        if self.ctx.params.twice:
            self._once("optimizer.duplicate_param", "error", self.ctx.params.twice, step.number,
                       lambda names: f"{names} are listed in more than one param group of the "
                                     "optimizer, so each step updates them twice (twice the lr, "
                                     "the other group's weight decay)")
        if step.requires_grad != self.last_rg:
            self._trainability(step)
            self.last_rg = step.requires_grad
        if step.check or step.grad_count < self.fed_count or self.fed_steps < FED_STEPS:
            self._missing_grads(step)
        self._reset_and_accumulation(step)
        self._learning_rate(step)
        self._optimizer_state(step)

    def _between_steps(self, step: Step) -> None:
        prev, params = self.prev, self.ctx.params
        exact = step.values.get("updates.checksum")
        expected, self.checksum_prev = self.checksum_prev, None
        if prev is None or prev.number != step.number - 1 or not prev.versions_post:
            return
        if (step.norms_pre is None or prev.norms_post is None) and exact is None:
            return  # nothing measured at this step (not a check step)
        moved = np.zeros(len(params), dtype=bool)
        if step.norms_pre is not None and prev.norms_post is not None:
            moved |= ~_close(step.norms_pre, prev.norms_post)
        if exact is not None and expected is not None:
            moved |= exact != expected
        moved &= params.judged
        if not moved.any():
            return
        written = np.fromiter(map(operator.ne, step.versions_pre, prev.versions_post), bool,
                              len(params))
        evidence = (self._diff(moved, prev.norms_post, step.norms_pre)
                    if prev.norms_post is not None and step.norms_pre is not None
                    else {"params": params.listed(moved)})
        silent = moved & ~written
        if silent.any():
            self.ctx.alert(
                "update.corrupted", "critical",
                f"{params.describe(silent)} changed between optimizer steps {step.number - 1} and "
                f"{step.number} without any tracked write: silent data corruption (a flipped "
                "bit in memory) or code writing through .data",
                step=step.number, evidence=evidence)
        outside = moved & written
        if outside.any():
            self.ctx.alert(
                "update.outside_step", "warning",
                f"{params.describe(outside)} changed in place between optimizer steps "
                f"{step.number - 1} and {step.number}, outside optimizer.step() (manual weight "
                "clipping, a stray in-place op, weights reloaded?)",
                step=step.number, evidence=evidence)

    def _interval_writes(self, step: Step) -> None:
        """Version accounting over the check interval that ends before this check step
        (judged after its bumps are learned: the step pair counts the loop's per-step writes)."""
        prev, (since, base) = self.prev, self.anchor  # type: ignore[misc]
        if (prev is None or prev.number != step.number - 1 or not prev.versions_post
                or self.bumps is None or len(base) != len(prev.versions_post)):
            return
        gap = prev.number - since
        if gap <= 0:
            return
        params = self.ctx.params
        advanced = np.subtract(prev.versions_post, base)
        over = (advanced > self.bumps * gap) & (self.bumps > 0) & params.judged
        if not over.any():
            return
        self._once("update.outside_step", "warning", over, step.number,
                   lambda names: f"{names} were written more often between optimizer steps "
                                 f"{since} and {prev.number} than their {gap} optimizer steps "
                                 "account for (version counters): weights changed outside "
                                 "optimizer.step(), e.g. re-initialized, reloaded from an "
                                 "earlier checkpoint, or a stray in-place op")

    def _learn_bumps(self, step: Step) -> None:
        """Check step: the version bumps of one optimizer step (and of the step pair before
        it, which includes the loop's own per-step writes), and the interval's new anchor."""
        pre, post = step.versions_pre, step.versions_post
        bumps = np.subtract(post, pre)
        prev = self.prev
        if prev is not None and prev.number == step.number - 1 and prev.versions_post \
                and len(prev.versions_post) == len(post):
            bumps = np.maximum(bumps, np.subtract(post, prev.versions_post))
        if self.bumps is None or len(self.bumps) != len(bumps):
            self.bumps = bumps
        else:
            self.bumps = np.maximum(self.bumps, bumps)
        if self.anchor is not None:
            self._interval_writes(step)
        self.anchor = (step.number, list(post))

    def _diff(self, mask: np.ndarray, before: np.ndarray, after: np.ndarray) -> dict[str, Any]:
        idx = np.flatnonzero(mask)[:10]
        return {"params": [self.ctx.params.names[i] for i in idx],
                "norm_before": before[idx].tolist(), "norm_after": after[idx].tolist()}

    def _trainability(self, step: Step) -> None:
        """A parameter frozen after the first judged step is a bug; one frozen between
        watch() and that step (mmcv/mmpretrain freeze stages in a hook before training) is
        the loop's intent."""
        params = self.ctx.params
        rg = np.array(step.requires_grad)
        if self.prev is None and self.last_rg is None and self.ctx.steps_seen == 0:
            self.initially_trainable &= rg
        froze = (params.judged & self.initially_trainable & ~rg & params.in_optimizer
                 & ~self.declared_frozen)
        if froze.any():
            self._once("trainable.frozen", "error", froze, step.number,
                       lambda names: f"{names} stopped requiring grad by step {step.number} "
                                     "although they are in the optimizer and were trainable: a "
                                     "layer frozen by mistake (declare frozen=[...] if intended)")
        declared = self.declared_trainable & ~(rg & params.in_optimizer)
        if declared.any():
            self._once("trainable.frozen", "error", declared, step.number,
                       lambda names: f"{names} are declared trainable but are frozen or not in "
                                     "the optimizer")

    def _missing_grads(self, step: Step) -> None:
        """grad.missing: learned over the first FED_STEPS full steps (FED_CHECKS check steps if
        they come first), then judged at check
        steps (gradient norms: absent or all zero) and at any step with fewer gradients than
        the parameters that always had one (absent)."""
        params = self.ctx.params
        if self.fed is not None and len(self.fed) < len(params):  # parameters appeared: not
            self.fed = np.append(self.fed, np.zeros(len(params) - len(self.fed), bool))  # fed
        has = step.has_grad if step.check else np.fromiter(
            (g is not None for g in step.grads), bool, len(step.grads))
        if self.declared_trainable.any():
            self._declared_starved(step, has)
        if self.fed_checks < FED_CHECKS and self.fed_steps < FED_STEPS:  # learning: parameters
            self.fed = has.copy() if self.fed is None else self.fed & has  # used now and then
            self.fed_checks += step.check  # drop out
            self.fed_steps += 1
            learned = self.fed_checks == FED_CHECKS or self.fed_steps == FED_STEPS
            self.fed_count = int(self.fed.sum()) if learned else 0
            return
        assert self.fed is not None
        eligible = np.array(step.requires_grad) & params.judged & params.in_optimizer
        starved = self.fed & ~has & eligible
        if starved.any() and not step.backwards and not step.grad_count:
            return  # no backward pass ran: a batch skipped on purpose, not a cut (zero_grad()
            # between backward and step still shows: backward ran)
        if starved.any():
            none = step.grad_count == 0
            self._once("grad.missing", "error", starved, step.number,
                       lambda names: f"no parameter had a gradient at optimizer step "
                                     f"{step.number} ({names} had one at every step before): "
                                     "zero_grad() between backward() and step(), or a loss "
                                     "detached from the model" if none else
                                     f"{names} had a gradient at every step until optimizer "
                                     f"step {step.number}, then none: cut off from the loss (a "
                                     ".detach(), a torch.no_grad() block, a module skipped by "
                                     "a flag)")
        self.fed &= eligible & ~starved  # judged once; frozen ones are trainable.frozen's
        self.fed_count = int(self.fed.sum())

    def _declared_starved(self, step: Step, has: np.ndarray) -> None:
        """Declared-trainable parameters need no history: no gradient at all is a cut (an
        all-zero one only after the first step: a zero-initialized LoRA factor starts so)."""
        present = step.present if step.check else has
        got = has if (step.check and step.number != self.ctx.first_step) else present
        eligible = np.array(step.requires_grad) & self.ctx.params.in_optimizer
        starved = self.declared_trainable & eligible & ~got
        if starved.any() and (step.grad_count or step.backwards):
            self._once("grad.missing", "error", starved, step.number,
                       lambda names: f"{names} are declared trainable (trainable=[...]) but "
                                     f"got no gradient at optimizer step {step.number}: cut "
                                     "off from the loss (a .detach(), a torch.no_grad() "
                                     "block, a module skipped by a flag)")

    def _reset_and_accumulation(self, step: Step) -> None:
        cfg = self.ctx.config
        if not step.reset:  # no sentinel saw a backward this step: nothing to judge
            return
        kept = [name for name, reset in step.reset if not reset]
        if kept and self.ctx.steps_seen:
            self.ctx.alert(
                "grad.not_reset", "error",
                f"gradients were not reset between optimizer steps {step.number - 1} and "
                f"{step.number} ({', '.join(kept)} still held the previous step's gradient when "
                "backward added to it): optimizer.zero_grad() missing, so gradients accumulate "
                "across steps",
                step=step.number, evidence={"sentinels": kept})
        count = step.backwards
        if cfg.grad_scaler is not None and cfg.grad_scaler.is_enabled():
            scale, previous = cfg.grad_scaler.get_scale(), self.scale
            self.scale = scale
            if previous is not None and scale < previous:
                return  # the scaler skipped steps with inf gradients (and lowered its scale)
        expected = cfg.accumulation_steps
        if expected is None:
            if len(self.backwards_seen) < LEARN_STEPS:
                self.backwards_seen.append(count)
                return
            if len(set(self.backwards_seen)) != 1:
                return  # no fixed cadence to hold the run to
            expected = self.backwards_seen[0]
        if count != expected:
            source = ("declared accumulation_steps" if cfg.accumulation_steps is not None
                      else f"the first {LEARN_STEPS} steps")
            self.ctx.alert(
                "grad.accumulation", "error",
                f"{count} backward passes went into optimizer step {step.number}, but "
                f"{expected} per step is expected ({source}): an optimizer step was skipped or "
                "the accumulation condition is wrong (set accumulation_steps if intended; pass "
                "grad_scaler= if a GradScaler skips steps)",
                step=step.number, evidence={"backwards": count, "expected": expected})

    def _learning_rate(self, step: Step) -> None:
        cfg = self.ctx.config
        lrs = step.lrs
        if cfg.scheduler is not None:
            expected = [float(v) for v in cfg.scheduler.get_last_lr()]
            self._stalled_scheduler(step)
        elif cfg.lr_schedule is not None:
            target = float(cfg.lr_schedule(step.number))
            if self.lr_ratios is None:
                if target == 0:
                    expected = [0.0] * len(lrs)
                else:  # per-group multipliers, fixed at the first step with a non-zero lr
                    self.lr_ratios = [lr / target for lr in lrs]
                    return
            else:
                expected = [r * target for r in self.lr_ratios]
        else:
            return
        for g, (lr, want) in enumerate(zip(lrs, expected, strict=False)):
            if abs(lr - want) > 1e-6 * max(abs(lr), abs(want), 1e-30):
                self.ctx.alert(
                    "lr.mismatch", "error",
                    f"param group {g} runs optimizer step {step.number} at lr {lr:.6g}, but the "
                    f"schedule says {want:.6g}: the scheduler is ignored or overwritten",
                    step=step.number, evidence={"group": g, "lr": lr, "expected": want})
                return

    def _stalled_scheduler(self, step: Step) -> None:
        """The scheduler advanced once per optimizer step over the first judged steps, and by
        less since the last judged step (light steps may lie between: `Context.is_light`)."""
        epoch = getattr(self.ctx.config.scheduler, "last_epoch", None)
        if not isinstance(epoch, int):
            return
        seen = self.sched_epochs
        seen.append((step.number, epoch))
        if len(seen) <= LEARN_STEPS:
            return
        learned = [e2 - e1 == n2 - n1 for (n1, e1), (n2, e2) in
                   zip(seen[:LEARN_STEPS], seen[1:LEARN_STEPS + 1], strict=True)]
        (n1, e1), (n2, e2) = seen[-2:]
        if all(learned) and e2 - e1 < n2 - n1:
            self.ctx.alert(
                "lr.scheduler_stalled", "error",
                f"the LR scheduler advanced once per optimizer step at first, but by "
                f"{e2 - e1} over the {n2 - n1} step(s) from {n1} to {n2} (last_epoch "
                f"{epoch}): scheduler.step() is no longer called, so the lr is stuck",
                step=step.number, evidence={"last_epoch": epoch, "advanced": e2 - e1,
                                            "steps": n2 - n1})
        del seen[LEARN_STEPS + 1: -1]  # keep the learned prefix and the latest value

    def _optimizer_state(self, step: Step) -> None:
        """State wiped between steps, or a step counter that moved on its own or went back."""
        optimizer = self.ctx.optimizer
        size = len(optimizer.state)
        if size < self.state_size:
            self.ctx.alert(
                "optimizer.step_counter", "error",
                f"the optimizer state shrank from {self.state_size} to {size} parameters between "
                f"steps {step.number - 1} and {step.number}: it was reset or replaced (Adam's "
                "moments and bias correction restart: a silent lr spike)",
                step=step.number, evidence={"before": self.state_size, "after": size})
        self.state_size = size
        if self.counter is not None and self.counter[2] < step.number:
            i, after, seen = self.counter  # light steps between may each add one (or none:
            gap = step.number - 1 - seen  # a step without this gradient), never more
            now = _step_counter(optimizer, self.ctx.params.tensors[i])
            if now is not None and (now > after + gap or (not gap and now != after)):
                self._counter_alert(step.number, i, after, now, "between steps")
        self._counter_back(step)
        self._counter_before(step)

    def _counter_back(self, step: Step) -> None:
        """A step counter never goes down: one that did was reset since the last judged step
        (a state wiped at a light step is rebuilt by that step's update, unseen by size)."""
        if not self.watched:
            return
        i = self.watched[0]
        now = _step_counter(self.ctx.optimizer, self.ctx.params.tensors[i])
        last, self.count_seen = self.count_seen, (None if now is None else (i, now))
        if now is not None and last is not None and last[0] == i and now < last[1]:
            self._counter_alert(step.number, i, last[1], now, "since the last judged step")

    def _counter_alert(self, number: int, i: int, before: float, after: float,
                       when: str) -> None:
        name = self.ctx.params.names[i]
        self.ctx.alert(
            "optimizer.step_counter", "error",
            f"the optimizer's step counter of {name} went from {before:g} to {after:g} "
            f"{when} (step {number}): the optimizer state was reset, replaced or stepped "
            "elsewhere",
            step=number, evidence={"param": name, "before": before, "after": after})

    # --- after the update -----------------------------------------------------------------------

    def queue_post(self, step: Step, xfer: Transfer) -> None:
        if (step.number + 1) % self.ctx.config.state_every == 0:
            xfer.add("updates.checksum_post", checksums(self.ctx.params.tensors))

    def on_post_step(self, step: Step) -> None:
        """Every full step (cheap: one state lookup); the update checks at check steps."""
        self._counter_after(step)
        if not (step.check or step.versions_post):  # far from a check step: nothing measured
            return
        self.checksum_prev = step.values.get("updates.checksum_post")
        if step.check:
            self._learn_bumps(step)  # and judges the interval before it
        self.prev = step
        if step.check:
            self._check_updates(step)

    def _check_updates(self, step: Step) -> None:
        """Check step: was every parameter with a gradient updated, and did values move?"""
        grads, pre, post = step.grads, step.versions_pre, step.versions_post
        untouched = [i for i in self.watched if grads[i] is not None and pre[i] == post[i]]
        if untouched:
            if not any(pre[i] != post[i] for i in self.in_opt):
                self.ctx.alert(
                    "update.skipped", "error",
                    f"optimizer step {step.number} changed no parameter although "
                    f"{sum(grads[i] is not None for i in self.watched)} had gradients",
                    step=step.number, evidence={"untouched": len(untouched)})
            else:
                self._once("update.param_unchanged", "error", untouched, step.number,
                           lambda names: f"{names} had gradients but optimizer step "
                                         f"{step.number} did not update them (dropped from "
                                         "the optimizer's param groups?)")
        frozen_moved = [i for i in self.frozen if pre[i] != post[i]]
        self._norm_jumps(step)
        self._check_values(step, frozen_moved)
        if frozen_moved:
            self._once("trainable.unfrozen", "error", frozen_moved, step.number,
                       lambda names: f"{names} are declared frozen but changed at step "
                                     f"{step.number}")

    def _norm_jumps(self, step: Step) -> None:
        """Check step: each parameter's |log| norm ratio since the last check step, judged
        against its own history (median and MAD, as in `_robust`): optimizers move norms
        smoothly, so a jump is a write from elsewhere (weights rescaled, reloaded, overwritten)
        or one blown-up update, whenever between two check steps it happened."""
        norms, last, since = step.norms_pre, self.jump_norms, self.jump_step
        self.jump_norms, self.jump_step = norms, step.number
        if norms is None or last is None or len(last) != len(norms):
            self.jumps.clear()
            return
        # zero, NaN or Inf norms are other rules' business: their ratio counts as 0 (the
        # ``where=`` masks keep NumPy from warning, with no errstate context on this path)
        ok = np.isfinite(norms) & np.isfinite(last) & (norms > 0) & (last > 0)
        ratio = np.ones(len(norms))
        np.divide(norms, last, out=ratio, where=ok)
        np.log(ratio, out=ratio)
        self._huge_jumps(step, ratio, norms, since)
        np.abs(ratio, out=ratio)
        # only a ratio above JUMP_MIN can be a jump: the history's median and MAD (the costly
        # part, on the training step's cold caches) are computed only when one is
        if len(self.jumps) >= self.jump_min_history and (ratio > JUMP_MIN).any():
            history = np.stack(self.jumps)
            median = np.median(history, axis=0)
            scale = np.maximum(MAD_TO_SIGMA * np.median(np.abs(history - median), axis=0),
                               JUMP_FLOOR)
            jumped = (self.ctx.params.judged & (ratio > JUMP_MIN)
                      & (ratio - median > self.ctx.config.spike_z * scale))
            if jumped.any():
                idx = np.flatnonzero(jumped)
                factors = np.exp(ratio[idx])
                self._once("update.norm_jump", "error", jumped, step.number,
                           lambda names: f"the norm of {names} changed {factors.max():.3g}x "
                                         f"between check steps {since} and {step.number}, "
                                         "against a usual "
                                         f"{np.exp(median[idx]).max():.3g}x: weights rescaled, "
                                         "overwritten or reloaded, or a blown-up update")
                ratio = np.where(jumped, median, ratio)  # a jump must not become the norm
        self.jumps.append(ratio)

    def _huge_jumps(self, step: Step, ratio: np.ndarray, norms: np.ndarray, since: int) -> None:
        """Check step: a weight grown HUGE_JUMP x to an RMS above HUGE_RMS since the last check
        step, judged without history (a one-shot corruption right after watch() or a resume)."""
        if not (ratio > HUGE_JUMP).any():
            return
        numel = np.fromiter((t.numel() for t in self.ctx.params.tensors), float,
                            len(norms))  # only now: a ratio this large is rare
        jumped = (self.ctx.params.judged & (ratio > HUGE_JUMP)
                  & (norms > HUGE_RMS * np.sqrt(np.maximum(numel, 1))))
        if jumped.any():
            factors = np.exp(ratio[jumped])
            self._once("update.norm_jump", "error", jumped, step.number,
                       lambda names: f"the norm of {names} changed {factors.max():.3g}x between "
                                     f"check steps {since} and {step.number}, to a "
                                     f"root-mean-square value above {HUGE_RMS:g}: weights "
                                     "scaled or corrupted (a flipped exponent bit), or a "
                                     "blown-up update")

    def _check_values(self, step: Step, frozen_moved: list[int]) -> None:
        """Check step: did the values move as the version counters say?"""
        assert step.trained is not None and step.norms_pre is not None
        assert step.norms_post is not None and step.has_grad is not None
        params = self.ctx.params
        moved = ~_close(step.norms_post, step.norms_pre)
        step.updated = step.trained & moved
        frozen_moved.extend(i for i in self.frozen if moved[i] and i not in frozen_moved)
        lrs = np.array([*step.lrs, 0.0])  # group -1 (not in the optimizer) reads the 0.0
        # "did not move" is bit-equal norms: identical values give identical norms (same
        # kernel, same data), while a small update with mixed signs can move a norm by less
        # than NORM_RTOL (a LayerNorm weight late in a cosine schedule did, in a clean run)
        stuck = (params.judged & ~self.declared_frozen & params.in_optimizer & step.has_grad
                 & step.trained & (step.norms_post == step.norms_pre)
                 & np.isfinite(step.norms_post) & (lrs[params.group] > 0)
                 & ~self._converged(step))
        previous = self.prev_stuck
        if previous is None or len(previous) != len(stuck):
            previous = np.zeros(len(stuck), dtype=int)
        self.prev_stuck = running = np.where(stuck, previous + 1, 0)
        lost = running >= LOST_CHECKS
        if lost.any():
            self._once("update.lost", "error", lost, step.number,
                       lambda names: f"{names} were updated at lr > 0 with non-zero gradients "
                                     f"but their values did not move, at {LOST_CHECKS} checks "
                                     "running: "
                                     "updates below the dtype's resolution (low-precision "
                                     "weights, tiny lr, weights grown huge)")

    def _converged(self, step: Step) -> np.ndarray:
        """Parameters whose gradient fell below CONVERGED_DROP of its largest (check steps);
        all of them after a resume whose gradient history is unknown."""
        grads = step.grad_norms
        if grads is None:
            return np.zeros(len(self.ctx.params), dtype=bool)
        if not self.history_known:  # a resume without the guard's state: no judgement
            return np.ones(len(self.ctx.params), dtype=bool)
        finite = np.where(np.isfinite(grads), grads, 0.0)
        peak = self.grad_peak
        if peak is None or len(peak) != len(finite):
            peak = finite
        self.grad_peak = peak = np.maximum(peak, finite)
        return finite < CONVERGED_DROP * peak

    def _counter_before(self, step: Step) -> None:
        """Every full step: one parameter's step counter before the update (None: no state)."""
        grads = step.grads
        i = self.counter[0] if self.counter is not None else None
        if i is None or i >= len(grads) or grads[i] is None:
            i = next((j for j in self.watched if grads[j] is not None), None)
        self.count_pre = None if i is None else (
            i, _step_counter(self.ctx.optimizer, self.ctx.params.tensors[i]), step.number)

    def _counter_after(self, step: Step) -> None:
        """Every full step: the counter read before the update must have grown by one (an
        optimizer stepped twice, a state restored or overwritten inside the step)."""
        pre, self.count_pre = self.count_pre, None
        if pre is None or pre[2] != step.number:
            return
        i, before, _ = pre
        now = _step_counter(self.ctx.optimizer, self.ctx.params.tensors[i])
        if now is None:
            return
        if before is not None and now != before + 1:
            self._counter_alert(step.number, i, before, now, "in one optimizer step")
        elif (before is None and now == 1 and self.ctx.config.start_step > 0
              and step.number == self.ctx.first_step):
            name = self.ctx.params.names[i]
            self.ctx.alert(
                "optimizer.step_counter", "error",
                f"the run resumed after step {self.ctx.config.start_step} (start_step) but the "
                f"optimizer's state of {name} started fresh at step {step.number} (step "
                "counter 1): the optimizer state was not restored (moments lost, bias "
                "correction restarts: a silent lr spike)",
                step=step.number, evidence={"param": name, "start_step":
                                            self.ctx.config.start_step, "after": now})
        self.counter = (i, now, step.number)

    # --- helpers ---------------------------------------------------------------------------------

    def _once(self, rule: str, severity: str, which: np.ndarray | list[int], number: int,
              message: Callable[[str], str]) -> None:
        """One alert naming the parameters in `which` (mask or indices) not yet reported."""
        idx = np.flatnonzero(which) if isinstance(which, np.ndarray) else which
        names = [self.ctx.params.names[i] for i in idx]
        seen = self.reported.setdefault(rule, set())
        new = [n for n in names if n not in seen]
        if not new:
            return
        seen.update(new)
        listed = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        self.ctx.alert(rule, severity, message(listed), step=number,
                       evidence={"params": new[:20], "count": len(new)}, subject=new[0])

    def _grow(self, n: int) -> None:
        """The parameter table grew (parameters added to the optimizer mid-run)."""
        extra = n - len(self.initially_trainable)
        if extra <= 0:
            return
        tensors = self.ctx.params.tensors
        self.initially_trainable = np.append(self.initially_trainable,
                                             [t.requires_grad for t in tensors[-extra:]])
        for name in ("declared_trainable", "declared_frozen"):
            setattr(self, name, np.append(getattr(self, name), np.zeros(extra, dtype=bool)))
        self.prev = None
        self.prev_stuck = None
        self.grad_peak = None
        self.anchor = None
        self.bumps = None
        self.last_rg = None
        self.checksum_prev = None


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal up to NORM_RTOL; NaN equals NaN (a NaN is another rule's business)."""
    with np.errstate(invalid="ignore"):  # norms are >= 0 (or NaN): no abs() of a or b
        return (np.abs(a - b) <= NORM_RTOL * np.maximum(a, b)) | (
            np.isnan(a) & np.isnan(b))


def _step_counter(optimizer: torch.optim.Optimizer, p: torch.Tensor) -> float | None:
    state = optimizer.state.get(p)
    if not state or "step" not in state:
        return None
    value = state["step"]
    return float(value) if isinstance(value, torch.Tensor) else float(value)
