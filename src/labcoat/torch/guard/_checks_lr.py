"""Learning rate: the lr applied at each step against the declared schedule.

Rules (family ``updates``), judged at every full step (every ``grad_norm_every``
steps and near check steps, see `_guard`), when a ``scheduler`` or an
``lr_schedule`` is given:

    lr.mismatch               error     the applied lr differs from the scheduler/lr_schedule

With ``scheduler=``, each param group's lr must equal ``scheduler.get_last_lr()``
and the scheduler's ``last_epoch`` must keep advancing once per optimizer step
(as it did over the first steps; light steps between judged steps count). With
``lr_schedule=step -> lr``, each group's multiplier is fixed at the first step
with a non-zero lr and the group must then run at multiplier x schedule.
"""

from __future__ import annotations

from labcoat.torch.guard._alerts import Rule
from labcoat.torch.guard._context import Check, Context, Step

LEARN_STEPS = 3  # steps that fix the scheduler's learned cadence (one epoch per step)


class LearningRate(Check):
    """Applied lr per param group against ``scheduler`` or ``lr_schedule``."""

    family = "updates"
    rules = {
        "lr.mismatch": Rule("error", "the lr applied differs from the scheduler's"),
        "lr.scheduler_stalled": Rule("error", "`scheduler.step()` no longer called"),
    }

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.lr_ratios: list[float] | None = None
        self.sched_epochs: list[tuple[int, int]] = []  # (step, scheduler.last_epoch) judged

    def active(self) -> bool:
        cfg = self.ctx.config
        return (cfg.scheduler is not None or cfg.lr_schedule is not None) and super().active()

    def on_pre_step(self, step: Step) -> None:
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
