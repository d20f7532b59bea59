"""Update integrity: does every optimizer step change what it should, and nothing else?

Rules (family ``updates``), judged at check steps (every ``check_every`` steps):

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
from typing import Any

import numpy as np

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Step
from labcoat.torch.guard._measure import Transfer, checksums
from labcoat.torch.guard._robust import MAD_TO_SIGMA
from labcoat.torch.guard._step_history import StepHistory, close

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



class Update(Check):
    """Version counters and norms around check steps: touched, moved, written elsewhere."""

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
    }

    periodic = frozenset({"queue_pre", "on_pre_step", "queue_post", "on_post_step"})

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.history = StepHistory.of(ctx).use(self, on_grow=self._grown)
        self._once = self.history.once
        self.prev_stuck: np.ndarray | None = None  # check steps running each param was stuck
        self.checksum_prev: np.ndarray | None = None
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

    def _grown(self) -> None:
        self.prev_stuck = None
        self.anchor = None
        self.bumps = None
        self.checksum_prev = None

    # --- before the update -----------------------------------------------------------------------

    def queue_pre(self, step: Step, xfer: Transfer) -> None:
        if self.checksum_prev is not None:
            xfer.add("updates.checksum", checksums(self.ctx.params.tensors))

    def on_pre_step(self, step: Step) -> None:
        """Check steps and state checksums: weights changed since the step before."""
        if step.norms_pre is not None or self.checksum_prev is not None:  # else nothing to compare
            self._between_steps(step)

    # --- after the update -----------------------------------------------------------------------

    def queue_post(self, step: Step, xfer: Transfer) -> None:
        if (step.number + 1) % self.ctx.config.state_every == 0:
            xfer.add("updates.checksum_post", checksums(self.ctx.params.tensors))

    def on_post_step(self, step: Step) -> None:
        """Check steps and the steps before: the version accounting and the update checks."""
        if not (step.check or step.versions_post):  # far from a check step: nothing measured
            return
        self.checksum_prev = step.values.get("updates.checksum_post")
        if step.check:
            self._learn_bumps(step)  # and judges the interval before it
            self._check_updates(step)

    def _between_steps(self, step: Step) -> None:
        prev, params = self.history.last, self.ctx.params
        exact = step.values.get("updates.checksum")
        expected, self.checksum_prev = self.checksum_prev, None
        if prev is None or prev.number != step.number - 1 or not prev.versions_post:
            return
        if (step.norms_pre is None or prev.norms_post is None) and exact is None:
            return  # nothing measured at this step (not a check step)
        moved = np.zeros(len(params), dtype=bool)
        if step.norms_pre is not None and prev.norms_post is not None:
            moved |= ~close(step.norms_pre, prev.norms_post)
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
        prev, (since, base) = self.history.before, self.anchor  # type: ignore[misc]
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
        prev = self.history.before
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

    def _check_updates(self, step: Step) -> None:
        """Check step: was every parameter with a gradient updated, and did values move?"""
        grads, pre, post = step.grads, step.versions_pre, step.versions_post
        untouched = [i for i in self.history.watched if grads[i] is not None and pre[i] == post[i]]
        if untouched:
            if not any(pre[i] != post[i] for i in self.history.in_opt):
                self.ctx.alert(
                    "update.skipped", "error",
                    f"optimizer step {step.number} changed no parameter although "
                    f"{sum(grads[i] is not None for i in self.history.watched)} had gradients",
                    step=step.number, evidence={"untouched": len(untouched)})
            else:
                self._once("update.param_unchanged", "error", untouched, step.number,
                           lambda names: f"{names} had gradients but optimizer step "
                                         f"{step.number} did not update them (dropped from "
                                         "the optimizer's param groups?)")
        self._norm_jumps(step)
        self._check_values(step)

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

    def _check_values(self, step: Step) -> None:
        """Check step: did the values move as the version counters say?"""
        assert step.trained is not None and step.norms_pre is not None
        assert step.norms_post is not None and step.has_grad is not None
        params = self.ctx.params
        lrs = np.array([*step.lrs, 0.0])  # group -1 (not in the optimizer) reads the 0.0
        # "did not move" is bit-equal norms: identical values give identical norms (same
        # kernel, same data), while a small update with mixed signs can move a norm by less
        # than NORM_RTOL (a LayerNorm weight late in a cosine schedule did, in a clean run)
        stuck = (params.judged & ~self.history.declared_frozen & params.in_optimizer & step.has_grad
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
        if not self.history.history_known:  # a resume without the guard's state: no judgement
            return np.ones(len(self.ctx.params), dtype=bool)
        finite = np.where(np.isfinite(grads), grads, 0.0)
        peak = self.history.grad_peak
        if peak is None or len(peak) != len(finite):
            peak = finite
        self.history.grad_peak = peak = np.maximum(peak, finite)
        return finite < CONVERGED_DROP * peak
