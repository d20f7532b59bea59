"""Ingestion of journal events that have tables of their own: checkpoints and resumes."""

import json

from sqlalchemy import select

from labcoat import store
from labcoat.runner import ingest_attempt
from labcoat.spec import TrialSpec


def _attempt(session, tmp_path, number=1):
    exp, _ = store.get_or_create_experiment(session, name="e", design_yaml="", design_hash="h")
    store.add_missing_trials(session, exp, [TrialSpec(key="t", arm="a", seed=0, params={},
                                                      command=[])])
    run_dir = tmp_path / f"attempt-{number}"
    run_dir.mkdir()
    return store.start_attempt(session, exp.trials[0], run_dir=str(run_dir), host="h"), run_dir


def _write(run_dir, records):
    with open(run_dir / "journal.jsonl", "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def test_checkpoint_events_fill_the_checkpoint_table_and_attempt(home, tmp_path):
    db = store.open_store()
    with db.session() as session:
        attempt, run_dir = _attempt(session, tmp_path)
        _write(run_dir, [
            {"kind": "start", "time": 100.0},
            {"kind": "event", "event": "checkpoint.restored", "step": 40, "time": 101.0,
             "data": {"path": "/c/40"}},
            {"kind": "log", "step": 41, "time": 102.0, "metrics": {"loss": 1.0}},
            {"kind": "event", "event": "checkpoint.saved", "step": 50, "time": 103.0,
             "data": {"path": "/c/50", "bytes": 10, "sha256": "ab", "verified": True,
                      "stall_s": 0.25, "write_s": 1.5}},
            {"kind": "event", "event": "checkpoint.deleted", "step": 40, "time": 104.0,
             "data": {"path": "/c/40", "reason": "retention"}},
        ])
        store.upsert_checkpoints(session, [{"trial_id": attempt.trial_id, "attempt_id": None,
                                            "step": 40, "path": "/c/40", "bytes": 1,
                                            "hash": "x", "verified": True, "stall_s": None,
                                            "write_s": None, "deleted": False, "time": 1.0}])
        ingest_attempt(session, attempt)
        ingest_attempt(session, attempt)  # idempotent
        session.commit()
        assert (attempt.restored_step, attempt.first_step_time, attempt.last_record_time) == (
            40, 102.0, 104.0)
        rows = {c.step: c for c in session.scalars(select(store.Checkpoint))}
        assert rows[50].path == "/c/50" and rows[50].stall_s == 0.25 and rows[50].verified
        assert rows[40].deleted and not rows[50].deleted
    db.close()


def test_steps_past_32_bits_are_kept_and_past_64_bits_are_a_journal_problem(db_backend,
                                                                            tmp_path):
    """A script logging tokens seen as its step passes 2**31 at 2.1B tokens: the store keeps
    it on PostgreSQL too (attempt.last_step was 32-bit there). A step no 64-bit integer holds
    (a journal written by hand or an older SDK) is one journal.invalid event, not a
    traceback in every later `labcoat status`."""
    tokens = 3_000_000_000
    db = store.open_store()
    with db.session() as session:
        attempt, run_dir = _attempt(session, tmp_path)
        _write(run_dir, [
            {"kind": "start", "time": 1.0, "total_steps": 2 * tokens},
            {"kind": "log", "step": tokens, "time": 2.0, "metrics": {"loss": 1.0}},
            {"kind": "log", "step": 2**64, "time": 3.0, "metrics": {"loss": 0.5}},
        ])
        progress = ingest_attempt(session, attempt)
        session.commit()
    with db.session() as session:
        attempt = session.get(store.Attempt, attempt.id)
        assert (attempt.last_step, attempt.trial.total_steps) == (tokens, 2 * tokens)
        points = store.metric_points(session, [attempt.trial_id], "loss")
        assert [(p.step, p.value) for p in points] == [(tokens, 1.0)]
        (problem,) = store.events(session, [attempt.trial_id], kind="journal.invalid")
        assert problem.message.endswith(
            ":3: skipped: malformed 'log' record (step 18446744073709551616 is not an integer "
            "in [0, 2**63))")
    assert progress.problems == 1
    db.close()
