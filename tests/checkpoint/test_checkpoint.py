"""labcoat.torch.Checkpointer: round trips, verification, fallback, retention, async, failures.

Real tensors, real files and a real journal; the only stand-ins are a gate
that holds the background writer (to observe a save in flight) and a write
that fails like a full disk, which cannot be produced here otherwise.
"""

from __future__ import annotations

import errno
import json
import math
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import labcoat
from labcoat.sdk import Run, read_journal
from labcoat.torch import (
    Checkpointer,
    CheckpointError,
    load_checkpoint,
    young_daly_interval,
)
from labcoat.torch.checkpoint import _files, _layout
from labcoat.torch.checkpoint._interval import IntervalPolicy


@pytest.fixture
def run(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
        ) -> Iterator[Run]:
    """A real labcoat run with its own journal (as under the runner)."""
    journal = tmp_path_factory.mktemp("attempt") / "journal.jsonl"
    monkeypatch.setenv("LABCOAT_JOURNAL", str(journal))
    monkeypatch.setenv("LABCOAT_EXPERIMENT", "e")
    monkeypatch.setenv("LABCOAT_TRIAL", "t")
    monkeypatch.setenv("LABCOAT_ATTEMPT", "1")
    for var in ("LABCOAT_CHECKPOINT_DIR", "LABCOAT_MTBF_SECONDS", "LABCOAT_CHECKPOINT_FAULT"):
        monkeypatch.delenv(var, raising=False)
    r = labcoat.init()
    yield r
    r.finish()


def events(run: Run, name: str | None = None) -> list[dict[str, Any]]:
    records = [r for _, r in read_journal(run.journal).records if r["kind"] == "event"]
    return [r for r in records if name is None or r["event"] == name]


class Trainer:
    """A small model, optimizer, scheduler, every kind of generator and user state."""

    def __init__(self, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Dropout(0.2),
                                         torch.nn.Linear(8, 3))
        for p in self.model.parameters():
            torch.nn.init.normal_(p, generator=g)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=0.01)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=3, gamma=0.5)
        self.gen = torch.Generator().manual_seed(seed + 1)
        self.py_rng = random.Random(seed + 2)
        self.np_gen = np.random.default_rng(seed + 3)
        self.np_legacy = np.random.RandomState(seed + 4)
        self.state: dict[str, Any] = {"position": 0, "name": "run", "ratio": 0.5, "none": None,
                                      "history": [1.0, 2.5], "nested": {"a": [1, "x"]},
                                      "ema": torch.zeros(3), 7: "int keys too"}

    def track(self, ckpt: Checkpointer) -> None:
        ckpt.track(model=self.model, optimizer=self.opt, scheduler=self.sched, gen=self.gen,
                   py_rng=self.py_rng, np_gen=self.np_gen, np_legacy=self.np_legacy,
                   state=self.state)

    def step(self) -> None:
        x = torch.randn(4, 6, generator=self.gen) + random.random() + np.random.rand()
        x = x + self.py_rng.random() + self.np_gen.random() + self.np_legacy.rand()
        loss = self.model(x).pow(2).mean()  # dropout draws from torch's global RNG
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.sched.step()
        self.state["position"] += 1
        self.state["history"].append(loss.item())
        self.state["ema"] = 0.9 * self.state["ema"] + 0.1 * self.model[2].bias.detach()

    def fingerprint(self) -> list[Any]:
        """Everything observable about the state: parameters, moments, and the next draws."""
        return [
            [p.clone() for p in self.model.parameters()],
            [v.clone() for s in self.opt.state.values() for v in s.values()],
            self.sched.state_dict(), self.opt.param_groups[0]["lr"], dict(self.state),
            torch.rand(3, generator=self.gen), self.py_rng.random(), self.np_gen.random(),
            self.np_legacy.rand(), random.random(), np.random.rand(), torch.rand(2),
        ]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def seed_globals(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# --- round trip ---------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [True, False])
def test_round_trip_continues_exactly(tmp_path: Path, asynchronous: bool) -> None:
    seed_globals(0)
    a = Trainer(seed=1)
    with Checkpointer(tmp_path, every=3, asynchronous=asynchronous) as ckpt:
        a.track(ckpt)
        assert ckpt.restore() == 0
        for step in range(1, 7):
            a.step()
            if ckpt.should_save(step):
                ckpt.save(step)
    for _ in range(4):  # continue past the checkpoint of step 6
        a.step()
    expected = a.fingerprint()

    seed_globals(99)  # a fresh process: other global states, other initial weights
    b = Trainer(seed=50)
    state_before = b.state
    with Checkpointer(tmp_path) as ckpt:
        b.track(ckpt)
        assert ckpt.restore() == 6
    assert b.state is state_before  # user state is restored in place
    for _ in range(4):
        b.step()
    assert same(b.fingerprint(), expected)


def test_state_file_loads_with_weights_only_and_holds_plain_data(tmp_path: Path) -> None:
    t = Trainer(seed=0)
    with Checkpointer(tmp_path, every=1) as ckpt:
        t.track(ckpt)
        ckpt.restore()
        t.step()
        ckpt.save(1)
    raw = torch.load(tmp_path / "step-00000001" / "state.pt", weights_only=True)
    assert raw["format"] == "labcoat.checkpoint" and raw["version"] == 1 and raw["step"] == 1
    assert set(raw["rng"]) == {"python", "numpy", "torch", "cuda"}
    assert raw["tracked"]["py_rng"]["kind"] == "random.Random"
    assert raw["tracked"]["py_rng"]["state"]["internal"] == list(t.py_rng.getstate()[1])
    loaded = load_checkpoint(tmp_path)  # the public reader verifies first
    assert loaded["step"] == 1 and same(loaded["tracked"]["model"], t.model.state_dict())


def test_refuses_state_weights_only_could_not_load(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.track(state={"fine": [1, 2], "bad": {"inner": np.arange(3)}})
    ckpt.restore()
    with pytest.raises(CheckpointError, match=r"state\['bad'\]\['inner'\] is a numpy.ndarray"):
        ckpt.save(1)
    with pytest.raises(CheckpointError, match="cannot track thing=object"):
        Checkpointer(tmp_path).track(thing=object())


def test_a_pickle_that_needs_arbitrary_code_is_never_loaded(tmp_path: Path, run: Run) -> None:
    t = Trainer(seed=0)
    with Checkpointer(tmp_path, every=1) as ckpt:
        t.track(ckpt)
        ckpt.restore()
        ckpt.save(1)
        ckpt.save(2)
    # Forge step 2: a state file with an arbitrary object, and a manifest that matches it.
    path = tmp_path / "step-00000002"
    torch.save({"format": "labcoat.checkpoint", "step": 2, "evil": Evil()}, path / "state.pt")
    digest = _files.file_digest(path / "state.pt")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"]["state.pt"] = {"bytes": digest.bytes, "sha256": digest.sha256}
    (path / "manifest.json").write_text(json.dumps(manifest))
    ckpt = Checkpointer(tmp_path, run=run)
    Trainer(seed=0).track(ckpt)
    assert ckpt.restore() == 1
    (corrupt,) = events(run, "checkpoint.corrupt")
    assert "does not load with weights_only=True" in corrupt["data"]["reason"]
    assert not Evil.unpickled


class Evil:
    unpickled = False

    def __setstate__(self, state: Any) -> None:
        Evil.unpickled = True


def test_tied_weights_stay_shared_in_the_file(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(500, 64),
                                torch.nn.Linear(64, 500, bias=False))
    model[1].weight = model[0].weight
    with Checkpointer(tmp_path) as ckpt:
        ckpt.track(model=model)
        ckpt.restore()
        ckpt.save(1)
    sd = load_checkpoint(tmp_path)["tracked"]["model"]
    assert sd["0.weight"].data_ptr() == sd["1.weight"].data_ptr()
    assert (tmp_path / "step-00000001" / "state.pt").stat().st_size < 500 * 64 * 4 * 1.5


# --- verification and fallback -----------------------------------------------------------------


def saved_steps(tmp_path: Path, steps: list[int], run: Run | None = None) -> Trainer:
    t = Trainer(seed=0)
    with Checkpointer(tmp_path, keep_last=10, run=run) as ckpt:
        t.track(ckpt)
        ckpt.restore()
        for step in steps:
            t.step()
            ckpt.save(step)
    return t


def restore_fresh(tmp_path: Path, run: Run) -> int:
    ckpt = Checkpointer(tmp_path, run=run)
    Trainer(seed=5).track(ckpt)
    return ckpt.restore()


def test_a_flipped_byte_falls_back_to_the_previous_checkpoint(tmp_path: Path, run: Run) -> None:
    saved_steps(tmp_path, [1, 2])
    state = tmp_path / "step-00000002" / "state.pt"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0x01
    state.write_bytes(bytes(data))
    assert restore_fresh(tmp_path, run) == 1
    (corrupt,) = events(run, "checkpoint.corrupt")
    assert corrupt["level"] == "warning" and corrupt["step"] == 2
    assert "SHA-256" in corrupt["data"]["reason"]
    (restored,) = events(run, "checkpoint.restored")
    assert restored["step"] == 1
    assert "step-00000002: state.pt SHA-256" in restored["data"]["fallback_reason"]
    assert restored["data"]["skipped"][0]["step"] == 2


def test_a_truncated_file_falls_back_with_the_reason(tmp_path: Path, run: Run) -> None:
    saved_steps(tmp_path, [1, 2])
    state = tmp_path / "step-00000002" / "state.pt"
    state.write_bytes(state.read_bytes()[:-100])
    assert restore_fresh(tmp_path, run) == 1
    (restored,) = events(run, "checkpoint.restored")
    assert "truncated" in restored["data"]["fallback_reason"]


def test_missing_or_broken_manifest_means_incomplete(tmp_path: Path, run: Run) -> None:
    saved_steps(tmp_path, [1, 2, 3])
    (tmp_path / "step-00000003" / "manifest.json").unlink()
    (tmp_path / "step-00000002" / "manifest.json").write_text('{"format": "labcoat.chec')
    assert restore_fresh(tmp_path, run) == 1
    reasons = [e["data"]["reason"] for e in events(run, "checkpoint.corrupt")]
    assert reasons[0].startswith("no manifest") and "not valid JSON" in reasons[1]


def test_a_newer_format_is_skipped_but_never_deleted(tmp_path: Path, run: Run) -> None:
    saved_steps(tmp_path, [1, 2, 3])
    manifest = tmp_path / "step-00000003" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"version": 1', '"version": 2'))
    ckpt = Checkpointer(tmp_path, run=run, keep_last=1)
    Trainer(seed=0).track(ckpt)
    assert ckpt.restore() == 2
    assert "upgrade labcoat" in events(run, "checkpoint.corrupt")[0]["data"]["reason"]
    ckpt.save(2)
    ckpt.close()
    assert [s for s, _ in _layout.list_steps(tmp_path)] == [2, 3]


def test_crash_before_rename_leaves_only_an_ignored_temp_file(tmp_path: Path, run: Run) -> None:
    saved_steps(tmp_path, [1])
    crashed = tmp_path / "step-00000002"
    crashed.mkdir()
    _files.temp_name(crashed / "state.pt").write_bytes(b"PK\x03\x04 half a zip")
    assert restore_fresh(tmp_path, run) == 1
    assert "no manifest" in events(run, "checkpoint.restored")[0]["data"]["fallback_reason"]


def test_nothing_usable_starts_from_scratch_and_says_so(tmp_path: Path, run: Run) -> None:
    crashed = tmp_path / "step-00000005"
    crashed.mkdir(parents=True)
    _files.temp_name(crashed / "state.pt").write_bytes(b"partial")
    assert restore_fresh(tmp_path, run) == 0
    (fresh,) = events(run, "checkpoint.fresh_start")
    assert fresh["level"] == "warning" and fresh["data"]["skipped"][0]["step"] == 5


def test_a_checkpoint_that_does_not_fit_raises_instead_of_restarting(tmp_path: Path) -> None:
    saved_steps(tmp_path, [1])
    other = Checkpointer(tmp_path)
    other.track(model=torch.nn.Linear(2, 2))
    with pytest.raises(CheckpointError, match="holds .* but this run tracks"):
        other.restore()
    wrong_shape = Trainer(seed=0)
    wrong_shape.model[0] = torch.nn.Linear(6, 9)
    ckpt = Checkpointer(tmp_path)
    wrong_shape.track(ckpt)
    with pytest.raises(CheckpointError, match="(?s)cannot restore 'model'.*size mismatch"):
        ckpt.restore()


def test_saving_over_an_unrestored_directory_is_refused(tmp_path: Path) -> None:
    saved_steps(tmp_path, [1])
    ckpt = Checkpointer(tmp_path)
    Trainer(seed=0).track(ckpt)
    with pytest.raises(CheckpointError, match=r"call ckpt.restore\(\) before the first save"):
        ckpt.save(5)


# --- retention ----------------------------------------------------------------------------------


def test_retention_keeps_the_last_k_and_every_m(tmp_path: Path, run: Run) -> None:
    t = Trainer(seed=0)
    with Checkpointer(tmp_path, keep_last=2, keep_every=4, run=run) as ckpt:
        t.track(ckpt)
        ckpt.restore()
        for step in range(1, 11):
            ckpt.save(step)
            # deletions happen only after a newer checkpoint is verified: never fewer than 2
            ckpt.wait()
            complete = [s for s, p in _layout.list_steps(tmp_path) if _layout.has_manifest(p)]
            assert complete[-2:] == [step - 1, step][-min(step, 2):]
    assert [s for s, _ in _layout.list_steps(tmp_path)] == [4, 8, 9, 10]
    deleted = {e["step"]: e["data"]["reason"] for e in events(run, "checkpoint.deleted")}
    assert deleted == {1: "retention", 2: "retention", 3: "retention", 5: "retention",
                       6: "retention", 7: "retention"}


def test_a_corrupt_checkpoint_is_moved_aside_and_an_incomplete_one_removed(
        tmp_path: Path, run: Run) -> None:
    saved_steps(tmp_path, [1, 2, 3])
    (tmp_path / "step-00000003" / "manifest.json").unlink()  # as if cut short
    state = tmp_path / "step-00000002" / "state.pt"
    damaged = state.read_bytes()[:10]
    state.write_bytes(damaged)
    ckpt = Checkpointer(tmp_path, run=run)
    Trainer(seed=0).track(ckpt)
    assert ckpt.restore() == 1
    # the damaged one is evidence: moved aside at once, bytes intact; the cut-short one stays
    assert (tmp_path / "corrupt" / "step-00000002" / "state.pt").read_bytes() == damaged
    assert {s for s, _ in _layout.list_steps(tmp_path)} == {1, 3}  # until a new save
    ckpt.save(2)
    ckpt.close()
    assert [s for s, _ in _layout.list_steps(tmp_path)] == [1, 2]
    assert {e["step"]: e["data"]["reason"] for e in events(run, "checkpoint.deleted")} == {
        3: "incomplete"}
    assert restore_fresh(tmp_path, run) == 2
    assert (tmp_path / "corrupt" / "step-00000002" / "state.pt").read_bytes() == damaged


# --- asynchronous saving ------------------------------------------------------------------------


class GatedWrite:
    """Holds each background write until released; counts writes in flight."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()
        real = _layout.write

        def write(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.active += 1
                self.max_active = max(self.max_active, self.active)
            self.entered.release()
            try:
                self.release.wait(timeout=30)
                return real(*args, **kwargs)
            finally:
                with self._lock:
                    self.active -= 1

        monkeypatch.setattr(_layout, "write", write)


def test_async_save_writes_the_state_as_of_the_call(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    gate = GatedWrite(monkeypatch)
    t = Trainer(seed=0)
    ckpt = Checkpointer(tmp_path)
    t.track(ckpt)
    ckpt.restore()
    t.step()
    expected_params = [p.clone() for p in t.model.parameters()]
    expected_moments = [v.clone() for s in t.opt.state.values() for v in s.values()]
    expected_ema = t.state["ema"].clone()
    ckpt.save(1)
    assert gate.entered.acquire(timeout=10)  # the write has started and is held
    with torch.no_grad():  # training goes on, in place, before a byte is written
        for p in t.model.parameters():
            p.add_(1.0)
    t.step()
    t.state["ema"].add_(5.0)
    t.state["history"].append(123.0)
    gate.release.set()
    ckpt.close()
    saved = load_checkpoint(tmp_path)["tracked"]
    assert same(list(saved["model"].values()), expected_params)
    opt_state = saved["optimizer"]["state"]
    assert same([v for i in sorted(opt_state) for v in opt_state[i].values()], expected_moments)
    assert same(saved["state"]["ema"], expected_ema) and 123.0 not in saved["state"]["history"]


def test_at_most_one_save_in_flight_and_waiting_counts_as_stall(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run) -> None:
    gate = GatedWrite(monkeypatch)
    t = Trainer(seed=0)
    ckpt = Checkpointer(tmp_path, run=run)
    t.track(ckpt)
    ckpt.restore()
    ckpt.save(1)
    assert gate.entered.acquire(timeout=10)
    second = threading.Thread(target=ckpt.save, args=(2,))
    second.start()
    second.join(timeout=0.3)
    assert second.is_alive()  # blocked behind the first write
    assert gate.active == 1
    gate.release.set()
    second.join(timeout=30)
    ckpt.close()
    assert gate.max_active == 1
    saved = {e["step"]: e["data"] for e in events(run, "checkpoint.saved")}
    assert saved[2]["wait_s"] >= 0.25 and saved[2]["stall_s"] >= saved[2]["wait_s"]
    assert saved[1]["wait_s"] < saved[2]["wait_s"]


def test_saved_event_has_what_the_store_records(tmp_path: Path, run: Run) -> None:
    saved_steps(tmp_path, [3], run=run)
    (event,) = events(run, "checkpoint.saved")
    data = event["data"]
    state = tmp_path / "step-00000003" / "state.pt"
    assert event["step"] == 3 and event["level"] == "info"
    assert data["path"] == str(tmp_path / "step-00000003") and data["verified"] is True
    assert data["bytes"] == state.stat().st_size
    assert data["sha256"] == _files.file_digest(state).sha256
    assert data["write_s"] > 0 and data["stall_s"] > 0 and data["asynchronous"] is True
    assert data["policy"]["mode"] == "young-daly" and data["policy"]["mtbf_s"] == 86400


# --- failures -----------------------------------------------------------------------------------


def disk_full_after_half(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write puts half its bytes on disk, then fails like a full disk (ENOSPC)."""

    def write(self: _files.HashingWriter, data: bytes) -> int:
        self.file.write(bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_files.HashingWriter, "write", write)


def test_a_failed_async_write_leaves_nothing_loadable_and_surfaces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run) -> None:
    t = Trainer(seed=0)
    ckpt = Checkpointer(tmp_path, run=run)
    t.track(ckpt)
    ckpt.restore()
    ckpt.save(1)
    ckpt.wait()
    disk_full_after_half(monkeypatch)
    ckpt.save(2)  # returns: the write fails in the background
    with pytest.raises(CheckpointError, match="step 2.*No space left") as info:
        ckpt.close()
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.ENOSPC
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000001"]  # no partial, no temp file
    (failed,) = events(run, "checkpoint.failed")
    assert failed["level"] == "error" and failed["step"] == 2
    assert "No space left on device" in failed["data"]["error"]
    monkeypatch.undo()
    assert restore_fresh(tmp_path, run) == 1


def test_a_failed_write_raises_from_the_next_save(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = Checkpointer(tmp_path)
    Trainer(seed=0).track(ckpt)
    ckpt.restore()
    disk_full_after_half(monkeypatch)
    ckpt.save(1)
    with pytest.raises(CheckpointError, match="step 1"):
        ckpt.save(2)
    monkeypatch.undo()
    ckpt.save(3)  # the error was raised once; saving works again when the disk does
    ckpt.close()
    assert [s for s, _ in _layout.list_steps(tmp_path)] == [3]


def test_a_failed_sync_write_raises_at_once(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = Checkpointer(tmp_path, asynchronous=False)
    Trainer(seed=0).track(ckpt)
    ckpt.restore()
    disk_full_after_half(monkeypatch)
    with pytest.raises(CheckpointError, match="No space left"):
        ckpt.save(1)
    assert list(tmp_path.iterdir()) == []


def test_bad_settings_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CheckpointError, match="keep_last=0 must be an integer >= 1"):
        Checkpointer(tmp_path, keep_last=0)
    monkeypatch.setenv("LABCOAT_MTBF_SECONDS", "soon")
    with pytest.raises(CheckpointError, match="LABCOAT_MTBF_SECONDS='soon'"):
        Checkpointer(tmp_path)
    monkeypatch.setenv("LABCOAT_MTBF_SECONDS", "3600")
    monkeypatch.setenv("LABCOAT_CHECKPOINT_DIR", str(tmp_path / "from-env"))
    ckpt = Checkpointer()
    assert ckpt.config.mtbf_s == 3600 and ckpt.directory == tmp_path / "from-env"


# --- interval policy ------------------------------------------------------------------------


def test_young_daly_interval_by_hand() -> None:
    # sqrt(2 * 2 s * 3600 s) = sqrt(14400) = 120 s; the budget bound 2 / 0.02 = 100 s is lower
    assert young_daly_interval(2.0, 3600.0, 0.02) == (pytest.approx(120.0), "young-daly")
    # sqrt(2 * 10 * 3600) = 268.3 s would spend 3.7% stalled; the 2% budget needs 500 s
    seconds, bound = young_daly_interval(10.0, 3600.0, 0.02)
    assert (seconds, bound) == (pytest.approx(500.0), "overhead budget")
    assert 10.0 / seconds <= 0.02
    # a cheap stall but a slow background write: do not start saves faster than they finish
    assert young_daly_interval(0.001, 100.0, 0.02, write_s=2.0) == (2.0, "write time")
    with pytest.raises(ValueError):
        young_daly_interval(1.0, 0.0, 0.02)


def test_policy_measures_then_converts_to_steps() -> None:
    policy = IntervalPolicy(every=None, mtbf_s=3600.0, overhead_budget=0.02)
    policy.saw_step(1, now=0.0)
    assert policy.due(1) and policy.current().bound == "first save"  # measure C at once
    policy.saved(1, stall_s=2.0)
    for step in range(2, 12):  # 0.5 s per step, plus the 2 s stall after step 1
        policy.saw_step(step, now=0.5 * (step - 1) + 2.0)
    assert policy.step_s == pytest.approx(0.5)
    current = policy.current()
    assert current.interval_s == pytest.approx(120.0) and current.bound == "young-daly"
    assert current.interval_steps == 240  # ceil(120 s / 0.5 s)
    assert not policy.due(240) and policy.due(241)  # 240 steps after the save at step 1
    assert "sqrt(2*C*MTBF)" in str(current)
    policy.saved(241, stall_s=4.0)  # C moves by the EMA weight 0.3: 2 + 0.3 * (4 - 2) = 2.6
    assert policy.cost_s == pytest.approx(2.6)
    assert policy.current().interval_s == pytest.approx(math.sqrt(2 * 2.6 * 3600))


def simulated_saves(stall_s: float, step_s: float, steps: int) -> list[int]:
    """Steps the default policy saves at, on a clock that advances by the step and stall."""
    policy, now = IntervalPolicy(every=None, mtbf_s=24 * 3600.0, overhead_budget=0.02), 0.0
    saves = []
    for step in range(1, steps + 1):
        now += step_s
        policy.saw_step(step, now=now)
        if policy.due(step):
            saves.append(step)
            policy.saved(step, stall_s=stall_s)
            now += stall_s
    return saves


def test_a_short_fast_run_saves_at_doubling_steps() -> None:
    # the README's script: C ~ 5 ms, 0.7 ms per step, Young/Daly ~ 40,000 steps
    assert simulated_saves(0.005, 0.0007, 200) == [1, 2, 4, 8, 16, 32, 64, 128]
    # stalls of the warm-up saves stay within 2% of training time plus one second
    saves = simulated_saves(0.3, 0.05, 5000)
    assert saves[:3] == [1, 2, 4] and len(saves) < 12
    stalled = 0.3 * len(saves)
    assert stalled <= 0.02 * 0.05 * 5000 + 1.0 + 0.3  # the measuring save at step 1 is free


def test_a_slow_save_keeps_the_budget_from_the_start() -> None:
    # C = 60 s, 1 s per step: Young/Daly sqrt(2 * 60 * 86400) = 3220 s (2% alone: 3000 s);
    # a warm-up save would need 2 * 60 s <= 2% of the training time + 1 s: 5950 s, too late
    assert simulated_saves(60.0, 1.0, 7000) == [1, 3221, 6441]


def test_fixed_interval_saves_at_multiples(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, every=5)
    assert [s for s in range(1, 21) if ckpt.should_save(s)] == [5, 10, 15, 20]
    assert ckpt.policy.mode == "fixed" and ckpt.policy.interval_steps == 5


def test_policy_measurements_survive_a_restart(tmp_path: Path) -> None:
    t = Trainer(seed=0)
    with Checkpointer(tmp_path) as ckpt:
        t.track(ckpt)
        ckpt.restore()
        for step in range(1, 4):
            t.step()
            if ckpt.should_save(step):
                ckpt.save(step)
        cost = ckpt.policy.cost_s
    assert cost is not None and cost > 0
    ckpt = Checkpointer(tmp_path)
    Trainer(seed=0).track(ckpt)
    start = ckpt.restore()
    assert ckpt.policy.cost_s == cost  # no measuring save needed after a resume
    assert not ckpt.should_save(start + 1)
