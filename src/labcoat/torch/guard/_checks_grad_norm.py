"""Gradient-norm explosion or collapse, judged against the run's own history.

Rules (family ``numerics``):

    grad_norm.explosion        warning   gradient norm far above its recent history, for 2
                                         measurements, or the median of the last 8 at least
                                         LEVEL_JUMP x the window's (a sustained jump: noise
                                         added to the gradients, a loss scale)
    grad_norm.collapse         error     gradient norm far below its history, or all zero

Spikes are judged against the run's own rolling window with median/MAD
(`_robust`), never against fixed thresholds, in log space (gradient norms
vary over orders of magnitude). The norm is the total one the guard
measures at full steps (``grad_norm_every``), of the gradients
``optimizer.step()`` is about to apply, so after clipping it sits at the clip
value; such steps (the same norm repeating to 1e-6) are left out of the
window instead of looking like a collapse. A non-finite norm is
``nonfinite.grad``'s.
"""

from __future__ import annotations

import math
import statistics

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Step
from labcoat.torch.guard._robust import RobustWindow

LEVEL_RUN = 8  # measured gradient norms whose median is compared with the window's
LEVEL_JUMP = 4.0  # ... and the factor above it that is a sustained jump


class GradNorm(Check):
    """Robust spike detection on the total gradient norm of full steps."""

    family = "numerics"
    rules = {
        "grad_norm.explosion": Rule("warning", "a gradient norm far above its history, 2 "
                                               "measurements running, or the median of the last "
                                               "8 measurements 4x the window's (a sustained "
                                               "jump): instability, a wrong loss scale, noise "
                                               "added to gradients"),
        "grad_norm.collapse": Rule("error", "a gradient norm far below its history or exactly "
                                            "zero: a detached loss, dead units"),
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.grad_log = RobustWindow(ctx.config.window, rel_floor=0.0,
                                     abs_floor=0.05)  # 5%: stable
        self.clip_value: float | None = None
        self.high = 0  # measurements running with the gradient norm above spike_z
        self.low = 0  # ... below -spike_z
        self.previous_norm: float | None = None
        self.level: list[float] = []  # log gradient norms since the last level comparison

    def on_pre_step(self, step: Step) -> None:
        norm = step.grad_norm
        if norm is None or not math.isfinite(norm):  # not measured; NaN/Inf: nonfinite.grad
            return
        if norm > 0 or any(g is not None for g in step.grads):
            self._judge_grad_norm(step.number, norm)

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
