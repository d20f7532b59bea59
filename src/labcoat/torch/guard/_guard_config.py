"""`GuardConfig`: every option of `labcoat.torch.watch`, documented and validated when built.

Defaults are the cheap default checks (a few fused reductions and one host
transfer per optimizer step); the costlier probes (`causal`, `recompute_every`)
are opt-in or periodic. `disable` takes rule names (each in its ``_checks_<family>``
module, listed by ``labcoat.torch.guard_rules()``) and the families of
``guard_rule_table()`` (``numerics``, ``updates``, ``modes``, ``data``, ``labels``,
``model``, ``distributed``, ``invariant``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labcoat.torch.guard._alerts import SEVERITIES, GuardError

REFERENCE_ENV = "LABCOAT_GUARD_REFERENCE"  # path of a reference file, read when none is given


@dataclass(kw_only=True)
class GuardConfig:
    """Settings of a `Guard` (``guard.config``); see the module doc of `_guard`."""

    # --- alerts ----------------------------------------------------------------------------------
    stop_on: str | None = None  # raise GuardStop when an alert of this severity or worse fires
    disable: Sequence[str] = ()  # rules (``grad.not_reset``) or families (``data``) to turn off
    ignore: Sequence[str] = ()  # fnmatch patterns of parameter names the guard does not judge
    start_step: int = 0  # optimizer steps already taken (a resumed run); alert steps count on
    # --- robust statistics (loss, gradient norm, token statistics) ------------------------------
    window: int = 100  # rolling window, in steps, of the median/MAD baselines
    min_history: int = 20  # values in the window before a robust check judges
    spike_z: float = 12.0  # robust z (|x - median| / (1.4826 MAD)) that counts as a spike
    # --- update integrity ------------------------------------------------------------------------
    accumulation_steps: int | None = None  # backward passes per optimizer step; None: learned
    grad_scaler: Any = None  # torch.amp.GradScaler: steps it skipped (inf grads) are expected
    trainable: Sequence[str] = ()  # fnmatch patterns of parameters that must be trained
    frozen: Sequence[str] = ()  # fnmatch patterns of parameters that must not change
    scheduler: Any = None  # LR scheduler: applied lr must equal get_last_lr(), and it must advance
    lr_schedule: Callable[[int], float] | None = None  # intended lr of optimizer step k (1-based)
    grad_norm_every: int = 3  # full steps: every N steps (and near check steps) the total
    # gradient norm (NaN/Inf, explosion, collapse) and the per-step rules (zero_grad, frozen
    # layers, lr, accumulation, modes); the steps between are light: they count training
    # forwards and hold finite losses, and what they show is judged at the next full step
    # (at most N - 1 steps later). 1: every step is full
    check_every: int = 21  # check steps: per-parameter norms (weights before step N vs after
    # N-1, whether N moved them), data checks; the other steps run the cheap checks only.
    # Odd, and prime to 10: a bug that repeats every 2, 4, 8 or 10 steps (accumulation,
    # loader workers, logging) cannot keep falling between the step pairs that are checked
    state_every: int | None = None  # every N steps: optimizer state NaN/Inf scan, exact
    # checksums; a multiple of check_every (None: the first multiple >= 200)
    # --- data ------------------------------------------------------------------------------------
    pad_id: int | None = None  # padding token: ignored when hashing rows (train vs eval items)
    ignore_index: int = -100  # label value that carries no loss (label alignment check)
    labels_shifted: bool | None = None  # True: labels[t] is the token after inputs[t]; False:
    # labels equal the inputs and the loss shifts them (Hugging Face); None: learned from the
    # first conclusive batch
    loaders: Sequence[Any] = ()  # torch DataLoaders whose workers' random states are compared
    # (data.worker_rng); give them before iterating them (their worker_init_fn is wrapped)
    # --- model probes ----------------------------------------------------------------------------
    causal: bool = False  # the model is causal over its sequence dim: probe future leakage
    causal_every: int | None = None  # probe every N steps (and at the first step); a multiple
    # of check_every (None: the first multiple >= 100; each probe costs ~1.5 ms on tinylm)
    recompute_every: int = 0  # every N steps recompute forward+backward and compare (needs loss_fn)
    loss_fn: Callable[[Any, Any], Any] | None = None  # loss_fn(model, batch) -> scalar loss
    recompute_rtol: float = 0.0  # allowed relative gradient difference (0: bit for bit)
    # --- distributed (when torch.distributed is initialized with more than one rank) ------------
    distributed_every: int = 10  # compare replicas every N steps (a collective on all ranks)
    straggler_ratio: float = 1.5  # a rank this many times slower than the others' median
    process_group: Any = None  # the data-parallel group of replicas; None: the default group
    # --- inferred invariants ---------------------------------------------------------------------
    reference: Sequence[Mapping[str, Any]] = ()  # profiles of clean runs (guard.profile())
    reference_path: str | Path | None = None  # JSON file of profiles (None and no reference:
    # $LABCOAT_GUARD_REFERENCE if set)
    invariant_margin: float = 1.0  # range slack, in units of the reference's 5-95% spread
    learn: bool = True  # build a profile of this run (guard.profile(), logged at close)

    def __post_init__(self) -> None:
        for name in ("disable", "ignore", "trainable", "frozen"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = (value,)
            setattr(self, name, tuple(value))
            if not all(isinstance(v, str) and v for v in getattr(self, name)):
                raise GuardError(f"{name}={value!r} must be a list of non-empty strings")
        if not isinstance(self.loaders, Sequence):
            self.loaders = (self.loaders,)
        self.loaders = tuple(self.loaders)
        if isinstance(self.reference, Mapping):
            self.reference = (self.reference,)
        if isinstance(self.check_every, int) and not isinstance(self.check_every, bool) \
                and self.check_every >= 1:
            if self.state_every is None:
                self.state_every = _first_multiple(self.check_every, 200)
            if self.causal_every is None:
                self.causal_every = _first_multiple(self.check_every, 100)
        self.reference = tuple(self.reference)
        problems = list(self._problems())
        if problems:
            raise GuardError("invalid guard settings: " + "; ".join(problems))

    def _problems(self) -> list[str]:
        out = []
        if self.stop_on is not None and self.stop_on not in SEVERITIES:
            out.append(f"stop_on={self.stop_on!r}; choose between None, "
                       + ", ".join(repr(s) for s in SEVERITIES))
        positive = ("window", "min_history", "grad_norm_every", "check_every", "state_every",
                    "causal_every", "distributed_every")
        for name in positive:
            if _bad_int(getattr(self, name), 1):
                out.append(f"{name}={getattr(self, name)!r} must be an integer >= 1")
        for name in ("start_step", "recompute_every"):
            if _bad_int(getattr(self, name), 0):
                out.append(f"{name}={getattr(self, name)!r} must be an integer >= 0")
        if self.accumulation_steps is not None and _bad_int(self.accumulation_steps, 1):
            out.append(f"accumulation_steps={self.accumulation_steps!r} must be None or >= 1")
        for name in ("state_every", "causal_every"):
            value = getattr(self, name)
            if (isinstance(value, int) and isinstance(self.check_every, int)
                    and self.check_every >= 1 and value % self.check_every):
                out.append(f"{name}={value} must be a multiple of "
                           f"check_every={self.check_every}")
        if self.min_history > self.window:
            out.append(f"min_history={self.min_history} must not exceed window={self.window}")
        for name, low in (("spike_z", 1.0), ("straggler_ratio", 1.0), ("invariant_margin", 0.0)):
            value = getattr(self, name)
            if not (isinstance(value, numbers.Real) and math.isfinite(value) and value > low):
                out.append(f"{name}={value!r} must be a number > {low:g}")
        if not (isinstance(self.recompute_rtol, numbers.Real) and 0 <= self.recompute_rtol < 1):
            out.append(f"recompute_rtol={self.recompute_rtol!r} must be in [0, 1)")
        if self.recompute_every and self.loss_fn is None:
            out.append(f"recompute_every={self.recompute_every} needs loss_fn=(model, batch) -> "
                       "loss to recompute the step")
        if self.loss_fn is not None and not callable(self.loss_fn):
            out.append("loss_fn must be callable as loss_fn(model, batch)")
        if self.lr_schedule is not None and not callable(self.lr_schedule):
            out.append("lr_schedule must be callable as lr_schedule(step) -> lr")
        if self.grad_scaler is not None and not hasattr(self.grad_scaler, "get_scale"):
            out.append(f"grad_scaler={self.grad_scaler!r} is not a torch.amp.GradScaler")
        if self.scheduler is not None and self.lr_schedule is not None:
            out.append("give scheduler or lr_schedule, not both")
        if self.scheduler is not None and not hasattr(self.scheduler, "get_last_lr"):
            out.append(f"scheduler={self.scheduler!r} has no get_last_lr(); pass a "
                       "torch.optim.lr_scheduler object (or lr_schedule=callable)")
        if self.pad_id is not None and _bad_int(self.pad_id, None):
            out.append(f"pad_id={self.pad_id!r} must be None or an integer")
        if _bad_int(self.ignore_index, None):
            out.append(f"ignore_index={self.ignore_index!r} must be an integer")
        if not all(isinstance(r, Mapping) for r in self.reference):
            out.append("reference must be a list of profiles (dicts from guard.profile())")
        return out


def _first_multiple(of: int, at_least: int) -> int:
    return of * max(1, -(-at_least // of))


def _bad_int(value: Any, minimum: int | None) -> bool:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return True
    return minimum is not None and value < minimum
