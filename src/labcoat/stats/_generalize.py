"""Does a variant's gain over the control generalize across tasks?

Three questions, answered together so none is read without the others:
on which tasks does it win or lose (per-task intervals adjusted for the
family of k comparisons), what is the average effect over tasks like these
(random-effects pooling, with the between-task spread tau^2 and I^2), and
is every effect that matters ruled out (an equivalence test at the declared
smallest effect), so that "no effect" is never confused with "not enough data".

The pooled interval is the modified Hartung-Knapp-Sidik-Jonkman one (HKSJ: the
random-effects variance rescaled by the weighted residual spread, Student t with
k - 1 df; Hartung & Knapp 2001, Sidik & Jonkman 2002; the scale truncated at 1,
Knapp & Hartung 2003), not DerSimonian-Laird's normal one: with 3-5 tasks whose
SEs come from 5 seeds each, the normal interval treats those SEs as known and
rejected "no pooled effect" too often, and plain HKSJ, narrower whenever the
effects happen to agree, did too (benchmarks/small_sample_verdicts.py has both).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from scipy import stats as sps

from labcoat.stats._meta import MetaAnalysis, random_effects
from labcoat.stats._multiple import CORRECTIONS, METHODS, Adjusted, adjust
from labcoat.stats._types import Difference

VERDICTS = (
    "helps broadly",
    "helps some tasks",
    "helps some tasks and hurts others",
    "hurts",
    "no detectable effect",
    "not enough data to tell",
)


@dataclass(frozen=True)
class Generalization:
    """A variant versus the control over k tasks. Effects are variant minus control.

    verdict: one of VERDICTS, decided in this order (s = +1 for
      direction="increase", -1 for "decrease"; a task is a win when its adjusted
      CI excludes 0 with s * effect > 0, a loss when it excludes 0 with
      s * effect < 0, a tie otherwise; the pooled effect helps (hurts) when its
      CI excludes 0 with s * estimate > 0 (< 0)):
      1. "helps broadly": the pooled effect helps, no task is a loss, and the
         effect is shared: at least half the tasks win, or Cochran's Q does not
         reject equal effects at alpha (else "helps some tasks": one task with a
         large effect can move a random-effects mean while the rest tie).
      2. "helps some tasks and hurts others": (a win or the pooled effect helps)
         and (a loss or the pooled effect hurts).
      3. "hurts": a loss or the pooled effect hurts, and no win.
      4. "helps some tasks": wins, no loss, but the pooled CI covers 0.
      Nothing significant (no win, no loss, pooled CI covers 0):
      5. "no detectable effect": a smallest effect delta was declared and the
         equivalence test (TOST: two one-sided HKSJ t(k-1) tests at alpha, i.e. the
         1 - 2 alpha pooled interval lies inside (-delta, delta)) rules out a
         pooled effect of delta or more. High power alone is not evidence of no
         effect: with every task's true effect at delta, the old "power >= 0.8"
         rule said "no detectable effect" 3.4-7.8% of the time.
      6. "not enough data to tell": otherwise (or no delta declared).
    tasks: per-task comparisons with family-adjusted p-values and CIs.
    wins, losses, ties: task names.
    pooled: random-effects pooled effect over the tasks (tau2, i2, q inside).
    power: of the two-sided pooled test (HKSJ t with k - 1 df, `t_power`) at alpha
      to detect an effect of size smallest_effect; None when none was declared.
      For planning only: it never decides the verdict.
    equivalence_p: the TOST p-value for |pooled effect| >= smallest_effect (NaN
      without one); "no detectable effect" needs it below alpha.
    """

    verdict: str
    reason: str
    tasks: dict[str, Adjusted]
    wins: tuple[str, ...]
    losses: tuple[str, ...]
    ties: tuple[str, ...]
    pooled: MetaAnalysis
    power: float | None
    smallest_effect: float | None
    alpha: float
    method: str
    direction: str
    equivalence_p: float = float("nan")

    @property
    def summary(self) -> str:
        """One sentence: verdict, pooled effect, task counts, power."""
        p = self.pooled
        base, _, hksj = p.method.partition("+")
        tau2_name = {"dl": "DerSimonian-Laird", "pm": "Paule-Mandel"}.get(base, base)
        if hksj:
            tau2_name += f", {'modified ' if hksj == 'mhksj' else ''}HKSJ t({p.k - 1})"
        level = next(iter(self.tasks.values())).ci_level
        better = "higher" if self.direction == "increase" else "lower"
        head = self.verdict if not self.reason else f"{self.verdict} ({self.reason})"
        text = (
            f"{head}: pooled effect {p.estimate:+.3g} ({100 * p.ci:.4g}% CI "
            f"[{p.low:+.3g}, {p.high:+.3g}], random effects with {tau2_name} "
            f"tau^2={p.tau2:.3g}, I^2={p.i2:.0%}) over {p.k} tasks, {better} is better; "
            f"{len(self.wins)} won, {len(self.losses)} lost, {len(self.ties)} tied "
            f"({CORRECTIONS[self.method].name}-adjusted {100 * level:.4g}% CIs)"
        )
        if self.power is not None and "power" not in self.reason:
            text += f"; power {self.power:.2f} to detect Δ={self.smallest_effect:g}"
        return text + "."


def t_power(effect: float, se: float, alpha: float, df: float) -> float:
    """Power of a two-sided t test with df degrees of freedom at level alpha to detect
    `effect` given the estimate's SE (noncentral t, ncp = effect / se)."""
    crit = float(sps.t.ppf(1 - alpha / 2, df))
    shift = abs(effect) / se
    return float(sps.nct.sf(crit, df, shift) + sps.nct.cdf(-crit, df, shift))


def pooled_equivalence_p(pooled: MetaAnalysis, smallest_effect: float) -> float:
    """TOST p-value of H0: |pooled effect| >= smallest_effect, on the pooled estimate's own
    law (t(k-1) for HKSJ, else normal): below alpha exactly when the 1 - 2 alpha pooled
    interval lies inside (-delta, delta) (Schuirmann 1987)."""
    law = sps.t(pooled.k - 1) if "hksj" in pooled.method else sps.norm()
    if not pooled.se > 0:
        return 1.0  # no spread measured: nothing is ruled out
    above = float(law.sf((pooled.estimate + smallest_effect) / pooled.se))
    below = float(law.cdf((pooled.estimate - smallest_effect) / pooled.se))
    return max(above, below)


def z_power(effect: float, se: float, alpha: float) -> float:
    """Power of a two-sided z test at level alpha to detect `effect` given the estimate's SE."""
    z = float(sps.norm.ppf(1 - alpha / 2))
    shift = abs(effect) / se
    return float(sps.norm.cdf(shift - z) + sps.norm.cdf(-shift - z))


def generalization(
    per_task: Mapping[str, Difference], *, smallest_effect: float | None, alpha: float = 0.05,
    method: str = "holm", direction: str = "increase", tau2_method: str = "dl",
) -> Generalization:
    """Judge whether a variant's effect over the control holds across tasks.

    per_task: {task name: Difference of variant minus control on that task}, at
    least 2 tasks, each with a finite SE > 0 (any method: welch, paired, ...).
    smallest_effect: the smallest effect worth detecting (> 0, in the metric's
    units), or None; without it the verdict never claims "no detectable effect".
    alpha: family level; per-task CIs are adjusted by `method` ("holm", "bh",
    "bonferroni", "none"; see `adjust`), the pooled CI is at 1 - alpha.
    direction: "increase" when higher is better, "decrease" when lower is.
    tau2_method: "dl" (DerSimonian-Laird) or "pm" (Paule-Mandel) for tau^2; the
    pooled interval and test are HKSJ's with t(k - 1) (see the module docstring).
    """
    if not isinstance(per_task, Mapping) or not all(
            isinstance(d, Difference) for d in per_task.values()):
        got = (type(per_task).__name__ if not isinstance(per_task, Mapping) else "a mapping to "
               + ", ".join(sorted({type(d).__name__ for d in per_task.values()
                                   if not isinstance(d, Difference)})))
        raise TypeError(
            "generalization takes {task name: Difference}, one variant-minus-control "
            "difference per task (e.g. {'math': stats.welch(control, variant), ...}); got "
            f"{got}")
    if direction not in ("increase", "decrease"):
        raise ValueError(f"direction={direction!r}; choose increase (higher is better) or decrease")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must be in (0, 1), e.g. 0.05")
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not known; choose one of {', '.join(METHODS)}")
    if smallest_effect is not None and not (math.isfinite(smallest_effect)
                                            and smallest_effect > 0):
        raise ValueError(
            f"smallest_effect={smallest_effect!r} must be a positive size in the metric's units "
            "(e.g. 0.01 for one point of accuracy), or None"
        )
    names = list(per_task)
    if len(names) < 2:
        raise ValueError(
            f"generalization needs at least 2 tasks (got {len(names)}); for one task read its "
            "Difference directly"
        )
    for name in names:
        se = per_task[name].se
        if not (math.isfinite(se) and se > 0):
            raise ValueError(
                f"task {name!r} has se={se}; each task needs a finite SE > 0 (add seeds or "
                "items so its noise can be estimated)"
            )
    diffs = [per_task[name] for name in names]
    adjusted = dict(zip(names, adjust(diffs, method, ci=1 - alpha), strict=True))
    s = 1 if direction == "increase" else -1
    wins = tuple(n for n in names if adjusted[n].excludes_zero() and s * adjusted[n].estimate > 0)
    losses = tuple(n for n in names if adjusted[n].excludes_zero() and s * adjusted[n].estimate < 0)
    ties = tuple(n for n in names if n not in wins and n not in losses)
    pooled = random_effects([d.estimate for d in diffs], [d.se**2 for d in diffs],
                            method=tau2_method, ci=1 - alpha, knapp_hartung="modified")
    power = None
    tost = float("nan")
    if smallest_effect is not None:
        power = t_power(smallest_effect, pooled.se, alpha, pooled.k - 1) if pooled.se > 0 \
            else 1.0
        tost = pooled_equivalence_p(pooled, smallest_effect)
    helps = pooled.excludes_zero() and s * pooled.estimate > 0
    hurts = pooled.excludes_zero() and s * pooled.estimate < 0
    shared = 2 * len(wins) >= len(names) or not pooled.q_p_value < alpha
    verdict, reason = _verdict(helps, hurts, bool(wins), bool(losses), pooled, power,
                               smallest_effect, tost, alpha)
    if verdict == "helps broadly" and not shared:
        verdict = "helps some tasks"
        reason = (f"the pooled effect helps, but only {len(wins)} of {len(names)} tasks win "
                  f"and the effects differ by task (I^2={100 * pooled.i2:.0f}%, Q p="
                  f"{pooled.q_p_value:.2g})")
    return Generalization(verdict, reason, adjusted, wins, losses, ties, pooled, power,
                          smallest_effect, alpha, method, direction, tost)


def _verdict(helps: bool, hurts: bool, wins: bool, losses: bool, pooled: MetaAnalysis,
             power: float | None, delta: float | None, tost: float,
             alpha: float) -> tuple[str, str]:
    if helps and not losses:
        reason = ""
        if delta is not None and max(abs(pooled.low), abs(pooled.high)) < delta:
            reason = f"though the whole pooled CI is smaller than Δ={delta:g}"
        return "helps broadly", reason
    if (helps or wins) and (hurts or losses):
        return "helps some tasks and hurts others", ""
    if hurts or losses:
        return "hurts", ""
    if wins:
        return "helps some tasks", "the pooled CI covers 0"
    if delta is None or power is None:
        return ("not enough data to tell",
                "no smallest effect declared, so the power to detect one is unknown")
    if tost < alpha:
        return "no detectable effect", (
            f"equivalence test p={tost:.3g} < {alpha:g}: the {100 * (1 - 2 * alpha):.3g}% "
            f"pooled interval lies within ±{delta:g}")
    return "not enough data to tell", (
        f"an effect of Δ={delta:g} is not ruled out (equivalence test p={tost:.3g}); "
        f"power {power:.2f} to detect Δ={delta:g}")
