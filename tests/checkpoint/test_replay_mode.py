"""Recording for replay (the Checkpointer's replay budget) and replay-mode settings."""

from __future__ import annotations

import pytest

from labcoat.torch import Checkpointer, CheckpointError
from labcoat.torch.checkpoint._interval import IntervalPolicy


def test_replay_budget_spaces_saves_by_the_whole_save_cost():
    policy = IntervalPolicy(every=None, mtbf_s=24 * 3600.0, overhead_budget=0.02,
                            replay_budget=0.05)
    policy.cost_s, policy.write_s, policy.step_s = 0.01, 0.04, 0.1
    current = policy.current()
    # (C + write) / budget = 0.05 s / 0.05 = 1 s; at 0.1 s per step: every 10 steps
    assert current.bound == "replay budget"
    assert current.interval_s == pytest.approx(1.0)
    assert current.interval_steps == 10
    # Without it, Young/Daly with a 24 h MTBF: sqrt(2 * 0.01 * 86400) = 41.6 s = 416 steps.
    plain = IntervalPolicy(every=None, mtbf_s=24 * 3600.0, overhead_budget=0.02)
    plain.cost_s, plain.write_s, plain.step_s = 0.01, 0.04, 0.1
    assert plain.current().interval_steps == 416


def test_replay_budget_is_validated(tmp_path, monkeypatch):
    with pytest.raises(CheckpointError, match=r"replay_budget=1.5 must be None or in \(0, 1\]"):
        Checkpointer(tmp_path, replay_budget=1.5)
    monkeypatch.setenv("LABCOAT_REPLAY_BUDGET", "7%")
    with pytest.raises(CheckpointError, match="LABCOAT_REPLAY_BUDGET='7%' must be a fraction"):
        Checkpointer(tmp_path)
    monkeypatch.setenv("LABCOAT_REPLAY_BUDGET", "0.07")
    with Checkpointer(tmp_path) as ckpt:
        assert ckpt.config.replay_budget == 0.07


def test_a_bad_replay_description_is_named(tmp_path, monkeypatch):
    spec = tmp_path / "replay.json"
    spec.write_text('{"version": 1, "checkpoint": null, "restore_step": 5, "start": 3, '
                    '"end": 4, "probes": [], "output": "x"}')
    monkeypatch.setenv("LABCOAT_REPLAY", str(spec))
    with pytest.raises(CheckpointError, match="needs restore_step < start <= end"):
        Checkpointer(tmp_path / "c")
    monkeypatch.setenv("LABCOAT_REPLAY", str(tmp_path / "missing.json"))
    with pytest.raises(CheckpointError, match="not a replay description"):
        Checkpointer(tmp_path / "c")


def test_replay_budget_policy_reads_as_its_formula():
    policy = IntervalPolicy(every=None, mtbf_s=3600.0, overhead_budget=0.02, replay_budget=0.05)
    policy.cost_s, policy.write_s, policy.step_s = 0.01, 0.04, 0.1
    assert str(policy.current()) == ("every 10 steps = 1s ((C + write)/replay budget = "
                                     "(0.01s + 0.04s)/0.05; 0.1s/step)")
