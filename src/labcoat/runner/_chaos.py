"""Chaos: inject real faults into a run to show that nothing is lost (`labcoat run --chaos`).

SPEC is a comma-separated list of faults:

    kill@20s            every 20 s, SIGKILL a random running trial (at most 2 kills per
                        trial, so every trial can finish)
    corrupt@30s         every 30 s, flip bytes in the newest checkpoint of a random
                        running trial, then kill it: its restart must fall back to the
                        previous verified checkpoint
    kill-in-save@N      the trial dies partway through writing its N-th checkpoint
    disk-full@N         the N-th checkpoint write fails with "No space left on device"
    torn-journal@N      the trial dies halfway through writing its N-th journal record

The last three are injected through environment variables the trial's labcoat
code honours (LABCOAT_CHECKPOINT_FAULT, LABCOAT_JOURNAL_FAULT); each takes one
attempt of every trial, in the order given. Every fault is recorded as a
`chaos.*` event. Chaos raises each trial's retry budget by the number of faults
that can hit it.
"""

from __future__ import annotations

import os
import random
import re
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from labcoat import environment as env
from labcoat.errors import LabcoatError

KILLS_PER_TRIAL = 2
PERIODIC = {"kill", "corrupt"}
INJECTED = {  # fault name -> (environment variable, value template)
    "kill-in-save": (env.CHECKPOINT_FAULT, "exit-mid-write@save={n}"),
    "disk-full": (env.CHECKPOINT_FAULT, "disk-full@save={n}"),
    "torn-journal": (env.JOURNAL_FAULT, "torn@{n}"),
}
TOKEN = re.compile(r"(?P<name>[a-z-]+)@(?P<value>\d+(?:\.\d+)?)(?P<unit>s?)")


@dataclass
class ChaosSpec:
    kill_every: float | None = None
    corrupt_every: float | None = None
    injected: list[tuple[str, str, str]] = field(default_factory=list)  # (fault, var, value)

    def faults_per_trial(self) -> int:
        periodic = KILLS_PER_TRIAL * (bool(self.kill_every) + bool(self.corrupt_every))
        return periodic + len(self.injected)


def parse_chaos(text: str) -> ChaosSpec:
    """Parse SPEC; a bad token is one clear error naming it and the valid forms."""
    spec = ChaosSpec()
    for token in filter(None, (t.strip() for t in text.split(","))):
        match = TOKEN.fullmatch(token)
        name = match["name"] if match else ""
        if match is None or (name not in PERIODIC and name not in INJECTED):
            raise LabcoatError(
                f"--chaos: {token!r} is not a fault; use kill@20s, corrupt@30s, "
                "kill-in-save@N, disk-full@N or torn-journal@N (comma-separated)"
            )
        value = float(match["value"])
        if value <= 0:
            raise LabcoatError(f"--chaos: {token!r} needs a positive number")
        if name == "kill":
            spec.kill_every = value
        elif name == "corrupt":
            spec.corrupt_every = value
        else:
            var, template = INJECTED[name]
            spec.injected.append((name, var, template.format(n=int(value))))
    return spec


class Chaos:
    """Decides, each poll of the runner, which fault to inject next."""

    def __init__(self, spec: ChaosSpec, seed: int, start: float) -> None:
        self.spec = spec
        self.rng = random.Random(seed)
        self.next_kill = start + (spec.kill_every or 0)
        self.next_corrupt = start + (spec.corrupt_every or 0)
        self.hits: Counter[str] = Counter()  # periodic faults per trial key

    def environment(self, attempt_in_run: int) -> tuple[dict[str, str], str | None]:
        """Environment faults for a trial's k-th attempt in this run (1-based)."""
        if attempt_in_run > len(self.spec.injected):
            return {}, None
        name, var, value = self.spec.injected[attempt_in_run - 1]
        return {var: value}, name

    def due(self, now: float, running: list[str]) -> tuple[str, str] | None:
        """(fault, trial key) to inject now, if any: a kill or a corruption."""
        for name, every, attr in (("kill", self.spec.kill_every, "next_kill"),
                                  ("corrupt", self.spec.corrupt_every, "next_corrupt")):
            if every and now >= getattr(self, attr):
                setattr(self, attr, now + every)
                candidates = [k for k in running if self.hits[k] < KILLS_PER_TRIAL]
                if candidates:
                    key = self.rng.choice(sorted(candidates))
                    self.hits[key] += 1
                    return name, key
        return None


def corrupt_newest_checkpoint(directory: Path, rng: random.Random) -> Path | None:
    """Flip bytes in the middle of the newest checkpoint's state file (size unchanged).

    Only while an older checkpoint exists to fall back to: with every checkpoint corrupt,
    restore() refuses to start over (it would throw away the run's training), so the
    restarted trial would fail instead of showing the fallback this fault is for."""
    states = sorted(directory.glob("step-*/state.pt"))
    if len(states) < 2:
        return None
    path = states[-1]
    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "r+b") as f:
        offset = rng.randrange(size)
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())
    return path


def kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
