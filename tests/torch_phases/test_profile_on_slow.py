"""A torch.profiler window captured in the trial on a slowdown (off by default).

tinylm with its data loading slowed by 15 ms from step 100 (the `slow_data` fault), the
profile turned on as a `labcoat run` user would (``LABCOAT_PROFILE_ON_SLOW``): the trace
lands beside the journal, holds the profiled steps' data loading with the sleep's length
(the fault's own constant, not the timer's figure), and a ``phase.profile`` event names
the file. The same run without the setting writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import labcoat
from labcoat.errors import LabcoatError
from labcoat.torch import ProfileOnSlow, time_phases
from labcoat.workloads.tinylm import Config, Fault, train
from labcoat.workloads.tinylm._faults import SLOW_DATA_S

STEPS, CHANGE, WINDOW = 150, 100, 3


def _train(experiment: str) -> tuple[Path, list[dict]]:
    """A small tinylm run, slow_data from CHANGE: its journal's folder and records."""
    run = labcoat.init(experiment=experiment)
    cfg = Config(width=16, depth=1, heads=2, batch_size=8, eval_every=0, eval_items=3,
                 tasks=("copy", "reverse"), threads=1, steps=STEPS, seed=0)
    train(cfg, run, fault=Fault("slow_data", step=CHANGE))
    run.finish()
    records = [json.loads(line) for line in run.journal.read_text().splitlines()]
    return run.journal.parent, records


def test_a_slowdown_is_profiled_beside_the_journal(tmp_path, monkeypatch):
    monkeypatch.setenv("LABCOAT_HOME", str(tmp_path))
    monkeypatch.setenv("LABCOAT_PROFILE_ON_SLOW", str(WINDOW))
    folder, records = _train("profiled")
    events = [r for r in records if r["kind"] == "event" and r["event"] == "phase.profile"]
    assert len(events) == 1, events
    data = events[0]["data"]
    assert data["phase"] == "data" and data["rank"] == 0
    assert CHANGE - 10 <= data["from_step"] <= CHANGE < data["detected"] < STEPS
    trace = folder / data["file"]
    assert trace.exists() and sorted(folder.glob("profile-*.json")) == [trace]
    spans = json.loads(trace.read_text())["traceEvents"]
    fetches = [e["dur"] for e in spans if e.get("name") == "labcoat.phase.data"]
    assert len(fetches) >= WINDOW, fetches
    assert min(fetches) >= SLOW_DATA_S * 1e6 * 0.99  # microseconds: the 15 ms sleep
    forwards = [e for e in spans if e.get("name") == "labcoat.phase.forward"]
    assert len(forwards) >= WINDOW
    assert data["first_step"] > data["detected"] and (
        data["last_step"] - data["first_step"] + 1 >= WINDOW)


def test_off_by_default_nothing_is_captured(tmp_path, monkeypatch):
    monkeypatch.setenv("LABCOAT_HOME", str(tmp_path))
    monkeypatch.delenv("LABCOAT_PROFILE_ON_SLOW", raising=False)
    folder, records = _train("unprofiled")
    assert not [r for r in records if r["kind"] == "event" and r["event"] == "phase.profile"]
    assert list(folder.glob("profile-*.json")) == []
    # the slowdown is there to be seen: the run's own records show it
    data = [r["s"].get("data", 0.0) for r in records
            if r["kind"] == "phases" and r["step"] > CHANGE + 1]
    assert min(data) >= SLOW_DATA_S


def test_settings_are_checked(tmp_path, monkeypatch):
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    monkeypatch.setenv("LABCOAT_PROFILE_ON_SLOW", "five")
    with pytest.raises(LabcoatError, match="LABCOAT_PROFILE_ON_SLOW='five'"):
        time_phases(model, optimizer)
    monkeypatch.setenv("LABCOAT_PROFILE_ON_SLOW", "0")
    time_phases(model, optimizer).close()  # 0: off
    with pytest.raises(LabcoatError, match="needs somewhere to write"):
        time_phases(model, optimizer, profile_on_slow=5)
    with pytest.raises(LabcoatError, match="must be a number of steps"):
        time_phases(model, optimizer, profile_on_slow=-1)
    with pytest.raises(LabcoatError, match="check_every=0"):
        ProfileOnSlow(check_every=0)
    timer = time_phases(model, optimizer,
                        profile_on_slow=ProfileOnSlow(steps=2, directory=tmp_path))
    timer.close()
    assert timer.profiles == []


def test_a_run_that_ends_inside_the_window_writes_the_steps_it_has(tmp_path):
    """A toy loop, its fetches 5 ms slower from step 40, a short rule: the alarm's look every
    5 steps sees it, the window (100 steps) outlives the run, close() writes it."""
    import time

    from labcoat.stats import SlowStepRule

    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def batches():
        for step in range(1, 61):
            if step >= 40:
                time.sleep(0.005)
            yield torch.randn(2, 4)

    setting = ProfileOnSlow(steps=100, check_every=5, directory=tmp_path,
                            rule=SlowStepRule(warmup=2, window=20, min_baseline=10))
    timer = time_phases(model, optimizer, profile_on_slow=setting)
    for x in timer.loader(batches()):
        model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    timer.close()
    (trace,) = timer.profiles
    assert trace.parent == tmp_path and trace.name.startswith("profile-rank0-step")
    first = int(trace.stem.split("step")[1])
    assert 40 < first <= 55
    fetches = sorted((e["ts"], e["dur"]) for e in json.loads(trace.read_text())["traceEvents"]
                     if e.get("name") == "labcoat.phase.data")
    # each fetch after the window opened (during step `first`'s), and the one that ends
    # the loop (StopIteration, no sleep)
    assert len(fetches) == 60 - first + 1
    assert min(d for _, d in fetches[:-1]) >= 5000 > fetches[-1][1]
