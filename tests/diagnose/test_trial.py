"""diagnose_trial: a stored trial's failed attempt against its experiment's successful trials."""

import json
from types import SimpleNamespace

import pytest

from helpers import cli
from labcoat import store
from labcoat.diagnose import DiagnoseError, diagnose_trial

TRACE = ["Traceback (most recent call last):",
         '  File "/home/ada/train.py", line 40, in <module>',
         "    check(batch)",
         '  File "/home/ada/train.py", line 12, in check',
         "    raise ValueError('batch 3 has no labels')",
         "ValueError: batch 3 has no labels"]


def _trial(session, experiment, key, arm, *, cause, status, lines, run_dir):
    store.add_missing_trials(session, experiment, [SimpleNamespace(
        key=key, arm=arm, seed=0, params={}, command=["python", "train.py"])])
    trial = next(t for t in experiment.trials if t.key == key)
    attempt = store.start_attempt(session, trial, run_dir=str(run_dir), host="node-0")
    store.insert_events(session, [
        {"trial_id": trial.id, "attempt_id": attempt.id, "stream": stream, "seq": i,
         "step": None, "rank": None, "host": "node-0", "level": "info", "kind": "log",
         "message": text, "data": {"noise": False}, "time": 1000.0 + i}
        for i, (stream, text) in enumerate(lines, start=1)])
    attempt.last_step = 2
    store.end_attempt(session, attempt, exit_code=0 if status == "done" else 1, cause=cause,
                      trial_status=status)
    return trial


def _store(tmp_path, *, captured=True):
    db = store.open_store(f"sqlite:///{tmp_path / 'labcoat.db'}")
    session = db.session()
    experiment, _ = store.get_or_create_experiment(session, name="exp", design_yaml="",
                                                   design_hash="h")
    steps = [("stdout", f"step {s} loss {3 - s / 10}") for s in (1, 2, 3)]
    _trial(session, experiment, "a-s0", "a", cause="exit 0", status="done",
           lines=steps + [("stdout", "done")], run_dir=tmp_path / "ok")
    failed_dir = tmp_path / "bad"
    failed_dir.mkdir()
    (failed_dir / "stdout.log").write_text("\n".join(t for _, t in steps[:2]) + "\n")
    (failed_dir / "stderr.log").write_text("\n".join(TRACE) + "\n")
    lines = steps[:2] + [("stderr", t) for t in TRACE] if captured else []
    bad = _trial(session, experiment, "b-s0", "b", cause=f"exit 1: {TRACE[-1]}",
                 status="failed", lines=lines, run_dir=failed_dir)
    store.insert_alerts(session, [{"trial_id": bad.id, "attempt_id": bad.attempts[0].id,
                                   "seq": 1, "step": 2, "rule": "update.param_unchanged",
                                   "severity": "error", "message": "fc1 did not change",
                                   "evidence": None, "time": 1.0}])
    session.commit()
    return db, session, bad


@pytest.mark.parametrize("captured", [True, False], ids=["captured", "stderr.log fallback"])
def test_a_stored_failure_is_diagnosed_against_successful_trials(tmp_path, captured):
    db, session, bad = _store(tmp_path, captured=captured)
    try:
        found = diagnose_trial(session, bad)
        assert (found.cause, found.step) == ("exception", 2)
        assert found.exception == "ValueError: batch 3 has no labels"
        assert str(found.user_frame) == "/home/ada/train.py:12 in check"
        assert found.references == 4  # the lines of trial a-s0
        assert found.new_templates[0].example == "Traceback (most recent call last):"
        alone = diagnose_trial(session, bad, max_references=0)
        assert alone.references == 0 and alone.new_templates == ()
    finally:
        session.close()
        db.close()


def test_unknown_attempts_are_refused(tmp_path):
    db, session, bad = _store(tmp_path)
    try:
        with pytest.raises(DiagnoseError, match="has no attempt 7 \\(attempts: 1\\)"):
            diagnose_trial(session, bad, attempt=7)
        with pytest.raises(DiagnoseError, match="max_references"):
            diagnose_trial(session, bad, max_references=-1)
        empty = SimpleNamespace(key="c-s0", attempts=[])
        with pytest.raises(DiagnoseError, match="has no attempts yet"):
            diagnose_trial(session, empty)  # type: ignore[arg-type]
    finally:
        session.close()
        db.close()


def test_a_trial_run_by_the_runner(home, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, labcoat\n"
        "run = labcoat.init()\n"
        "def load(step):\n"
        "    if sys.argv[1] == 'bad' and step == 3:\n"
        "        raise KeyError('input_ids')\n"
        "for step in range(1, 5):\n"
        "    load(step)\n"
        "    run.log(step, loss=1.0 / step)\n"
        "    print(f'step {step} loss {1.0 / step:.3f}', flush=True)\n"
        "run.finish()\n")
    design = tmp_path / "design.yaml"
    design.write_text(f"""name: diag
command: "{{python}} {script} {{kind}}"
params: {{kind: good}}
arms: {{good: {{control: true}}, bad: {{params: {{kind: bad}}}}}}
seeds: 1
restart: {{retries: 0}}
""")
    cli("run", str(design))
    db = store.open_store()
    try:
        with db.session() as session:
            experiment = store.find_experiment(session, "diag")
            bad = next(t for t in experiment.trials if t.arm == "bad")
            found = diagnose_trial(session, bad)
        assert (found.cause, found.step) == ("exception", 2), json.dumps(found.to_dict())
        assert found.exception == "KeyError: 'input_ids'"
        assert found.user_frame.file == str(script) and found.user_frame.function == "load"
        assert found.references > 0 and found.new_templates
    finally:
        db.close()
