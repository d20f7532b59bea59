"""Numerics: NaN/Inf anywhere, loss spikes and divergence, gradient-norm explosion or collapse.

Rules (family ``numerics``):

    nonfinite.loss             critical  NaN/Inf loss
    nonfinite.grad             critical  NaN/Inf in a gradient, caught before the update
    nonfinite.param            critical  NaN/Inf in a parameter after the update
    nonfinite.optimizer_state  critical  NaN/Inf in optimizer state (e.g. Adam moments)
    loss.spike                 warning   loss far above its recent median (robust z, with a
                                         scale of at least 5% of the run's starting loss
                                         level: a loss near zero has no spread to speak of)
    loss.divergence            warning   loss climbing for many steps
    grad_norm.explosion        warning   gradient norm far above its recent history, for 2
                                         measurements, or the median of the last 8 at least
                                         LEVEL_JUMP x the window's (a sustained jump: noise
                                         added to the gradients, a loss scale)
    grad_norm.collapse         error     gradient norm far below its history, or all zero

A light step's finite loss is judged at the next full step's record (the
alert names the light step); a NaN/Inf loss is judged at once.

Spikes are judged against the run's own rolling window with median/MAD
(`_robust`), never against fixed thresholds: gradient norms in log space
(they vary over orders of magnitude), losses linearly. Gradient norms are of
the gradients ``optimizer.step()`` is about to apply, so after clipping they
sit at the clip value; such steps (the same norm repeating to 1e-6) are left
out of the window instead of looking like a collapse.
"""

from __future__ import annotations

import collections
import math
import statistics

import numpy as np
import torch

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Record, Step
from labcoat.torch.guard._measure import Transfer
from labcoat.torch.guard._robust import MAD_TO_SIGMA, RobustWindow

LEVEL_RUN = 8  # measured gradient norms whose median is compared with the window's
LEVEL_JUMP = 4.0  # ... and the factor above it that is a sustained jump
SPIKE_FLOOR = 0.05  # a loss spike's scale is at least 5% of the starting loss level
SHORT = 10  # losses in the short median that divergence compares against its own past minimum


class Numerics(Check):
    """Non-finite values and robust spike detection on loss and gradient norm."""

    family = "numerics"
    rules = {
        "nonfinite.loss": Rule("critical", "NaN/Inf loss: overflow, log(0), a division by zero, "
                                           "a bad batch"),
        "nonfinite.grad": Rule("critical", "NaN/Inf gradients, caught before the update is "
                                           "applied"),
        "nonfinite.param": Rule("critical", "NaN/Inf parameters: a bad update was applied"),
        "nonfinite.optimizer_state": Rule("critical", "NaN/Inf optimizer state: every later "
                                                      "update is poisoned"),
        "loss.spike": Rule("warning", "a loss far above its recent median (robust z over a "
                                      "rolling window; the scale is at least 5% of the starting "
                                      "loss level, so a hard batch near zero loss is no spike)"),
        "loss.divergence": Rule("warning", "a loss climbing over many steps: lr too high, "
                                           "broken schedule, data drift"),
        "grad_norm.explosion": Rule("warning", "a gradient norm far above its history, 2 "
                                               "measurements running, or the median of the last "
                                               "8 measurements 4x the window's (a sustained "
                                               "jump): instability, a wrong loss scale, noise "
                                               "added to gradients"),
        "grad_norm.collapse": Rule("error", "a gradient norm far below its history or exactly "
                                            "zero: a detached loss, dead units"),
    }

    periodic = frozenset({"queue_post", "on_post_step"})

    def __init__(self, ctx) -> None:  # type: ignore[no-untyped-def]
        super().__init__(ctx)
        cfg = ctx.config
        self.grad_log = RobustWindow(cfg.window, rel_floor=0.0, abs_floor=0.05)  # 5%: stable
        self.loss = RobustWindow(cfg.window)
        self.recent = collections.deque(maxlen=SHORT)
        self.short_medians: collections.deque[float] = collections.deque(
            maxlen=max(4, cfg.window // 5))  # one every 5 steps: the last `window` steps
        self.clip_value: float | None = None
        self.high = 0  # measurements running with the gradient norm above spike_z
        self.low = 0  # ... below -spike_z
        self.previous_norm: float | None = None
        self.level: list[float] = []  # log gradient norms since the last level comparison
        self.records = 0
        self.loss_level = 0.0  # median of the first min_history losses judged (spike floor)
        self.sigma = 0.0  # per-step loss noise (divergence)

    # --- gradients and parameters ----------------------------------------------------------------

    def on_pre_step(self, step: Step) -> None:
        if step.grad_norm is None:  # not measured at this step
            return
        if not math.isfinite(step.grad_norm):
            params = self.ctx.params
            bad = [params.names[i] for i, g in enumerate(step.grads)
                   if g is not None and params.judged[i]
                   and not torch.isfinite(torch.linalg.vector_norm(g.float()))]
            self.ctx.alert(
                "nonfinite.grad", "critical",
                f"NaN/Inf gradient in {', '.join(bad[:5])}{' and more' if len(bad) > 5 else ''} "
                f"before optimizer step {step.number}; the update would poison the parameters",
                step=step.number, evidence={"params": bad[:20]})
            return
        if step.grad_norm > 0 or any(g is not None for g in step.grads):
            self._judge_grad_norm(step.number, step.grad_norm)

    def _judge_grad_norm(self, number: int, norm: float) -> None:
        cfg = self.ctx.config
        clipped = self._clipped(norm)
        if norm == 0.0:
            if len(self.grad_log) >= cfg.min_history:
                self.ctx.alert(
                    "grad_norm.collapse", "error",
                    f"every gradient is exactly zero at step {number} (it was "
                    f"{math.exp(self.grad_log.median):.3g} typically): a detached loss, "
                    "a loss that does not depend on the parameters, or dead units",
                    step=number, evidence={"grad_norm": 0.0}, subject="zero")
            return
        if clipped:
            return
        value = math.log(norm)
        if len(self.grad_log) >= cfg.min_history:
            median, below, above = self.grad_log.baseline()  # once: this runs every step
            z = (value - median) / (above if value >= median else below)
            # Two measurements running: a healthy run's gradient norm jumps 5-70x for single
            # steps now and then (a hard batch); a real explosion persists.
            self.high = self.high + 1 if z > cfg.spike_z else 0
            self.low = self.low + 1 if z < -cfg.spike_z else 0
            if self.high >= 2:
                self.ctx.alert(
                    "grad_norm.explosion", "warning",
                    f"gradient norm {norm:.3g} at step {number} is {norm / math.exp(median):.0f}x "
                    f"its median {math.exp(median):.3g} over its last {len(self.grad_log)} "
                    f"measurements (robust z {z:.0f}, 2 running): an instability, a blown-up "
                    "weight or loss scale",
                    step=number, evidence=self._evidence(norm, median, z))
            elif (level := self._level_jump(value, median)) is not None:
                self.ctx.alert(
                    "grad_norm.explosion", "warning",
                    f"the gradient norm's median over the last {LEVEL_RUN} measurements, up to "
                    f"step {number}, is {level:.0f}x "
                    f"its median {math.exp(median):.3g} over the last {len(self.grad_log)}: a "
                    "sustained jump (noise added to the gradients, a loss scale, a changed loss)",
                    step=number, evidence=self._evidence(norm, median, z))
            elif self.low >= 2:
                self.ctx.alert(
                    "grad_norm.collapse", "error",
                    f"gradient norm {norm:.3g} at step {number} is {math.exp(median) / norm:.0f}x "
                    f"below its median {math.exp(median):.3g} (robust z {z:.0f}, 2 measurements "
                    "running): vanishing gradients, a partly detached loss, dead units",
                    step=number, evidence=self._evidence(norm, median, z))
        self.grad_log.push(value)

    def _level_jump(self, value: float, median: float) -> float | None:
        """Every LEVEL_RUN measurements: their median's factor over the window's, if it is
        LEVEL_JUMP or more."""
        self.level.append(value)
        if len(self.level) < LEVEL_RUN:
            return None
        ratio = math.exp(statistics.median(self.level) - median)
        self.level = []
        return ratio if ratio >= LEVEL_JUMP else None

    def _evidence(self, norm: float, median: float, z: float) -> dict[str, float]:
        return {"grad_norm": norm, "median": math.exp(median), "robust_z": round(z, 1),
                "window": len(self.grad_log)}

    def _clipped(self, norm: float) -> bool:
        """Whether `norm` is a clip value: the same norm (to 1e-6) seen at another step."""
        previous, self.previous_norm = self.previous_norm, norm
        if self.clip_value is not None and abs(norm - self.clip_value) <= 1e-6 * norm:
            return True
        if previous is not None and norm > 0 and abs(norm - previous) <= 1e-6 * norm:
            self.clip_value = norm
            return True
        return False

    def queue_post(self, step: Step, xfer: Transfer) -> None:
        if step.number % self.ctx.config.state_every == 0 or self.ctx.steps_seen <= 1:
            tensors = self._state_tensors()
            if tensors:
                xfer.add_norms("numerics.state", tensors)

    def on_post_step(self, step: Step) -> None:
        norms = step.norms_post
        # plain Python over the norms (>= 0): no NumPy reduction on the cold post-step path
        if norms is not None and not math.isfinite(sum(norms.tolist())):
            bad = self.ctx.params.judged & ~np.isfinite(norms)
            if bad.any():
                self.ctx.alert(
                    "nonfinite.param", "critical",
                    f"NaN/Inf in {self.ctx.params.describe(bad)} after optimizer step "
                    f"{step.number}",
                    step=step.number, evidence={"params": self.ctx.params.listed(bad)})
        state = step.values.get("numerics.state")
        if state is not None and not np.isfinite(state).all():
            self.ctx.alert(
                "nonfinite.optimizer_state", "critical",
                f"NaN/Inf in the optimizer state after step {step.number} "
                f"({int((~np.isfinite(state)).sum())} of {state.size} state tensors): "
                "every later update is poisoned",
                step=step.number, evidence={"bad_tensors": int((~np.isfinite(state)).sum())})

    def _state_tensors(self) -> list[torch.Tensor]:
        out = []
        for state in self.ctx.optimizer.state.values():
            for key, value in state.items():
                if (key != "step" and isinstance(value, torch.Tensor)
                        and value.is_floating_point() and value.numel()):
                    out.append(value)
        return out

    # --- loss ------------------------------------------------------------------------------------

    def on_record(self, rec: Record) -> None:
        if rec.loss is None:
            return
        loss, cfg = rec.loss, self.ctx.config
        if not math.isfinite(loss):
            self.ctx.alert("nonfinite.loss", "critical", f"loss is {loss} at step {rec.step}",
                           step=rec.step, evidence={"loss": str(loss)})
            return
        self.records += 1
        if len(self.loss) >= cfg.min_history:
            median, below, above = self.loss.baseline()
            if not self.loss_level:
                self.loss_level = abs(median)
            # a loss near zero has a near-zero spread, so a normal hard batch (0.13 against a
            # median 0.0019) would be tens of scales away: the scale is at least a share of
            # the loss level the run started from
            floor = SPIKE_FLOOR * self.loss_level
            z = (loss - median) / max(above if loss >= median else below, floor)
            if z > cfg.spike_z:
                self.ctx.alert(
                    "loss.spike", "warning",
                    f"loss {loss:.4g} at step {rec.step} is far above its median {median:.4g} over "
                    f"the last {len(self.loss)} steps (robust z {z:.0f})",
                    step=rec.step,
                    evidence={"loss": loss, "median": median, "robust_z": round(z, 1)})
            self._judge_divergence(rec.step, loss)
        self.loss.push(loss)
        self.recent.append(loss)

    def _judge_divergence(self, number: int, loss: float) -> None:
        """Short-window median far above the lowest short median of the last `window` steps."""
        cfg = self.ctx.config
        if self.records % 5 or len(self.recent) < SHORT:
            return
        short = statistics.median(self.recent)
        if self.records % 20 == 0 or not self.sigma:
            values = self.loss.values()
            # per-step noise from first differences: robust to the trend (Rousseeuw & Croux
            # 1993); it moves slowly, so it is refreshed every 20 steps
            diffs = sorted(abs(b - a) for a, b in zip(values, values[1:], strict=False))
            self.sigma = MAD_TO_SIGMA * diffs[len(diffs) // 2] / math.sqrt(2)
        se = max(1.2533 * self.sigma / math.sqrt(SHORT), 1e-3 * abs(short), 1e-30)  # of a median
        if len(self.short_medians) >= cfg.min_history // 5:
            low = min(self.short_medians)
            z = (short - low) / se
            if z > cfg.spike_z * 2:  # many steps of evidence: demand more than for one spike
                self.ctx.alert(
                    "loss.divergence", "warning",
                    f"loss is climbing: the median of the last {SHORT} steps is {short:.4g} at "
                    f"step {number}, up from {low:.4g} (robust z {z:.0f}): learning rate too high, "
                    "a broken schedule or drifting data",
                    step=number, evidence={"recent_median": short, "lowest_median": low,
                                           "robust_z": round(z, 1)})
        self.short_medians.append(short)
