"""Exact resume, for real: tinylm killed mid-run (SIGKILL, or mid-checkpoint-write) and resumed.

Each trial runs ``python -m labcoat.workloads.tinylm`` as a subprocess under a
fake runner environment (journal per attempt, a checkpoint directory shared
by the attempts). The resumed trial must end with bit-identical parameters
and must have logged the same value for every metric at every step as an
uninterrupted trial (later attempts win where steps were logged twice).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from labcoat.sdk import read_journal

STEPS = 60
TINY = ["--width", "32", "--depth", "2", "--heads", "4", "--steps", str(STEPS),
        "--batch-size", "32", "--eval-every", "30", "--eval-items", "5", "--dropout", "0.1",
        "--threads", "1", "--seed", "4",
        "--eval-budget", "0"]  # a budget sizes the eval subset from measured (varying) speed


class Trial:
    """One tinylm trial: attempts share a checkpoint directory; each has its own journal."""

    def __init__(self, root: Path, *, checkpoints: bool = True) -> None:
        self.root = root
        self.checkpoints = checkpoints
        self.journals: list[Path] = []
        self.final = root / "final.pt"

    def start(self, *extra_env: tuple[str, str]) -> subprocess.Popen[str]:
        attempt = len(self.journals) + 1
        journal = self.root / f"a{attempt}" / "journal.jsonl"
        self.journals.append(journal)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("LABCOAT_") or k == "LABCOAT_HOME"}
        env.update({"LABCOAT_JOURNAL": str(journal), "LABCOAT_EXPERIMENT": "resume",
                    "LABCOAT_TRIAL": "t", "LABCOAT_ATTEMPT": str(attempt),
                    "LABCOAT_HOME": str(self.root / "home"), **dict(extra_env)})
        args = [*TINY, "--save-final", str(self.final)]
        if self.checkpoints:
            env["LABCOAT_CHECKPOINT_DIR"] = str(self.root / "ckpt")
            args += ["--checkpoint-every", "10"]
        return subprocess.Popen([sys.executable, "-m", "labcoat.workloads.tinylm", *args],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def run(self, *extra_env: tuple[str, str]) -> subprocess.CompletedProcess[str]:
        proc = self.start(*extra_env)
        out, err = proc.communicate(timeout=120)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def records(self, attempt: int) -> list[dict[str, Any]]:
        return [r for _, r in read_journal(self.journals[attempt - 1]).records]

    def events(self, attempt: int, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records(attempt) if r["kind"] == "event" and r["event"] == name]

    def metrics(self) -> dict[tuple[Any, ...], Any]:
        """(step, metric) -> value and (step, task) -> per-item scores, later attempts winning."""
        out: dict[tuple[Any, ...], Any] = {}
        for attempt in range(1, len(self.journals) + 1):
            for r in self.records(attempt):
                if r["kind"] == "log":
                    out.update({(r["step"], name): v for name, v in r["metrics"].items()})
                elif r["kind"] == "items":
                    out[(r["step"], r["task"])] = (r["items"], r["scores"])
        return out

    def parameters(self) -> dict[str, torch.Tensor]:
        return torch.load(self.final, weights_only=True)


class Reference:
    """The same trial without checkpoints, started once and awaited when first compared."""

    def __init__(self, root: Path) -> None:
        self.trial = Trial(root, checkpoints=False)
        self.proc = self.trial.start()

    def finished(self) -> Trial:
        if self.proc.returncode is None:
            _, err = self.proc.communicate(timeout=120)
            assert self.proc.returncode == 0, err
        return self.trial


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    reference = Reference(tmp_path_factory.mktemp("uninterrupted"))
    yield reference
    reference.proc.communicate(timeout=120)


def logged_steps(journal: Path) -> int:
    return sum(1 for _, r in read_journal(journal).records
               if r["kind"] == "log" and "loss" in r["metrics"])


def assert_same_run(resumed: Trial, reference: Trial) -> None:
    expected, got = reference.parameters(), resumed.parameters()
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), f"parameter {name} differs"
    want, have = reference.metrics(), resumed.metrics()
    assert {s for s, _ in have} == set(range(1, STEPS + 1))
    assert have == want


def test_killed_at_a_random_moment_resumes_bit_identical(tmp_path: Path,
                                                         uninterrupted: Reference) -> None:
    kill_after = random.Random().randint(12, 50)  # logged steps before the kill
    trial = Trial(tmp_path)
    proc = trial.start()
    deadline = time.monotonic() + 60
    while logged_steps(trial.journals[0]) < kill_after:
        assert proc.poll() is None, f"tinylm ended before the kill:\n{proc.stderr.read()}"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL, f"tinylm finished before the kill ({kill_after})"
    killed_at = logged_steps(trial.journals[0])
    assert killed_at < STEPS

    second = trial.run()
    assert second.returncode == 0, second.stderr
    # the newest complete checkpoint (step 10's write may not have finished by step 12)
    restored = trial.events(2, "checkpoint.restored")
    start = restored[0]["step"] if restored else 0
    assert start % 10 == 0 and start <= killed_at, (restored, killed_at)
    first_logged = min(r["step"] for r in trial.records(2) if r["kind"] == "log")
    assert first_logged == start + 1
    assert_same_run(trial, uninterrupted.finished())


def test_killed_while_writing_a_checkpoint_falls_back_and_matches(tmp_path: Path,
                                                                  uninterrupted: Reference) -> None:
    trial = Trial(tmp_path)
    first = trial.run(("LABCOAT_CHECKPOINT_FAULT", "exit-mid-write@40"))
    assert first.returncode == 137, first.stderr  # died in the middle of writing step 40
    partial = trial.root / "ckpt" / "step-00000040"
    assert partial.is_dir() and not (partial / "manifest.json").exists()
    assert [p.name.startswith(".state.pt.tmp-") for p in partial.iterdir()] == [True]

    second = trial.run()
    assert second.returncode == 0, second.stderr
    (corrupt,) = trial.events(2, "checkpoint.corrupt")
    assert corrupt["step"] == 40 and corrupt["data"]["reason"].startswith("no manifest")
    (restored,) = trial.events(2, "checkpoint.restored")
    assert restored["step"] == 30
    assert "step-00000040: no manifest" in restored["data"]["fallback_reason"]
    saved = [e["step"] for e in trial.events(2, "checkpoint.saved")]
    assert saved == [40, 50, 60]
    assert sorted(p.name for p in (trial.root / "ckpt").iterdir()) == [
        "step-00000050", "step-00000060"]  # keep_last 2; the partial one is gone
    assert_same_run(trial, uninterrupted.finished())
