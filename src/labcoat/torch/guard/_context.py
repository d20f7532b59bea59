"""What the guard's checks see: the parameter table, one step's measurements, the `Check` base.

The `Guard` (in `_guard`) owns the hooks and measures once per step what
several checks need (gradient and parameter norms, version counters); each
check reads those and adds only its own cheap work. Check callbacks:

    on_forward(fwd)          the watched model was called (training or evaluation)
    queue_pre(step, xfer)    queue device tensors for the pre-step transfer
    on_pre_step(step)        optimizer.step() is about to run; gradients are final
    queue_post(step, xfer)   queue device tensors for the post-step transfer
    on_post_step(step)       optimizer.step() has run
    on_record(rec)           the loop called guard.record(loss=..., batch=...)
    profile() / close()      what this check learned / release resources

Callbacks named in a check's `periodic` run only at check steps and the step
before each (``check_every``); the guard skips them elsewhere, so the steps
in between pay only for the few checks that must look at every step. On
*light* steps (`Context.is_light`) the step callbacks do not run at all: only
``on_forward`` and ``on_record``.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn

from labcoat.torch.guard._alerts import GuardError, Rule
from labcoat.torch.guard._guard_config import GuardConfig
from labcoat.torch.guard._measure import Transfer

if TYPE_CHECKING:
    from labcoat.torch.guard._step_history import StepHistory


class ParamTable:
    """Every parameter the guard judges: the model's (tied ones once) plus optimizer-only ones.

    names: dotted names from ``model.named_parameters()`` (``optimizer.groups[g][i]`` for
    parameters only the optimizer knows). in_optimizer / group: refreshed by `sync_optimizer`
    whenever the optimizer's param groups change shape.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 ignore: Sequence[str]) -> None:
        self.names: list[str] = []
        self.tensors: list[torch.Tensor] = []
        self.index: dict[int, int] = {}
        for name, p in model.named_parameters(remove_duplicate=True):
            self._add(name, p)
        for g, group in enumerate(optimizer.param_groups):
            for i, p in enumerate(group["params"]):
                if id(p) not in self.index:
                    self._add(f"optimizer.groups[{g}][{i}]", p)
        if not self.tensors:
            raise GuardError("the watched model and optimizer have no parameters")
        self.ignore = tuple(ignore)
        self.judged = np.array([self._judged(n) for n in self.names])
        self.all_judged = bool(self.judged.all())
        self.model = model
        self.optimizer = optimizer
        self.in_optimizer = np.zeros(len(self.tensors), dtype=bool)
        self.group = np.full(len(self.tensors), -1)
        self.twice: list[int] = []  # parameters listed in more than one param group slot
        self._shape: list[int] = []
        self.shape_changed = False  # the last sync_optimizer() saw the groups change
        self.sync_optimizer()

    def _add(self, name: str, p: torch.Tensor) -> None:
        self.index[id(p)] = len(self.tensors)
        self.names.append(name)
        self.tensors.append(p)

    def _judged(self, name: str) -> bool:
        return not any(fnmatch.fnmatchcase(name, pat) for pat in self.ignore)

    def _track(self, name: str, p: torch.Tensor) -> int:
        """Add a parameter that appeared after watch(); its index."""
        self._add(name, p)
        self.judged = np.append(self.judged, self._judged(name))
        self.all_judged = bool(self.judged.all())
        self.in_optimizer = np.append(self.in_optimizer, False)
        self.group = np.append(self.group, -1)
        return len(self.tensors) - 1

    def __len__(self) -> int:
        return len(self.tensors)

    def sync_optimizer(self) -> bool:
        """Refresh optimizer membership if the param groups changed shape; True if they did."""
        shape = [len(g["params"]) for g in self.optimizer.param_groups]
        if shape == self._shape:
            self.shape_changed = False
            return False
        self._shape = shape
        self.shape_changed = True
        self.in_optimizer[:] = False
        self.group[:] = -1
        self.twice = []
        for g, group in enumerate(self.optimizer.param_groups):
            for p in group["params"]:
                i = self.index.get(id(p))
                if i is None:  # added to the optimizer after watch(): track it too
                    i = self._track(f"optimizer.groups[{g}][{len(self.tensors)}]", p)
                elif self.in_optimizer[i]:
                    self.twice.append(i)
                self.in_optimizer[i] = True
                self.group[i] = g
        return True

    def sync_model(self) -> bool:
        """Track parameters the model gained after watch() (a module added or replaced: the
        optimizer may not have them); True if there were any."""
        before = len(self.tensors)
        for name, p in self.model.named_parameters(remove_duplicate=True):
            if id(p) not in self.index:
                self._track(name, p)
        return len(self.tensors) != before

    def matching(self, patterns: Sequence[str], option: str) -> np.ndarray:
        """Boolean mask of names matching any pattern; a pattern matching nothing is an error."""
        mask = np.zeros(len(self.names), dtype=bool)
        for pat in patterns:
            hits = np.array([fnmatch.fnmatchcase(n, pat) for n in self.names])
            if not hits.any():
                examples = ", ".join(self.names[:4])
                raise GuardError(f"{option} pattern {pat!r} matches no parameter; names look "
                                 f"like {examples} (fnmatch patterns, e.g. 'blocks.0.*')")
            mask |= hits
        return mask

    def describe(self, mask: np.ndarray, limit: int = 5) -> str:
        names = [self.names[i] for i in np.flatnonzero(mask)]
        more = f" and {len(names) - limit} more" if len(names) > limit else ""
        return ", ".join(names[:limit]) + more

    def listed(self, mask: np.ndarray, limit: int = 20) -> list[str]:
        return [self.names[i] for i in np.flatnonzero(mask)][:limit]


class Forward:
    """One call of the watched model, as its forward pre-hook saw it.

    step: the optimizer step it belongs to: the step in progress for a training
    forward, the last completed step for an evaluation forward.
    training: grad mode on, not inference mode and not inside ``guard.evaluating()``.
    inputs: the first tensor argument (or ``input_ids=``), None if there is none.
    index: position among this step's training forwards (0 for the first micro-batch).
    """

    __slots__ = ("step", "training", "inputs", "args", "kwargs", "index")

    def __init__(self, step: int, training: bool, inputs: torch.Tensor | None,
                 args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None,
                 index: int = 0) -> None:
        self.step = step
        self.training = training
        self.inputs = inputs
        self.args = args
        self.kwargs = kwargs if kwargs is not None else {}
        self.index = index


class Step:
    """One optimizer step's measurements, filled by the guard's step hooks.

    Every step has plain-Python measurements (cheap): gradients (None where
    absent), requires_grad flags, the lr of each param group and the total
    gradient norm. *Check steps* (every ``check_every``-th step, and the first)
    add version counters before and after the update and NumPy arrays indexed
    like the `ParamTable`: per-parameter gradient norms and parameter norms
    before and after; the step before a check step has them after the update
    (to compare across the gap between the two). Otherwise they are empty/None.
    """

    # Class-level defaults: a step sets only what it measured (most steps measure little,
    # and each attribute set costs on the cold per-step path).
    versions_pre: list[int] = []  # check steps
    versions_post: list[int] = []  # check steps and the steps before
    requires_grad: list[bool] = []
    lrs: list[float] = []
    values: dict[str, np.ndarray] = {}  # set by the guard at every step (never mutated here)
    # total L2 norm of the gradients the optimizer will apply; None: not measured at this
    # step (see GuardConfig.grad_norm_every)
    grad_norm: float | None = 0.0
    reset: list[tuple[str, bool]] = []  # sentinel parameter: were its grads reset?
    grad_count = 0  # gradients present (not None)
    # check steps only:
    present: np.ndarray | None = None  # gradient is not None
    grad_norms: np.ndarray | None = None  # 0 where there is no gradient
    has_grad: np.ndarray | None = None  # gradient present with a non-zero norm
    norms_pre: np.ndarray | None = None
    norms_post: np.ndarray | None = None
    trained: np.ndarray | None = None  # touched by optimizer.step() (version moved)
    moved: np.ndarray | None = None  # its value (norm) moved over the step
    updated: np.ndarray | None = None  # trained, and its value moved

    def __init__(self, number: int, check: bool, forwards: list[Forward], backwards: int,
                 grads: list[torch.Tensor | None]) -> None:
        self.number = number
        self.check = check
        self.forwards = forwards
        self.backwards = backwards
        self.grads = grads


@dataclass
class Record:
    """One ``guard.record(...)`` call; step is the step it describes."""

    step: int
    loss: float | None
    batch: Any


Emit = Callable[..., None]


class Context:
    """Shared by the checks of one guard: settings, model, parameter table and `alert`."""

    def __init__(self, config: GuardConfig, model: nn.Module, optimizer: torch.optim.Optimizer,
                 params: ParamTable, emit: Emit, enabled: Callable[[str], bool]) -> None:
        self.config = config
        self.model = model
        self.optimizer = optimizer
        self.params = params
        self._emit = emit
        self.enabled = enabled
        self.internal = 0  # > 0 while the guard itself runs the model (probes): hooks stand by
        self.steps_seen = 0  # optimizer steps observed by this guard
        self.completed = config.start_step  # number of the last completed optimizer step
        self.first_step = config.start_step + 1  # always a check step
        self.check_every = config.check_every
        self.grad_norm_every = config.grad_norm_every
        self.recompute_every = config.recompute_every
        self.pending = Transfer()  # device values queued by forward hooks for the next step
        self.table_changed = False  # the parameter table grew at this step (new optimizer params)
        self.evaluating = 0  # > 0 inside guard.evaluating()
        self.label_alignment: str | None = None  # the last recorded batch's, for invariants
        self.history: StepHistory | None = None  # the update rules' shared bookkeeping

    def training_now(self) -> bool:
        """Whether a model call made now is a training forward (see `Forward`).

        (Inference mode turns grad mode off, so it needs no test of its own.)
        """
        return torch.is_grad_enabled() and not self.evaluating

    def is_check_step(self, number: int) -> bool:
        """Whether step `number` runs the periodic checks (see GuardConfig.check_every)."""
        return number % self.check_every == 0 or number == self.first_step

    def measures_grad_norm(self, number: int) -> bool:
        """Whether step `number` measures the total gradient norm (check steps always do):
        every `grad_norm_every` steps, the first step, and recompute steps (a NaN gradient
        must not pass for a recompute mismatch)."""
        every = self.recompute_every
        return (number % self.grad_norm_every == 0 or number == self.first_step
                or bool(every and number % every == 0))

    def is_light(self, number: int) -> bool:
        """Whether step `number` is a light step: no gradient norm and not near a check step.

        A light step only counts its training forwards and holds its loss (a non-finite
        loss is judged at once, the others at the next full step's record, under their own
        step numbers); the rules of the gradients, the update and the modes (a missing
        zero_grad, a frozen layer, a wrong lr, a skipped step, eval mode left on) judge the
        next full step, at most ``grad_norm_every - 1`` steps later: those bugs persist.
        """
        return not (self.measures_grad_norm(number) or self.is_near_check(number))

    def is_near_check(self, number: int) -> bool:
        """Whether step `number` is a check step or the step before one."""
        return (number % self.check_every == 0 or (number + 1) % self.check_every == 0
                or number == self.first_step)

    def step_now(self, training: bool) -> int:
        """The step a model call made now belongs to."""
        return self.completed + 1 if training else self.completed

    @contextlib.contextmanager
    def running_model(self) -> Iterator[None]:
        """The guard runs the model itself (a probe): its hooks ignore these calls."""
        self.internal += 1
        try:
            yield
        finally:
            self.internal -= 1

    def alert(self, rule: str, severity: str, message: str, *, step: int,
              evidence: dict[str, Any] | None = None, subject: str | None = None) -> None:
        """Report a broken rule once per (rule, subject) for the run."""
        self._emit(rule, severity, message, step=step, evidence=evidence or {}, subject=subject)


class Check:
    """A family of related rules; subclasses override the callbacks they need."""

    family: ClassVar[str] = ""
    rules: ClassVar[dict[str, Rule]] = {}  # rule -> its severity and the bug class it catches
    # callbacks that only act at check steps or the step before one: skipped at other steps
    periodic: ClassVar[frozenset[str]] = frozenset()
    # the step callbacks must see every step (no light steps while this check is active)
    every_step: ClassVar[bool] = False

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def active(self) -> bool:
        """Whether this check should run at all (some rule enabled, prerequisites met)."""
        return any(self.ctx.enabled(rule) for rule in self.rules)

    def on_forward(self, fwd: Forward) -> None: ...
    def queue_pre(self, step: Step, xfer: Transfer) -> None: ...
    def on_pre_step(self, step: Step) -> None: ...
    def queue_post(self, step: Step, xfer: Transfer) -> None: ...
    def on_post_step(self, step: Step) -> None: ...
    def on_record(self, rec: Record) -> None: ...
    def profile(self) -> dict[str, Any]:
        return {}
    def close(self) -> None: ...


def overrides(check: Check, name: str) -> bool:
    return getattr(type(check), name) is not getattr(Check, name)
