"""What the update-integrity rules share, kept once per guard: declared masks, index lists, steps.

The ``update``, ``trainable``, ``grad``, ``lr`` and ``optimizer`` rules (each in its
``_checks_<family>`` module) judge the same parameters from the same bookkeeping:
the ``trainable=``/``frozen=`` masks, which parameters are watched (judged, in the
optimizer, not declared frozen), the last measured steps (check steps and the steps
before them) and which parameters' values moved at a check step. `StepHistory`
keeps it, refreshed when the optimizer's param groups change or the parameter
table grows, so no rule walks the parameters a second time. It declares no
rule: it runs (before the rules that read it, in the guard's order) while one of
them does. Its `once` reports each parameter once per rule.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from labcoat.torch.guard._alerts import GuardError
from labcoat.torch.guard._context import Check, Context, Step

NORM_RTOL = 1e-6  # norms closer than this are "unchanged" (rounding of a re-run reduction)


class StepHistory(Check):
    """Per-guard state of the update-integrity rules; see the module doc."""

    family = "updates"
    periodic = frozenset({"on_post_step"})  # it keeps only check steps and the steps before

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
        self.last: Step | None = None  # the last measured step (the previous one, before the
        # post-step callbacks of the step in progress)
        self.before: Step | None = None  # the measured step before `last`
        self.grad_peak: np.ndarray | None = None  # largest gradient norm at check steps
        # grad_peak covers the run from its first step (a fresh run, or a resumed one whose
        # guard state was restored): without it a converged fit looks like lost updates
        self.history_known = cfg.start_step == 0
        self.reported: dict[str, set[str]] = {}
        self.users: list[Check] = []
        self._on_grow: list[Callable[[], None]] = []
        self._index()
        ctx.history = self

    @staticmethod
    def of(ctx: Context) -> StepHistory:
        """The guard's history; it is built before the checks that read it (guard's order)."""
        if ctx.history is None:
            raise RuntimeError("internal: StepHistory must come before the checks reading it")
        return ctx.history

    def use(self, check: Check, on_grow: Callable[[], None] | None = None) -> StepHistory:
        """`check` reads this history; `on_grow` resets its own state when the table grows."""
        self.users.append(check)
        if on_grow is not None:
            self._on_grow.append(on_grow)
        return self

    def active(self) -> bool:
        return any(check.active() for check in self.users)

    def _index(self) -> None:
        """Index lists for the per-step loops (recomputed when the optimizer's groups change)."""
        params = self.ctx.params
        free = params.judged & ~self.declared_frozen
        self.watched = np.flatnonzero(free & params.in_optimizer).tolist()
        self.outside = np.flatnonzero(params.judged & ~params.in_optimizer).tolist()
        self.frozen = np.flatnonzero(self.declared_frozen).tolist()
        self.in_opt = np.flatnonzero(params.in_optimizer).tolist()

    def on_pre_step(self, step: Step) -> None:
        if self.ctx.table_changed:
            self._grow(len(self.ctx.params))
        if self.ctx.params.shape_changed or self.ctx.table_changed:
            self._index()

    def on_post_step(self, step: Step) -> None:
        if not (step.check or step.versions_post):  # far from a check step: nothing measured
            return
        self.before, self.last = self.last, step
        if step.check:
            assert step.trained is not None and step.norms_pre is not None
            assert step.norms_post is not None
            step.moved = ~close(step.norms_post, step.norms_pre)
            step.updated = step.trained & step.moved

    def once(self, rule: str, severity: str, which: np.ndarray | list[int], number: int,
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
        self.last = self.before = None
        self.grad_peak = None
        for reset in self._on_grow:
            reset()


def close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal up to NORM_RTOL; NaN equals NaN (a NaN is another rule's business)."""
    with np.errstate(invalid="ignore"):  # norms are >= 0 (or NaN): no abs() of a or b
        return (np.abs(a - b) <= NORM_RTOL * np.maximum(a, b)) | (
            np.isnan(a) & np.isnan(b))
