"""Loss spikes and divergence, judged against the run's own history.

Rules (family ``numerics``):

    loss.spike                 warning   loss far above its recent median (robust z, with a
                                         scale of at least 5% of the run's starting loss
                                         level: a loss near zero has no spread to speak of)
    loss.divergence            warning   loss climbing for many steps

The loss is what the loop gives ``guard.record(loss=...)``. A light step's
finite loss is judged at the next full step's record (the alert names the
light step); a NaN/Inf loss is ``nonfinite.loss``'s, and stays out of the
window. Spikes are judged against the run's own rolling window with
median/MAD (`_robust`), never against fixed thresholds.
"""

from __future__ import annotations

import collections
import math
import statistics

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Record
from labcoat.torch.guard._robust import MAD_TO_SIGMA, RobustWindow

SPIKE_FLOOR = 0.05  # a loss spike's scale is at least 5% of the starting loss level
SHORT = 10  # losses in the short median that divergence compares against its own past minimum


class Loss(Check):
    """Robust spike and trend detection on the recorded loss."""

    family = "numerics"
    rules = {
        "loss.spike": Rule("warning", "a loss far above its recent median (robust z over a "
                                      "rolling window; the scale is at least 5% of the starting "
                                      "loss level, so a hard batch near zero loss is no spike)"),
        "loss.divergence": Rule("warning", "a loss climbing over many steps: lr too high, "
                                           "broken schedule, data drift"),
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg = ctx.config
        self.loss = RobustWindow(cfg.window)
        self.recent: collections.deque[float] = collections.deque(maxlen=SHORT)
        self.short_medians: collections.deque[float] = collections.deque(
            maxlen=max(4, cfg.window // 5))  # one every 5 steps: the last `window` steps
        self.records = 0
        self.loss_level = 0.0  # median of the first min_history losses judged (spike floor)
        self.sigma = 0.0  # per-step loss noise (divergence)

    def on_record(self, rec: Record) -> None:
        loss, cfg = rec.loss, self.ctx.config
        if loss is None or not math.isfinite(loss):  # NaN/Inf: nonfinite.loss
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
