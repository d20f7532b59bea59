"""Which components carry the difference between two arms: shares with intervals and
corrected verdicts.

For seed pair s, item i and component k (control C, variant V, metric m):
- the difference: d = m(V) - m(C);
- forward patching (the variant's activation into the control): e_k = m(C <- V_k) - m(C);
  its share of the difference is sum(e_k) / sum(d) over seeds and items, 1 when the
  component alone turns the control into the variant on this metric;
- reverse patching (the control's into the variant): r_k = m(V) - m(V <- C_k), the share
  of the difference that removing the variant's version of k takes away;
- attribution: an estimate of e_k from gradients (`integrated_attribution`: the gradient
  integrated along the straight path between the two models' weights, `ig_steps`
  intervals), for every component; the `verify` components it ranks highest (all by
  default) are patched exactly, and the agreement between the two says how far the screen
  can be trusted: Spearman's rho over every verified component, Spearman's rho over the
  ones whose effect is clear (exact interval excluding 0, or among the top `TOP`), the
  recall of exact patching's top `TOP` in the screen's, and Spearman's rho against the
  mean of both exact directions (e_k + r_k) / 2. The screen integrates along a path from
  one model to the other, so where a component's effect depends on the model around it
  (a later head reading what a zeroed head wrote), it lands between e_k and r_k.

Intervals are two-way bootstraps over seed pairs and items (`stats.ratio_of_means`).
"Carries the difference" is the test of share = 0 against the family of exactly
patched components, corrected by `stats.CORRECTIONS` (Holm by default): a component
carries it when its corrected p-value is below 1 - ci and its share is positive. Its
interval is then at the correction's level (simultaneous Bonferroni for Holm).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import spearmanr
from torch import nn

from labcoat import stats
from labcoat.errors import LabcoatError
from labcoat.inside._components import Component, find_components, leaves, resolve
from labcoat.inside._patching import (
    Metric,
    exact_patching,
    integrated_attribution,
    metric_values,
)

TOP = 3  # the top components whose recall `Comparison.top_recall` reports


@dataclass(kw_only=True)
class PatchingConfig:
    """How `compare` patches and judges.

    components: names (see `resolve`); None: what `find_components` finds.
    verify: how many components to patch exactly, those whose attribution share is
        closest to 1 (the whole difference); None: all.
    reverse: also patch the control's activations into the variant.
    ig_steps: intervals of the path from the control's weights to the variant's on which
        the screen integrates its gradient (steps + 1 forward and backward passes per
        batch): 0 is classic one-pass attribution patching (the control's gradient), 1 the
        two ends averaged. The control's gradient alone fails where the metric saturates
        (a planted zeroed head: +0.13 against exact patching's -0.54, the wrong sign);
        the two ends overshoot (-0.80); 4 intervals come within 4% (-0.56).
    position: patch one sequence position (dim 1) only; None: every position.
    ci: the family level 1 - alpha of the verdicts; reps, seed: the bootstrap's.
    correction: a key of `stats.CORRECTIONS` ("holm", "bh", "bonferroni", "none").
    """

    components: Sequence[str] | None = None
    verify: int | None = None
    reverse: bool = True
    ig_steps: int = 4
    position: int | None = None
    ci: float = 0.95
    reps: int = 4000
    seed: int = 0
    correction: str = "holm"

    def __post_init__(self) -> None:
        if self.verify is not None and self.verify < 1:
            raise LabcoatError(f"verify={self.verify} must be >= 1 (None: patch every "
                               "component exactly)")
        if self.ig_steps < 0:
            raise LabcoatError(f"ig_steps={self.ig_steps} must be >= 0 (0: the control's "
                               "gradient alone)")
        if not 0 < self.ci < 1:
            raise LabcoatError(f"ci={self.ci} must be in (0, 1), e.g. 0.95")
        if self.correction not in stats.CORRECTIONS:
            raise LabcoatError(f"correction={self.correction!r}; choose from "
                               f"{', '.join(stats.CORRECTIONS)}")


@dataclass(frozen=True)
class Share:
    """A share of the difference with its interval (at `ci`) and p-value of share = 0."""

    estimate: float
    low: float
    high: float
    p_value: float
    ci: float

    @classmethod
    def of(cls, d: stats.Difference, p_value: float | None = None) -> Share:
        return cls(d.estimate, d.low, d.high, d.p_value if p_value is None else p_value, d.ci)


@dataclass(frozen=True)
class ComponentResult:
    """One component: its attribution estimate and, if verified, exact patching's shares.

    attribution: share of the difference the screen predicts for forward patching.
    forward, reverse: exact shares (None where not patched exactly); forward.p_value is
    corrected for the family. carries: the verdict (see the module doc). rank: by how
    close patching the component alone comes to turning one model into the other,
    |1 - share| averaged over both directions, so a share that overshoots (a downstream
    MLP reacting to an upstream change restores 1.1 of it) does not outrank the component
    that is the whole difference (1.0). Leaves first (`leaf` False: a group, e.g. a block
    whose parts are listed too), then components only the screen saw.
    """

    name: str
    kind: str
    group: str
    leaf: bool
    attribution: float
    forward: Share | None
    reverse: Share | None
    carries: bool
    rank: int


@dataclass
class Comparison:
    """What `compare` found. effects: per component, (seeds, items) arrays of e_k, r_k
    and the attribution estimates, for plots and further tests."""

    metric: str
    seeds: int
    items: int
    control: float  # mean metric of the control over seeds and items
    variant: float
    difference: stats.Difference  # mean(m(V) - m(C)), two-way bootstrap
    components: list[ComponentResult]
    agreement: float  # Spearman rho, attribution vs exact forward effect (verified only)
    correction: str
    family_size: int
    notes: list[str] = field(default_factory=list)
    effects: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)
    # Spearman rho over the verified components whose exact forward effect is clear: its
    # (uncorrected) interval excludes 0, or it is among exact patching's top `TOP`
    agreement_clear: float = float("nan")
    clear: int = 0  # how many components that is
    # the share of exact patching's top `TOP` (by rank's |1 - share|, verified only) that
    # the screen also puts in its top `TOP`; nan with `TOP` or fewer verified
    top_recall: float = float("nan")
    # Spearman rho over the verified components against (e_k + r_k) / 2, the exact effect
    # averaged over the two models as context (nan without reverse patching)
    agreement_both: float = float("nan")
    ig_steps: int = 0

    def ranked(self) -> list[ComponentResult]:
        return sorted(self.components, key=lambda c: c.rank)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the `labcoat inside --json` "patching" section)."""
        d = self.difference
        return {
            "metric": self.metric, "seeds": self.seeds, "items": self.items,
            "control": self.control, "variant": self.variant,
            "difference": {"estimate": d.estimate, "low": d.low, "high": d.high,
                           "p_value": d.p_value, "ci": d.ci, "method": d.method},
            "agreement_spearman": self.agreement,
            "agreement_spearman_clear": self.agreement_clear, "clear": self.clear,
            "top_recall": self.top_recall, "top": TOP,
            "agreement_spearman_both": self.agreement_both, "ig_steps": self.ig_steps,
            "correction": self.correction,
            "family_size": self.family_size, "notes": self.notes,
            "components": [asdict(c) for c in self.ranked()],
        }


def compare(pairs: Sequence[tuple[nn.Module, nn.Module]], batches: Sequence[Any],
            metric: Metric, config: PatchingConfig | None = None, *,
            metric_name: str = "metric") -> Comparison:
    """Patch between the control and the variant of each seed pair; rank the components.

    pairs: (control, variant) models, one pair per seed (same architecture within a pair).
    batches: the eval items in batches, as `metric` takes them, the same for every pair.
    metric(model, batch) -> (B,) per-item numbers, differentiable (e.g. log p(answer)).
    """
    config = config or PatchingConfig()
    if not pairs:
        raise LabcoatError("compare needs at least one (control, variant) pair of models")
    control0 = pairs[0][0]
    found = find_components(control0)
    components = (resolve(control0, config.components, found) if config.components
                  else found)
    if not components:
        raise LabcoatError("no components found in the model (no nn.ModuleList of blocks); "
                           "name the modules to patch (components=[...], --component PATH)")
    base_c = np.array([metric_values(c, batches, metric) for c, _ in pairs])
    base_v = np.array([metric_values(v, batches, metric) for _, v in pairs])
    diff = base_v - base_c
    notes = []
    difference = stats.ratio_of_means(diff, ci=config.ci, reps=config.reps, seed=config.seed)
    if not difference.excludes_zero():
        notes.append(f"the arms do not differ clearly on {metric_name} (difference "
                     f"{difference.estimate:.4g}, {100 * config.ci:g}% CI "
                     f"[{difference.low:.4g}, {difference.high:.4g}]): shares of it are "
                     "unstable")
    if diff.sum() == 0:
        raise LabcoatError(f"the control and the variant give identical {metric_name} on "
                           "every item: there is no difference to attribute")
    attribution = np.array([integrated_attribution(c, v, batches, metric, components,
                                                   steps=config.ig_steps,
                                                   position=config.position)
                            for c, v in pairs]).transpose(1, 0, 2)  # (K, S, N)
    screen = attribution.sum(axis=(1, 2)) / diff.sum()
    order = np.argsort(np.abs(1 - screen), kind="stable")
    count = len(components) if config.verify is None else min(config.verify, len(components))
    chosen = sorted(order[:count].tolist())
    verified = [components[k] for k in chosen]
    forward = np.array([exact_patching(c, v, batches, metric, verified,
                                       position=config.position)
                        for c, v in pairs]).transpose(1, 0, 2) - base_c[None]
    reverse = (base_v[None] - np.array([exact_patching(v, c, batches, metric, verified,
                                                       position=config.position)
                                        for c, v in pairs]).transpose(1, 0, 2)
               if config.reverse else None)
    shares = _shares(forward, reverse, diff, config)
    agreed = screen_agreement(attribution[chosen], forward, reverse, diff, ci=config.ci,
                              reps=config.reps, seed=config.seed)
    _note_disruption(shares, verified, notes)
    results = _results(components, screen, chosen, shares, config)
    effects = {c.name: {"attribution": attribution[k]} for k, c in enumerate(components)}
    for j, k in enumerate(chosen):
        effects[components[k].name]["forward"] = forward[j]
        if reverse is not None:
            effects[components[k].name]["reverse"] = reverse[j]
    return Comparison(metric=metric_name, seeds=len(pairs), items=diff.shape[1],
                      control=float(base_c.mean()), variant=float(base_v.mean()),
                      difference=difference, components=results,
                      agreement=agreed["spearman"], correction=config.correction,
                      family_size=len(chosen), notes=notes, effects=effects,
                      agreement_clear=agreed["spearman_clear"], clear=int(agreed["clear"]),
                      top_recall=agreed["top_recall"], agreement_both=agreed["spearman_both"],
                      ig_steps=config.ig_steps)


def screen_agreement(screen: np.ndarray, exact: np.ndarray, reverse: np.ndarray | None,
                     diff: np.ndarray, *, ci: float = 0.95, reps: int = 4000, seed: int = 0
                     ) -> dict[str, float]:
    """The screen's agreement with exact patching, as `Comparison` reports it: spearman
    (over all), spearman_clear (over the clear ones), clear (how many), top_recall (of the
    top `TOP`), spearman_both (against the mean of both directions; nan without reverse).

    screen, exact (forward e_k), reverse (r_k): (J, S, N) over the J verified components;
    diff: (S, N) the arms' difference.

    Clear: the exact effect's interval (at `ci`, uncorrected: this only chooses whom to
    correlate) excludes 0, or the component is among exact patching's top `TOP`. Spearman
    over every component also ranks the ones whose exact effect is noise around 0, whose
    order no screen can be expected to reproduce.
    """
    a, e = screen.mean(axis=(1, 2)), exact.mean(axis=(1, 2))
    count = len(e)
    rho_all = float(spearmanr(a, e).statistic) if count >= 3 else float("nan")
    total = diff.sum()
    by_exact = np.argsort(np.abs(1 - exact.sum(axis=(1, 2)) / total), kind="stable")
    by_screen = np.argsort(np.abs(1 - screen.sum(axis=(1, 2)) / total), kind="stable")
    recall = (len(set(by_exact[:TOP].tolist()) & set(by_screen[:TOP].tolist())) / TOP
              if count > TOP else float("nan"))
    clear = np.zeros(count, dtype=bool)
    clear[by_exact[:TOP]] = True
    for j in range(count):
        if not clear[j]:
            clear[j] = stats.ratio_of_means(exact[j], ci=ci, reps=reps,
                                            seed=seed).excludes_zero()
    rho_clear = (float(spearmanr(a[clear], e[clear]).statistic) if clear.sum() >= 3
                 else float("nan"))
    both = (float(spearmanr(a, (e + reverse.mean(axis=(1, 2))) / 2).statistic)
            if reverse is not None and count >= 3 else float("nan"))
    return {"spearman": rho_all, "spearman_clear": rho_clear, "clear": float(clear.sum()),
            "top_recall": recall, "spearman_both": both}


DISRUPTION = 3.0  # |share| beyond which one component's patch is not part of the difference


def _note_disruption(shares: list[tuple[Share, Share | None, bool]],
                     verified: list[Component], notes: list[str]) -> None:
    """Note when patching one component moves a model by several times the whole
    difference: the arms then keep their features in different directions (separately
    trained models do; a planted change does not), so a patch breaks the receiving model
    rather than moving it towards the other, and shares (and the screen's agreement with
    them) measure that disruption, not the difference."""
    sizes = [(max(abs(f.estimate), abs(r.estimate) if r is not None else 0.0), c.name)
             for (f, r, _), c in zip(shares, verified, strict=True)]
    size, name = max(sizes)
    if size > DISRUPTION:
        notes.append(f"patching {name} alone moves a model by {size:.3g} times the whole "
                     "difference: the arms' activations are not interchangeable (their "
                     "features lie in different directions, as in separately trained "
                     "models), so shares measure the disruption of a foreign activation, "
                     "not the difference (probes, which read each arm on its own, still "
                     "compare them)")


def _shares(forward: np.ndarray, reverse: np.ndarray | None, diff: np.ndarray,
            config: PatchingConfig) -> list[tuple[Share, Share | None, bool]]:
    """Per verified component: (forward share, reverse share, carries), corrected."""
    raw = [stats.ratio_of_means(e, diff, ci=config.ci, reps=config.reps, seed=config.seed)
           for e in forward]
    fix = stats.CORRECTIONS[config.correction]
    p_adj = fix.adjust_p([d.p_value for d in raw])
    level = fix.level(p_adj, 1 - config.ci, len(raw))
    out = []
    for j, (d, p) in enumerate(zip(raw, p_adj, strict=True)):
        wide = stats.ratio_of_means(forward[j], diff, ci=level, reps=config.reps,
                                    seed=config.seed)
        back = (Share.of(stats.ratio_of_means(reverse[j], diff, ci=level, reps=config.reps,
                                              seed=config.seed))
                if reverse is not None else None)
        carries = p <= 1 - config.ci and d.estimate > 0
        out.append((Share.of(wide, p), back, carries))
    return out


def _results(components: list[Component], screen: np.ndarray, chosen: list[int],
             shares: list[tuple[Share, Share | None, bool]], config: PatchingConfig
             ) -> list[ComponentResult]:
    finest = {c.name for c in leaves(components)}
    by_index = dict(zip(chosen, shares, strict=True))

    def key(k: int) -> tuple[bool, bool, float]:
        if k not in by_index:
            return (components[k].name not in finest, True, abs(1 - screen[k]))
        forward, reverse, _ = by_index[k]
        shares = [forward.estimate] + ([reverse.estimate] if reverse is not None else [])
        return (components[k].name not in finest, False,
                float(np.mean([abs(1 - x) for x in shares])))

    order = sorted(range(len(components)), key=key)
    rank = {k: r + 1 for r, k in enumerate(order)}
    out = []
    for k, c in enumerate(components):
        fwd, back, carries = by_index.get(k, (None, None, False))
        out.append(ComponentResult(name=c.name, kind=c.kind, group=c.group,
                                   leaf=c.name in finest, attribution=float(screen[k]),
                                   forward=fwd, reverse=back, carries=carries, rank=rank[k]))
    return out
