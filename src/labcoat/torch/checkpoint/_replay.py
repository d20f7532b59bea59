"""Replay mode of the Checkpointer: re-execute a segment of a run with probes attached.

`labcoat replay` starts the trial's recorded command with ``LABCOAT_REPLAY``
naming a JSON file (format version 1)::

    {"version": 1, "checkpoint": "/.../step-00000040" | null, "restore_step": 40,
     "start": 41, "end": 60, "probes": ["grad_norms", "mypkg.probes:fn"],
     "output": "/.../probes.jsonl"}

The training script needs nothing beyond the Checkpointer it already uses:

- ``ckpt.restore()`` loads exactly ``checkpoint`` (verified; never the trial's
  own checkpoint directory) and attaches the probes to the tracked modules and
  optimizers; ``null`` means the segment starts at step 1 (nothing to restore);
- ``ckpt.should_save(step)`` (called once per step, after the step's metrics
  are logged) writes the probes' values of `step` when start <= step <= end,
  never saves, and after `end` raises `ReplayFinished` — a ``SystemExit(0)``,
  so the process ends cleanly unless the caller catches it;
- ``ckpt.save`` does nothing.

Output lines: ``{"step": 41, "probe": "grad_norms", "values": {name: number}}``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from labcoat import environment as env
from labcoat.journal import Events
from labcoat.torch.checkpoint import _layout
from labcoat.torch.checkpoint._errors import CheckpointError
from labcoat.torch.checkpoint._probes import Probe, ProbeContext, make_probe

VERSION = 1


class ReplayFinished(SystemExit):
    """Raised by ``should_save`` after the last replayed step: the process exits with 0."""

    def __init__(self, step: int) -> None:
        super().__init__(0)
        self.step = step


@dataclass(frozen=True, kw_only=True)
class ReplaySpec:
    checkpoint: str | None
    restore_step: int
    start: int
    end: int
    probes: tuple[str, ...]
    output: str

    @classmethod
    def from_env(cls) -> ReplaySpec | None:
        raw = os.environ.get(env.REPLAY)
        if not raw:
            return None
        try:
            data = json.loads(Path(raw).read_text(encoding="utf-8"))
            if data.get("version") != VERSION:
                raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
            spec = cls(checkpoint=data["checkpoint"], restore_step=int(data["restore_step"]),
                       start=int(data["start"]), end=int(data["end"]),
                       probes=tuple(data["probes"]), output=str(data["output"]))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CheckpointError(f"{env.REPLAY}={raw}: not a replay description ({err}); "
                                  "it is written by `labcoat replay`") from None
        if not spec.restore_step < spec.start <= spec.end:
            raise CheckpointError(f"{env.REPLAY}={raw}: needs restore_step < start <= end")
        return spec


class Replay:
    """Probes attached to the tracked objects, written after each step in range."""

    def __init__(self, spec: ReplaySpec, run: Any = None) -> None:
        self.spec = spec
        self.run = run
        self.step = spec.restore_step + 1  # the step being computed
        self.probes: list[Probe] = [make_probe(p) for p in spec.probes]
        Path(spec.output).parent.mkdir(parents=True, exist_ok=True)
        self._out = open(spec.output, "a", encoding="utf-8")  # noqa: SIM115 - closed at the end

    def restore_state(self) -> tuple[dict[str, Any], Path] | None:
        """The verified state of the segment's checkpoint (None: start from step 1)."""
        if self.spec.checkpoint is None:
            return None
        path = Path(self.spec.checkpoint)
        try:
            _, state = _layout.read_verified(path)
        except _layout.Corrupt as bad:
            raise CheckpointError(f"replay: checkpoint {path} does not verify ({bad.reason}); "
                                  "replay from an earlier step") from None
        if state["step"] != self.spec.restore_step:
            raise CheckpointError(f"replay: checkpoint {path} holds step {state['step']}, "
                                  f"expected {self.spec.restore_step}")
        return state, path

    def attach(self, tracked: dict[str, Any]) -> None:
        modules = {n: o for n, o in tracked.items() if isinstance(o, nn.Module)}
        optimizers = {n: o for n, o in tracked.items() if isinstance(o, torch.optim.Optimizer)}
        context = ProbeContext(step=self.step, modules=modules, optimizers=optimizers,
                               tracked=tracked, recording=self.recording)
        self.context = context
        for probe in self.probes:
            probe.attach(context)

    def recording(self) -> bool:
        return self.spec.start <= self.step <= self.spec.end

    def step_done(self, step: int) -> None:
        """After `step`: write its probe values (if in range); end the process after `end`."""
        self.step = step
        if self.recording():
            self.context.step = step
            for probe in self.probes:
                values = probe.collect()
                line = {"step": step, "probe": probe.name, "values": values}
                self._out.write(json.dumps(line, allow_nan=True) + "\n")
            self._out.flush()
        self.step = step + 1
        if step >= self.spec.end:
            self._out.close()
            if self.run is not None:
                self.run.event(Events.REPLAY_DONE, f"replayed steps {self.spec.start}-{step}",
                               step=step)
            sys.stdout.flush()
            raise ReplayFinished(step)
