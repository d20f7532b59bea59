"""The SDK and ingestion in a multi-rank trial: one journal per rank, metrics from rank 0."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from labcoat import runner, sdk, store
from labcoat.runner._ingest import ingest_attempt, ingest_ranks
from labcoat.spec import TrialSpec


def _rank_run(monkeypatch, tmp_path, rank: int, world: int = 2) -> sdk.Run:
    monkeypatch.setenv("LABCOAT_JOURNAL", str(tmp_path / "journal.jsonl"))
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    return sdk.init()


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_rank_journals_to_its_own_file_and_only_rank_0_logs_metrics(monkeypatch,
                                                                         tmp_path):
    for rank in (0, 1):
        run = _rank_run(monkeypatch, tmp_path, rank)
        for step in (1, 2, 3):
            run.log(step, loss=1.0 / step)
            run.log(step, lr=0.1)  # a second call at the same step is not a new step
            run.log_work(step, 0.25 * (rank + 1))
        run.log_items(3, "task", ["a", "b"], [1, 0])
        run.event("note", "hello")
        run.finish()
    zero = _records(tmp_path / "journal.jsonl")
    one = _records(tmp_path / "journal-rank1.jsonl")
    assert all(r["rank"] == 0 for r in zero) and all(r["rank"] == 1 for r in one)
    assert [r["kind"] for r in one] == ["start"] + ["step", "step"] * 3 + ["event", "finish"]
    assert sum(r["kind"] == "log" for r in zero) == 6
    assert sum(r["kind"] == "items" for r in zero) == 1
    walls = [r for r in one if r["kind"] == "step" and "work_s" not in r]
    assert [r["step"] for r in walls] == [1, 2, 3]
    assert "step_s" not in walls[0] and all(r["step_s"] >= 0 for r in walls[1:])
    assert [r["work_s"] for r in one if "work_s" in r] == [0.5, 0.5, 0.5]


def test_a_single_process_run_is_unchanged(monkeypatch, tmp_path):
    monkeypatch.setenv("LABCOAT_JOURNAL", str(tmp_path / "journal.jsonl"))
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    run = sdk.init()
    run.log(1, loss=1.0)
    run.log_work(1, 0.5)  # ignored outside a multi-rank trial
    run.finish()
    records = _records(tmp_path / "journal.jsonl")
    assert [r["kind"] for r in records] == ["start", "log", "finish"]
    assert not any("rank" in r for r in records)


def test_bad_rank_variables_are_named(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="RANK=2 is not within WORLD_SIZE=2"):
        _rank_run(monkeypatch, tmp_path, 2)


def test_rank_journals_are_ingested_with_their_rank_once(home, monkeypatch, tmp_path):
    for rank in (0, 1):
        run = _rank_run(monkeypatch, tmp_path, rank)
        for step in (1, 2):
            run.log(step, loss=float(step))
            run.log_work(step, 0.1 * (rank + 1))
        # the replica check's alert: every rank raises the same one
        run.event("guard.alert", "replicas differ", level="critical", step=2,
                  rule="dist.param_drift", severity="critical")
        if rank == 1:  # a rank-local alert
            run.event("guard.alert", "loss is nan", level="critical", step=2,
                      rule="nonfinite.loss", severity="critical")
        run.finish()
    db = store.open_store()
    with db.session() as session:
        exp, _ = store.get_or_create_experiment(session, name="e", design_yaml="",
                                                design_hash="h")
        store.add_missing_trials(session, exp, [TrialSpec(key="t", arm="a", seed=0,
                                                          params={}, command=[])])
        attempt = store.start_attempt(session, exp.trials[0], run_dir=str(tmp_path), host="h")
        for _ in range(2):  # the second pass starts again from nothing: no duplicates
            ingest_attempt(session, attempt)
            ingest_ranks(session, attempt, 2, {})
        session.commit()
        rows = list(session.scalars(select(store.MetricPoint)))
        walls = sorted((p.name, p.step) for p in rows if p.name.startswith("step_s/"))
        assert walls == [("step_s/rank0", 2), ("step_s/rank1", 2)]  # from the second step on
        points = sorted((p.name, p.step, p.value) for p in rows if p.name not in dict(walls))
        assert points == [("loss", 1, 1.0), ("loss", 2, 2.0),
                          ("work_s/rank0", 1, 0.1), ("work_s/rank0", 2, 0.1),
                          ("work_s/rank1", 1, 0.2), ("work_s/rank1", 2, 0.2)]
        alerts = sorted((a.rule, a.message) for a in session.scalars(select(store.Alert)))
        assert alerts == [("dist.param_drift", "replicas differ"),
                          ("nonfinite.loss", "rank 1: loss is nan")]
        events = session.scalars(select(store.Event).where(store.Event.kind == "guard.alert"))
        assert sorted((e.stream, e.rank) for e in events) == [
            ("journal", 0), ("journal.rank1", 1), ("journal.rank1", 1)]
    db.close()


def test_an_adhoc_rank_group_becomes_one_trial_from_rank_0(home, monkeypatch):
    monkeypatch.delenv("LABCOAT_JOURNAL", raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "abc")
    for rank in (1, 0):
        monkeypatch.setenv("RANK", str(rank))
        run = sdk.init(experiment="adhoc-dp")
        run.log(1, loss=float(rank + 1))
        run.finish()
    assert run.journal.parent.name == "torchrun-abc"
    assert (run.journal.parent / "journal-rank1.jsonl").exists()
    db = store.open_store()
    assert runner.ingest_adhoc_runs(db) == ["adhoc-dp/run-torchrun-abc"]
    with db.session() as session:
        trials = store.find_experiment(session, "adhoc-dp").trials
        assert [t.key for t in trials] == ["run-torchrun-abc"]
        values = [p.value for p in session.scalars(select(store.MetricPoint))
                  if p.name == "loss"]
        assert values == [1.0]  # rank 0's
    db.close()
