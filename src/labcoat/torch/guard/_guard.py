"""`watch` and `Guard`: catch silent training bugs within a step or two, explain what broke.

    from labcoat.torch import watch

    guard = watch(model, optimizer, run=run)        # hooks; the loop stays as it is
    for step in ...:
        loss = loss_fn(model(inputs), labels)
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        guard.record(loss=loss.item(), batch=(inputs, labels))  # optional: loss, labels
    guard.close()                                   # logs the learned profile
    guard.alerts                                    # [Alert(step, rule, severity, ...)]

How it watches: optimizer step pre/post hooks (gradients and parameters
before and after each update), a forward pre-hook on the model (training vs
evaluation context, module modes, the input batch), forward pre-hooks on
``nn.Embedding`` modules (token ids; attached only from the step before a
check step to the end of the check step, the only steps they act on), and a
gradient hook on one "sentinel" parameter (were gradients reset since the
last step, how many backward passes per step).

What it costs: steps come in three kinds. *Full steps*, every
``grad_norm_every`` steps (default 3), run the per-step rules (gradient
reset and accumulation, lr, optimizer state, frozen layers, modes) in plain
Python and measure the total gradient norm with one fused
``torch._foreach_norm`` (NaN/Inf gradients, explosion, collapse). *Light
steps*, the ones between, only count their training forwards and hold their
loss: a bug that persists (a missing zero_grad, a frozen layer, a wrong lr,
eval mode left on) is judged at the next full step, at most two steps later,
and a held loss then too, under its own step (a NaN/Inf loss at once).
*Check steps*, every ``check_every`` steps (default 21, and the step before
each), add per-parameter norms, version counters and the data checks; the
causality probe runs every ``causal_every`` steps (default 105), the
optimizer state scan every ``state_every`` (default 210). Inside a training step
the guard's code runs with cold caches (the step evicted them), where each
Python line costs microseconds and a first NumPy call tens of microseconds;
hence plain Python, and as little of it as possible, on the per-step path.
Measured in ``benchmarks/guard.py`` (three tinylm models interleaved, 12-14
ms CPU steps, one thread, 2026-12-03): ~35-40 us on a light step, ~320-360 us
on a full step (the cold ``_foreach_norm`` over 28 gradients ~120 us: per-tensor
dispatch, no cheaper variant found), ~0.7 ms on the step before a check step
and ~1.6-1.9 ms on a check step; ~230-250 us per step on average.
A NaN gradient at a light step poisons its update and shows at the next
step, in its loss. ``check_every=1, grad_norm_every=1`` checks everything at
every step.
Profile observations are queued between check steps when no reference is
given (the profile is identical); the robust median/MAD of ``update.norm_jump``
is computed only when some norm moved at least 2x (its precondition).

A training forward is one with grad mode on, outside inference mode and
outside ``with guard.evaluating():``; anything else is evaluation.
``guard.record`` belongs to the step in progress if the model has run a
training forward since the last ``optimizer.step()``, else to the step just
taken, so call it after the forward (before or after ``optimizer.step()``).

Checks: the rules named ``<family>.*`` are all in ``_checks_<family>`` (whose doc names
the bugs they catch, the cost and the false-alarm shapes): ``nonfinite`` (NaN/Inf),
``loss`` (spikes, divergence), ``grad_norm`` (explosion, collapse), ``numerics``
(linear layers outside autocast, hooked at check steps only), ``update`` (steps that
change nothing or too little, weights written outside the step), ``trainable`` (frozen
layers), ``grad`` (missing zero_grad, accumulation, cut-off or partly clipped
gradients), ``lr`` (the schedule), ``optimizer`` (param groups, state), ``mode``
(dropout/batch-norm mode, random draws in evaluation, train-only state evaluated
first), ``data`` (repeated batches, token ids, labels, eval leakage, loader workers),
``model`` (causality probe), ``sdc`` (recomputation for silent data corruption),
``dist`` (replica drift, gradient sync, stragglers) and ``invariant`` (relations
learned from clean reference runs). ``_step_history`` keeps what the update,
trainable, grad and optimizer rules share (one walk of the parameters per step).

Journal events (through ``run.event`` when a run is given; else Python logging):
    guard.started  info      checks, disabled, stop_on, reference_profiles, check_every,
                             causal_every (how late a rule may see a failure: `labcoat shrink`)
    guard.alert    warning | error | critical
                             rule, severity, evidence (one per rule and subject per run)
    guard.stopped  critical  rule, alert_step (then GuardStop is raised)
    guard.profile  info      profile (see `_checks_invariant`), alerts, repeats, overhead_s
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import numbers
import operator
import threading
import time
import warnings
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.autograd.graph import increment_version
from torch.nn.modules import module as module_hooks

from labcoat.journal import Events
from labcoat.sdk import Run
from labcoat.torch.guard._alerts import SEVERITIES, Alert, GuardError, GuardStop, at_least
from labcoat.torch.guard._checks_data import Data, Labels, WorkerRng
from labcoat.torch.guard._checks_dist import Distributed
from labcoat.torch.guard._checks_grad import Grad, GradClip
from labcoat.torch.guard._checks_grad_norm import GradNorm
from labcoat.torch.guard._checks_invariant import Invariants
from labcoat.torch.guard._checks_loss import Loss
from labcoat.torch.guard._checks_lr import LearningRate
from labcoat.torch.guard._checks_mode import EvalRandom, Modes, TrainOnlyState
from labcoat.torch.guard._checks_model import Causality
from labcoat.torch.guard._checks_nonfinite import NonFinite
from labcoat.torch.guard._checks_numerics import AutocastDtype
from labcoat.torch.guard._checks_optimizer import OptimizerUse, _step_counter
from labcoat.torch.guard._checks_sdc import Recompute
from labcoat.torch.guard._checks_trainable import Trainable
from labcoat.torch.guard._checks_update import Update
from labcoat.torch.guard._context import (
    Check,
    Context,
    Forward,
    ParamTable,
    Record,
    Step,
    overrides,
)
from labcoat.torch.guard._guard_config import GuardConfig
from labcoat.torch.guard._measure import Transfer
from labcoat.torch.guard._step_history import StepHistory

# The checks, in the order their callbacks run (alerts of one step come in this order). Each
# `_checks_<family>` module holds every rule named ``<family>.*`` (tests/guard/
# test_guard_rules.py holds them to it); `StepHistory` declares no rule: it keeps what the
# update, trainable, grad and optimizer rules share, so it comes before them.
CHECKS: tuple[type[Check], ...] = (NonFinite, GradNorm, Loss, AutocastDtype, StepHistory, Update,
                                   Trainable, Grad, LearningRate, OptimizerUse, GradClip, Modes,
                                   TrainOnlyState, EvalRandom, Data, WorkerRng, Labels,
                                   Causality, Recompute, Distributed, Invariants)
_LIGHT = Step(0, False, [], 0, [])  # stands for a light step between the step hooks
_LIGHT_FORWARD = Forward(0, True, None)  # ... and for its training forwards
SENTINELS = 1  # parameters whose gradient hooks tell whether grads were reset between steps

_log = logging.getLogger("labcoat.torch.guard")
STATE_VERSION = 1  # of Guard.state_dict()
_LOG_LEVELS = {"warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL}


def guard_rules() -> dict[str, str]:
    """Every rule name -> the bug class it catches (what ``disable=`` accepts, with families)."""
    return {rule: r.text for cls in CHECKS for rule, r in cls.rules.items()}


def guard_rule_table() -> list[dict[str, str]]:
    """Every rule as its check declares it: ``{"rule", "family", "severity", "catches"}``,
    in the order of the checks (``docs/guard.md``'s rule table is built from this)."""
    return [{"rule": rule, "family": cls.family, "severity": r.severity, "catches": r.text}
            for cls in CHECKS for rule, r in cls.rules.items()]


_DECLARED = {rule: r.severity for cls in CHECKS for rule, r in cls.rules.items()}


def watch(model: nn.Module, optimizer: torch.optim.Optimizer, *, run: Run | None = None,
          config: GuardConfig | None = None, **options: Any) -> Guard:
    """Watch a training loop for silent bugs; returns the `Guard` (see the module doc).

    model: the module the loop calls (its forward and modules are hooked).
    optimizer: the optimizer whose ``step()`` marks one training step.
    run: where alerts go (``guard.alert`` events); None: Python logging only.
    config / options: a `GuardConfig`, or its fields as keywords
    (``watch(model, opt, stop_on="critical", lr_schedule=sched)``).
    """
    if config is not None and options:
        raise GuardError("give a GuardConfig or keyword options, not both")
    if config is None:
        fields = GuardConfig.__dataclass_fields__
        unknown = sorted(set(options) - set(fields))
        if unknown:
            raise GuardError(f"unknown guard option(s) {', '.join(unknown)}; choose from "
                             f"{', '.join(sorted(fields))}")
        config = GuardConfig(**options)
    return Guard(model, optimizer, config=config, run=run)


class Guard:
    """Hooks on one model and optimizer, the checks they feed, and the alerts they raised.

    Thread-safe alerting: hooks may run on autograd threads. ``alerts`` is
    appended to in order; `GuardStop` is raised from the hook (or ``record``)
    that produced an alert at or above ``stop_on``.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                 config: GuardConfig, run: Run | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise GuardError(f"watch() needs an nn.Module, got {type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise GuardError(f"watch() needs a torch.optim.Optimizer, got "
                             f"{type(optimizer).__name__}")
        self.config = config
        self.model = model
        self.optimizer = optimizer
        self.run = run
        self.alerts: list[Alert] = []
        self.step = config.start_step  # optimizer steps completed
        self.seconds = 0.0  # time spent inside the guard (hooks, record)
        self._disabled = _check_disable(config.disable)
        self._enabled_cache: dict[str, bool] = {}
        self._seen: set[tuple[str, str | None]] = set()
        self._repeats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop: Alert | None = None
        self._stopped = False
        self._closed = False
        self.params = ParamTable(model, optimizer, config.ignore)
        self._ctx = Context(config, model, optimizer, self.params, self._emit, self.enabled)
        self._forwards: list[Forward] = []
        self._current: Step | None = None
        self._spare = Transfer()  # reused by the post-step hook (resolve() empties it)
        built: list[Check] = []  # all built first: StepHistory's activity is its users'
        try:
            for cls in CHECKS:
                built.append(cls(self._ctx))
        except BaseException:  # a bad option (GuardError): no hook of this guard stays behind
            for check in built:
                check.close()
            raise
        self._checks = []
        for check in built:
            if check.active():
                self._checks.append(check)
            else:
                check.close()  # release any hook it registered
        by_name = {type(c).__name__: c for c in self._checks}
        self._data: Data | None = by_name.get("Data")  # type: ignore[assignment]
        # the update rules' history: the gradient peaks a resumed run needs (state_dict)
        self._updates: StepHistory | None = by_name.get("StepHistory")  # type: ignore[assignment]
        self._invariants: Invariants | None = by_name.get("Invariants")  # type: ignore[assignment]
        names = ("on_forward", "queue_pre", "on_pre_step", "queue_post", "on_post_step",
                 "on_record")
        self._near = {name: [getattr(c, name) for c in self._checks if overrides(c, name)]
                      for name in names}  # callbacks at check steps and the steps before
        self._far = {name: [getattr(c, name) for c in self._checks
                            if overrides(c, name) and name not in c.periodic]
                     for name in names}  # callbacks at the other steps
        self._lights = not any(c.every_step for c in self._checks)  # light steps allowed
        mark = _marker(weakref.ref(self))
        # fused optimizers (AdamW(fused=True), Trainer's default "adamw_torch_fused") update
        # parameters in place without bumping their version counters (torch 2.13), which
        # update.skipped would read as "this step changed no parameter": bump them first
        fused = any(group.get("fused") for group in optimizer.param_groups)
        self._handles: list[Any] = [
            *([optimizer.register_step_post_hook(_bump_versions)] if fused else []),
            optimizer.register_step_pre_hook(self._pre_step),
            optimizer.register_step_post_hook(self._post_step),
            model.register_forward_pre_hook(self._forward_pre, with_kwargs=True),
            # global: any module or parameter registered anywhere marks the model as maybe
            # changed, so it is walked again at the next check step (not every check step)
            module_hooks.register_module_module_registration_hook(mark),
            module_hooks.register_module_parameter_registration_hook(mark),
            # a checkpoint restored after watch(): the optimizer's state is loaded (a model's
            # alone is not a resume: fine-tuning loads pretrained weights)
            optimizer.register_load_state_dict_post_hook(self._optimizer_loaded),
        ]
        self._loaded_early = False  # optimizer state loaded before the first step, step unknown
        self._registered = False  # a module or parameter was registered since the last walk
        self._losses: list[tuple[int, float]] = []  # (step, loss) of light steps, not yet judged
        self._light_next = False  # the next optimizer step is a light one
        self._sentinels = self._pick_sentinels()
        self._sentinel_names = [self.params.names[self.params.index[id(p)]]
                                for p in self._sentinels]
        self._sentinel_calls = [0] * len(self._sentinels)
        self._sentinel_reset: list[bool | None] = [None] * len(self._sentinels)
        self._grad_refs: list[tuple[Any, int] | None] = [None] * len(self._sentinels)
        for i, p in enumerate(self._sentinels):
            self._handles.append(p.register_hook(functools.partial(self._on_grad, i)))
        self._event(Events.GUARD_STARTED, f"guard watching {len(self.params)} parameters with "
                    f"{len(self._checks)} check families", level="info", step=self.step,
                    checks=[type(c).__name__.lower() for c in self._checks if c.rules],
                    disabled=sorted(self._disabled), stop_on=config.stop_on,
                    reference_profiles=self._invariants.references if self._invariants else 0,
                    check_every=config.check_every, causal_every=config.causal_every)

    # --- public API ------------------------------------------------------------------------------

    def record(self, loss: Any = None, batch: Any = None) -> None:
        """Give the guard this step's loss (number or 0-d tensor) and/or batch.

        batch: a tensor, a tuple/list ``(inputs, labels, ...)`` or a dict with
        ``input_ids``/``labels``; enables the label checks (and recompute).
        """
        started = time.perf_counter()
        number = self.step + 1 if self._forwards else self.step
        value = None
        if loss is not None:
            value = _loss_value(loss)
        elif not self._wants_batch(number):  # fast path: nobody reads this step's batch
            self.seconds += time.perf_counter() - started
            return
        if (value is not None and math.isfinite(value) and self._lights
                and self._ctx.is_light(number)):
            self._losses.append((number, value))  # judged at the next full step's record
        else:
            self._judge_losses()
            rec = Record(step=number, loss=value, batch=batch)
            for call in self._calls(number)["on_record"]:
                call(rec)
        self.seconds += time.perf_counter() - started
        self._raise_if_stopped()

    def _judge_losses(self) -> None:
        """Run the record checks on the finite losses held back from light steps, in order
        (alerts name their own steps)."""
        held, self._losses = self._losses, []
        for step, loss in held:
            rec = Record(step=step, loss=loss, batch=None)
            for call in self._far["on_record"]:
                call(rec)

    def _calls(self, number: int) -> dict[str, list[Any]]:
        return self._near if self._ctx.is_near_check(number) else self._far

    def _wants_batch(self, number: int) -> bool:
        every = self.config.recompute_every
        return self._ctx.is_check_step(number) or bool(every and number % every == 0)

    @contextlib.contextmanager
    def evaluating(self) -> Iterator[None]:
        """Mark model calls inside as evaluation, whatever the grad mode."""
        self._ctx.evaluating += 1
        try:
            yield
        finally:
            self._ctx.evaluating -= 1

    def register_eval_items(self, items: Any = None, *, hashes: Any = None) -> int:
        """Declare held-out items; a training row equal to one raises ``data.eval_leak``.

        items: a (N, ...) tensor (rows padded with ``pad_id``) or a sequence of
        tensors / int sequences, laid out as rows of the model's input would be;
        hashes: ints from ``labcoat.torch.item_hashes`` instead. Returns the count.
        """
        if self._data is None:
            raise GuardError("the data checks are disabled; enable them to register eval items")
        return self._data.register_eval_items(items, hashes)

    def enabled(self, rule: str) -> bool:
        """Whether `rule` is on (not disabled by name, family or prefix)."""
        cached = self._enabled_cache.get(rule)
        if cached is None:
            family = _family_of(rule)
            cached = not ({rule, family, rule.split(".")[0]} & self._disabled)
            self._enabled_cache[rule] = cached
        return cached

    @property
    def learns(self) -> bool:
        """Whether this guard builds a profile (the invariant family is on and learn=True)."""
        return self._invariants is not None and self.config.learn

    @property
    def steps_seen(self) -> int:
        """Optimizer steps this guard has watched."""
        return self._ctx.steps_seen

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run's guard needs (``ckpt.track(guard=guard)`` saves it): the step
        count, so steps are numbered as the loop numbers them, and each parameter's largest
        gradient norm, so a fit that converged before the checkpoint is known as converged."""
        peak = None if self._updates is None else self._updates.grad_peak
        known = self._updates is not None and self._updates.history_known
        return {"version": STATE_VERSION, "step": self.step, "params": list(self.params.names),
                "grad_peak": None if peak is None else [float(x) for x in peak],
                "history_known": known}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()` (a checkpoint restored before the first step)."""
        if self._ctx.steps_seen:
            raise GuardError("guard.load_state_dict() after the guard watched a step: restore "
                             "the checkpoint before training")
        step = state.get("step") if isinstance(state, dict) else None
        if (not isinstance(state, dict) or state.get("version") != STATE_VERSION
                or not isinstance(step, int) or step < 0):
            raise GuardError(f"not a guard state of version {STATE_VERSION}: {state!r:.200}")
        self._rebase(step)
        peak = state.get("grad_peak")
        if self._updates is not None:
            same = state.get("params") == list(self.params.names)
            self._updates.grad_peak = None if peak is None or not same else np.array(
                peak, dtype=float)
            self._updates.history_known = bool(state.get("history_known")) and (
                peak is not None and same or step == 0)

    def profile(self) -> dict[str, Any]:
        """What this run looked like (JSON-ready); give it to ``watch(reference=[...])``."""
        if self._invariants is None:
            raise GuardError("the invariant family is disabled; nothing was learned")
        return self._invariants.build_profile()

    def close(self) -> None:
        """Remove the hooks and log the learned profile (``guard.profile``). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._judge_losses()  # the last light steps'
        for handle in self._handles:
            handle.remove()
        for check in self._checks:
            check.close()
        data: dict[str, Any] = {"alerts": len(self.alerts), "repeats": dict(self._repeats),
                                "overhead_s": round(self.seconds, 4)}
        if self._invariants is not None and self.config.learn and self._ctx.steps_seen:
            data["profile"] = self._invariants.build_profile()
        self._event(Events.GUARD_PROFILE, f"guard closed after step {self.step}: "
                    f"{len(self.alerts)} alert(s)", level="info", step=self.step, **data)

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- hooks -----------------------------------------------------------------------------------

    def _forward_pre(self, module: nn.Module, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> None:
        if self._ctx.internal:
            return None
        started = time.perf_counter()
        training = self._ctx.training_now()
        if training and self._light_next:  # a light step: counted (for record()), not judged
            self._forwards.append(_LIGHT_FORWARD)
            self.seconds += time.perf_counter() - started
            return None
        inputs = _first_tensor(args, kwargs)
        if training:
            fwd = Forward(step=self.step + 1, training=True, inputs=inputs, args=args,
                          kwargs=kwargs, index=len(self._forwards))
            self._forwards.append(fwd)
        else:
            fwd = Forward(step=self.step, training=False, inputs=inputs, args=(), kwargs={})
        for call in self._calls(fwd.step)["on_forward"]:
            call(fwd)
        self.seconds += time.perf_counter() - started
        self._raise_if_stopped()
        return None

    def _on_grad(self, i: int, grad: torch.Tensor) -> None:
        """Gradient hook of sentinel i: runs before the new gradient is accumulated."""
        if self._ctx.internal or self._light_next:  # a light step does not judge resets
            return None
        self._sentinel_calls[i] += 1
        if self._sentinel_calls[i] == 1:  # first backward since the last optimizer step
            current = self._sentinels[i].grad
            ref = self._grad_refs[i]
            kept = (current is not None and ref is not None and ref[0]() is current
                    and current._version == ref[1])
            self._sentinel_reset[i] = not kept
        return None

    def _optimizer_loaded(self, optimizer: torch.optim.Optimizer) -> None:
        """A resume after watch(): the optimizer's step counter, if it keeps one, tells how
        many steps were taken, so the guard numbers steps as the loop does (check steps, alert
        steps and the resume rules then match an uninterrupted run's)."""
        if self._ctx.steps_seen or self.config.start_step:
            return
        if self._updates is not None:
            self._updates.history_known = False  # unless the guard's own state follows
        counters = [_step_counter(optimizer, p) for p in self.params.tensors]
        taken = max((c for c in counters if c is not None), default=None)
        if taken is None or taken < 1:
            self._loaded_early = True
            return
        self._rebase(int(taken))

    def _rebase(self, start: int) -> None:
        """Before the first step: count steps from `start`, as if watched with start_step."""
        self.config = dataclasses.replace(self.config, start_step=start)
        self._ctx.config = self.config
        self.step = self._ctx.completed = start
        self._ctx.first_step = start + 1
        self._loaded_early = False

    def _warn_unnumbered(self) -> None:
        """First step after a restore whose step the guard could not learn: say so once."""
        self._loaded_early = False
        message = ("labcoat guard: the optimizer was restored after watch() and keeps "
                   "no step counter, so the guard numbers this run's steps from 1 (its alerts and "
                   "check steps are off by the resumed step); track the guard with the "
                   "checkpoint, ckpt.track(..., guard=guard), or call watch(..., "
                   "start_step=start) after start = ckpt.restore()")
        _log.warning("%s", message)  # stderr unless the program configured logging

    def _pre_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self._ctx.internal or self._closed:
            return None
        if self._loaded_early:
            self._warn_unnumbered()
        started = time.perf_counter()
        number = self.step + 1
        if self._light_next:  # = is_light(number), decided when the last step ended
            self._forwards = []
            self._current = _LIGHT
        elif self._ctx.is_near_check(number):  # parameter norms: keep autograd out
            with torch.no_grad():
                self._measure_pre(optimizer, number, self._near)
        else:  # gradients only (they require no grad): skip the context's cost
            self._measure_pre(optimizer, number, self._far)
        self.seconds += time.perf_counter() - started
        self._raise_if_stopped()
        return None

    def _measure_pre(self, optimizer: torch.optim.Optimizer, number: int,
                     calls: dict[str, list[Any]]) -> None:
        params = self.params
        before = len(params)
        check = self._ctx.is_check_step(number)
        params.sync_optimizer()
        if check and self._registered:  # parameters the model gained after watch()
            self._registered = False
            params.sync_model()
        if len(params) != before:
            self._ctx.table_changed = True
        tensors = params.tensors
        grads = [p.grad for p in tensors]
        step = Step(number, check, self._forwards, max(self._sentinel_calls, default=0), grads)
        if self._sentinels:
            step.reset = [(self._sentinel_names[i], r) for i, r in enumerate(self._sentinel_reset)
                          if r is not None]
            self._sentinel_calls = [0] * len(self._sentinels)
            self._sentinel_reset = [None] * len(self._sentinels)
        self._forwards = []
        if check:
            step.versions_pre = [p._version for p in tensors]
        step.requires_grad = [p.requires_grad for p in tensors]
        step.lrs = [_number(g.get("lr", math.nan)) for g in optimizer.param_groups]
        present = [g for g in grads if g is not None]
        step.grad_count = len(present)
        xfer = self._ctx.pending
        if xfer:
            self._ctx.pending = Transfer()
        if check:  # gradients and weights in one fused norm (one kernel path, one copy)
            xfer.add_norms("guard.norms", present + tensors)
        elif not self._ctx.measures_grad_norm(number):
            step.grad_norm = None
        elif present:
            total = _total_norm(present)
            if isinstance(total, float):
                step.grad_norm = total  # no NumPy on the per-step path (see _robust)
            else:
                xfer.add("guard.grad_total", total)
        for call in calls["queue_pre"]:
            call(step, xfer)
        values = step.values = xfer.resolve() if xfer else {}
        if check:
            mask = np.fromiter((g is not None for g in grads), bool, len(grads))
            grad_norms = np.zeros(len(grads))
            both = values.pop("guard.norms")
            grad_norms[mask] = both[:len(present)]
            step.present, step.grad_norms = mask, grad_norms
            step.has_grad = mask & (grad_norms != 0)
            step.norms_pre = both[len(present):]
            judged = grad_norms if params.all_judged else grad_norms[params.judged]
            step.grad_norm = math.sqrt(float(np.dot(judged, judged)))
        elif "guard.grad_total" in values:
            step.grad_norm = float(values.pop("guard.grad_total")[0])
        self._current = step
        for call in calls["on_pre_step"]:
            call(step)
        self._ctx.table_changed = False

    def is_check_step(self, number: int) -> bool:
        """Whether step `number` measures per-parameter norms and runs the periodic checks."""
        return self._ctx.is_check_step(number)

    def _post_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        step = self._current
        if self._ctx.internal or self._closed or step is None:
            return None
        started = time.perf_counter()
        self._current = None
        if step is _LIGHT:
            self._advance(self.step + 1)
        elif self._ctx.is_near_check(step.number):
            with torch.no_grad():
                self._measure_post(step, self._near)
        else:
            self._measure_post(step, self._far)
        self.seconds += time.perf_counter() - started
        self._raise_if_stopped()
        return None

    def _measure_post(self, step: Step, calls: dict[str, list[Any]]) -> None:
        tensors = self.params.tensors
        number = step.number
        xfer = self._spare
        if step.check or self.is_check_step(number + 1):
            step.versions_post = post = [p._version for p in tensors]
            xfer.add_norms("guard.param", tensors)
        for call in calls["queue_post"]:
            call(step, xfer)
        if xfer:
            step.values.update(xfer.resolve())
            step.norms_post = step.values.pop("guard.param", None)
        if step.check:
            step.trained = np.fromiter(map(operator.ne, step.versions_pre, post), bool,
                                       len(post))
        self._advance(number)
        for call in calls["on_post_step"]:
            call(step)
        for fwd in step.forwards:  # keep no batch alive past its step
            fwd.args, fwd.kwargs, fwd.inputs = (), {}, None
        step.grads = []

    def _advance(self, number: int) -> None:
        """Optimizer step `number` has run: count it, remember the sentinels' gradients."""
        self.step = number
        self._ctx.completed = number
        self._ctx.steps_seen += 1
        self._light_next = light = self._lights and self._ctx.is_light(number + 1)
        if light:  # the sentinels stand by at a light step: nothing to compare with
            return
        for i, p in enumerate(self._sentinels):
            g = p.grad
            self._grad_refs[i] = None if g is None else (weakref.ref(g), g._version)

    # --- alerts ----------------------------------------------------------------------------------

    def _emit(self, rule: str, severity: str, message: str, *, step: int,
              evidence: dict[str, Any], subject: str | None) -> None:
        if severity != _DECLARED.get(rule, severity) or severity not in SEVERITIES:
            raise ValueError(f"internal: {rule} raised as {severity!r}, declared "
                             f"{_DECLARED.get(rule)!r}")
        if not self.enabled(rule):
            return
        key = (rule, subject)
        with self._lock:
            if key in self._seen:
                self._repeats[rule] += 1
                return
            self._seen.add(key)
            alert = Alert(step=step, rule=rule, severity=severity,  # type: ignore[arg-type]
                          message=message, evidence=_plain(evidence))
            self.alerts.append(alert)
            stop = (self.config.stop_on is not None and self._stop is None
                    and at_least(severity, self.config.stop_on))
            if stop:
                self._stop = alert
        self._event(Events.GUARD_ALERT, message, level=severity, step=step, rule=rule,
                    severity=severity, evidence=alert.evidence)

    def _raise_if_stopped(self) -> None:
        alert = self._stop
        if alert is None or self._stopped:
            return
        self._stopped = True
        self._event(Events.GUARD_STOPPED, f"stopping: {alert.rule} at step {alert.step}",
                    level="critical", step=alert.step, rule=alert.rule, alert_step=alert.step)
        raise GuardStop(alert)

    def _event(self, event: str, message: str, *, level: str, step: int, **data: Any) -> None:
        if self.run is not None and not self.run.finished:
            self.run.event(event, message, level=level, step=step, **_plain(data))
        elif event == Events.GUARD_ALERT:
            _log.log(_LOG_LEVELS[level], "step %d %s: %s", step, data.get("rule"), message)

    def _pick_sentinels(self) -> list[torch.Tensor]:
        """The model's first trainable optimizer parameter (zero_grad resets all or none)."""
        p = self.params
        candidates = [t for i, t in enumerate(p.tensors)
                      if p.judged[i] and p.in_optimizer[i] and t.requires_grad]
        if not candidates:
            return []
        picks = list(range(min(SENTINELS, len(candidates))))
        return [candidates[i] for i in picks]


def _marker(guard: weakref.ref[Guard]) -> Callable[..., None]:
    """A registration hook that flags `guard` (held weakly: a guard never closed must not be
    kept alive by torch's global hook table)."""
    def mark(*args: Any) -> None:
        alive = guard()
        if alive is not None:
            alive._registered = True
    return mark


def _check_disable(names: tuple[str, ...]) -> set[str]:
    """`disable=` names: rules and families. A rule prefix that is not a family (``dist``,
    ``mode``, ``lr``...) still works but is deprecated: it read as a near-duplicate of a
    family (``dist``/``distributed``) or hid which rules it turns off."""
    rules = guard_rules()
    families: dict[str, set[str]] = {}
    for cls in CHECKS:
        families.setdefault(cls.family, set()).update(cls.rules)
    prefixes: dict[str, set[str]] = {}
    for rule in rules:
        prefixes.setdefault(rule.split(".")[0], set()).add(rule)
    unknown = [n for n in names if n not in rules and n not in families and n not in prefixes]
    if unknown:
        raise GuardError(f"disable: unknown rule or family {', '.join(map(repr, unknown))}; "
                         f"families: {', '.join(sorted(families))}; rules: "
                         f"{', '.join(sorted(rules))}")
    for name in names:
        if name in rules or name in families:
            continue
        same = [f for f, members in families.items() if members == prefixes[name]]
        instead = (f"the family {same[0]!r}" if same else
                   f"the rules {', '.join(map(repr, sorted(prefixes[name])))}")
        warnings.warn(f"disable={name!r} is a rule prefix, not a family: deprecated, use "
                      f"{instead}", FutureWarning, stacklevel=4)
    return set(names)


def _family_of(rule: str) -> str:
    for cls in CHECKS:
        if rule in cls.rules:
            return cls.family
    return rule.split(".")[0]


def _first_tensor(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    if args and not kwargs and isinstance(args[0], torch.Tensor):
        return args[0]
    for value in (kwargs.get("input_ids"), *args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value
    return None


def _total_norm(tensors: list[torch.Tensor]) -> torch.Tensor | float:
    """L2 norm of all `tensors` together: a float for CPU tensors, else a device scalar.

    One fused ``torch._foreach_norm`` (one kernel per device/dtype); on the CPU its
    per-tensor norms are read one by one and combined in Python (``math.hypot``: no
    overflow; no further torch op on the cold path, where ``torch.stack`` and
    ``tolist`` cost ~20 us more than the reads).
    """
    try:
        norms = torch._foreach_norm(tensors)
        if norms[0].device.type == "cpu":
            return math.hypot(*[n.item() for n in norms])
        return torch.linalg.vector_norm(torch.stack(norms))
    except (RuntimeError, TypeError):  # sparse, or mixed devices or dtypes
        return torch.linalg.vector_norm(torch.stack([
            torch.linalg.vector_norm((t.coalesce().values() if t.is_sparse else t).float()).cpu()
            for t in tensors]))


def _loss_value(loss: Any) -> float:
    """guard.record's loss as a float, or one GuardError saying what it accepts."""
    try:
        if isinstance(loss, torch.Tensor):
            return float(loss.item())
        if (isinstance(loss, str | bytes | bool | np.bool_)
                or not isinstance(loss, numbers.Real | np.generic)):
            raise TypeError
        return float(loss)
    except (TypeError, ValueError, RuntimeError):
        shape = f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else ""
        raise GuardError(f"guard.record(loss=...) takes a number or a one-element tensor, got "
                         f"{type(loss).__name__}{shape} {_short(loss)}") from None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: Any) -> float:
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)


def _plain(value: Any) -> Any:
    """JSON-ready copy: numpy scalars and arrays, tuples and tensors become plain values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray | torch.Tensor):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def _bump_versions(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    """A fused optimizer's step, as a plain one would count it: every parameter with a
    gradient was updated in place."""
    increment_version([p for group in optimizer.param_groups for p in group["params"]
                       if p.grad is not None])
