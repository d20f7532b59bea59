"""`labcoat run` end to end with real subprocesses (fake_trial.py: no torch, fast)."""

import json
import signal
import subprocess
import sys
import time
from collections import Counter

from helpers import FAKE_TRIAL, cli, fake_design, show_now


def _show(name):
    return json.loads(cli("show", name, "--json", check=True).stdout)


def _export(name, *flags):
    out = cli("export", name, *flags, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_run_records_every_trial_and_the_documented_json_shapes(home, tmp_path):
    design = fake_design(tmp_path, steps=4)
    result = cli("run", str(design), check=True)
    assert "4 trial(s) finished now" in result.stdout
    shown = _show("fake")
    assert {"id", "name", "status"} <= set(shown["experiment"])
    assert shown["experiment"]["status"] == "done"
    assert [(t["arm"], t["seed"]) for t in shown["trials"]] == [
        ("base", 0), ("base", 1), ("better", 0), ("better", 1)]
    for trial in shown["trials"]:
        assert {"id", "arm", "seed", "status", "attempts", "params"} <= set(trial)
        assert (trial["status"], trial["attempts"]) == ("done", 1)
    points = _export("fake")
    assert set(points[0]) == {"trial", "arm", "seed", "name", "step", "value"}
    assert len(points) == 4 * 4  # 4 trials x 4 steps of `loss`
    items = _export("fake", "--items")
    assert set(items[0]) == {"trial", "arm", "seed", "step", "task", "item", "score"}
    assert len(items) == 4 * 2 * 40  # trials x tasks x items


def test_a_failing_trial_is_recorded_with_its_cause_and_the_others_finish(home, tmp_path):
    design = fake_design(tmp_path, steps=5, extra="--fail-at {fail_at}")
    text = design.read_text().replace("quality: 0.3}", "quality: 0.3, fail_at: -1}")
    text = text.replace("better: {params: {quality: 0.8}}",
                        "better: {params: {quality: 0.8, fail_at: 3}}")
    # the default two retries, without the default 1 s + 2 s of waiting before them
    design.write_text(text + "restart: {backoff: 0}\n")
    result = cli("run", str(design))
    assert result.returncode == 1
    assert "failed: better-s0, better-s1" in result.stdout
    trials = {t["key"]: t for t in _show("fake")["trials"]}
    assert trials["base-s0"]["status"] == "done"
    assert trials["better-s0"]["status"] == "failed"
    assert trials["better-s0"]["cause"] == "exit 3: boom at step 3"
    kept = [p for p in _export("fake") if p["trial"] == "better-s0"]
    assert [p["step"] for p in kept] == [1, 2]  # what it logged before failing is kept
    status = cli("status", "fake").stdout
    assert "better-s0 logs:" in status and "stderr.log" in status


def test_a_missing_program_fails_the_trial_with_a_hint(home, tmp_path):
    design = tmp_path / "design.yaml"
    design.write_text("""name: missing
hypothesis: {claim: c, metric: loss, direction: decrease}
command: "no-such-program-labcoat --seed {seed}"
arms: {a: {control: true}, b: {}}
seeds: 1
""")
    result = cli("run", str(design))
    assert result.returncode == 1
    causes = {t["cause"] for t in _show("missing")["trials"]}
    assert causes == {"could not start 'no-such-program-labcoat': No such file or directory; "
                      "check the design's `command:`"}


def test_garbage_output_and_a_corrupt_journal_line_do_not_lose_data(home, tmp_path):
    script = tmp_path / "corrupt.py"
    script.write_text(
        "import os, sys, labcoat\n"
        "run = labcoat.init()\n"
        "run.log(1, loss=1.0)\n"
        "sys.stdout.buffer.write(bytes(range(256)))\n"
        "open(os.environ['LABCOAT_JOURNAL'], 'a').write('{not json}\\n"
        "{\"kind\": \"log\", \"step\": 2, \"metrics\": {\"loss\": \"abc\"}}\\n')\n"
        "run.log(3, loss=3.0)\n"
        "run.finish()\n"
    )
    design = tmp_path / "design.yaml"
    design.write_text(f"""name: corrupt
hypothesis: {{claim: c, metric: loss, direction: decrease}}
command: "{{python}} {script} {{seed}}"
arms: {{a: {{control: true}}, b: {{}}}}
seeds: 1
""")
    cli("run", str(design), check=True)
    assert [(p["step"], p["value"]) for p in _export("corrupt") if p["trial"] == "a-s0"] == [
        (1, 1.0), (3, 3.0)]
    from labcoat import store

    db = store.open_store()
    with db.session() as session:
        exp = store.find_experiment(session, "corrupt")
        problems = store.events(session, [exp.trials[0].id], min_level="error")
        messages = [e.message for e in problems]
    db.close()
    assert len(messages) == 2
    assert "journal.jsonl:3: skipped: not JSON" in messages[0]
    assert "journal.jsonl:4: skipped: malformed 'log' record (metric 'loss' is 'abc'" in messages[1]


def _gate(tmp_path, *open_for):
    """`--wait-for` flags holding each trial after its step 1 until the test creates
    GATE-<quality> (its arm's file; those of `open_for` qualities exist from the start): the
    test decides when a trial may finish instead of guessing how long the machine takes."""
    for quality in open_for:
        (tmp_path / f"gate-{quality}").touch()
    return f"--wait-for {tmp_path}/gate-{{quality}}"


def test_killed_runner_resumes_without_rerunning_or_duplicating(home, tmp_path):
    # base trials run through; better trials log step 1 and are held there, so the runner is
    # killed with two trials done and two running with points, however loaded the machine.
    design = fake_design(tmp_path, steps=20, seeds=2, parallelism=2,
                         extra=_gate(tmp_path, 0.3))
    runner = subprocess.Popen([sys.executable, "-m", "labcoat.cli", "run", str(design)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: _done_count() >= 2 and _running_with_points())
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    (tmp_path / "gate-0.8").touch()
    before = {t["key"]: t for t in _show("fake")["trials"]}
    finished_before = {k for k, t in before.items() if t["status"] == "done"}
    assert finished_before and len(finished_before) < 4
    cli("run", str(design), check=True)
    after = {t["key"]: t for t in _show("fake")["trials"]}
    assert all(t["status"] == "done" for t in after.values())
    for key in finished_before:
        assert after[key]["attempts"] == 1  # not re-run
    counts = Counter((p["trial"], p["name"], p["step"]) for p in _export("fake"))
    assert max(counts.values()) == 1 and len(counts) == 4 * 20


def _interruptible_runner(design, **popen):
    """`labcoat run DESIGN` in the background, where ctrl-c (SIGINT) means what it means at a
    terminal even if this suite was itself started in the background: a shell's `cmd &`
    sets SIGINT to ignored, children inherit that, and Python then never raises
    KeyboardInterrupt."""
    return subprocess.Popen([sys.executable, "-m", "labcoat.cli", "run", str(design)],
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **popen)


def test_ctrl_c_stops_cleanly_and_a_second_run_finishes(home, tmp_path):
    # Both trials are held after step 1 until the test opens their gates (after ctrl-c).
    design = fake_design(tmp_path, steps=50, seeds=1, parallelism=2, extra=_gate(tmp_path))
    runner = _interruptible_runner(design, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
    try:
        _wait_for(_running_with_points)
        runner.send_signal(signal.SIGINT)
        out, err = runner.communicate(timeout=30)
    finally:  # a runner that did not stop must not wait at the gate forever
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 130, (out, err)
    assert f"run `labcoat run {design}` again to finish the rest" in err
    trials = _show("fake")["trials"]
    assert {t["status"] for t in trials} == {"pending"}
    assert {t["cause"] for t in trials} == {"interrupted (labcoat run was stopped)"}
    assert not _fake_trials_alive(tmp_path)
    for quality in (0.3, 0.8):
        (tmp_path / f"gate-{quality}").touch()
    cli("run", str(design), check=True)
    assert {t["status"] for t in _show("fake")["trials"]} == {"done"}


def test_second_runner_on_the_same_experiment_is_refused(home, tmp_path):
    # The trials are held after step 1 (gates never opened): the first runner is still
    # running when the second one asks, however long the machine takes to start it.
    design = fake_design(tmp_path, steps=50, seeds=1, extra=_gate(tmp_path))
    first = _interruptible_runner(design, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(_running_with_points)
        second = cli("run", str(design))
        assert second.returncode == 2
        assert "already being run by another `labcoat run`" in second.stderr
    finally:
        for quality in (0.3, 0.8):  # whatever becomes of the SIGINT, the trials can end
            (tmp_path / f"gate-{quality}").touch()
        first.send_signal(signal.SIGINT)
        first.wait(timeout=30)


def test_changing_the_params_of_recorded_trials_is_refused(home, tmp_path):
    design = fake_design(tmp_path, steps=2, seeds=1)
    cli("run", str(design), check=True)
    design.write_text(design.read_text().replace("steps: 2", "steps: 3"))
    result = cli("run", str(design))
    assert result.returncode == 2
    assert "already ran trial(s) base-s0, better-s0 with other parameters" in result.stderr
    assert "new `name:`" in result.stderr


def _done_count():  # polled: read in-process (see helpers.show_now)
    shown = show_now("fake")
    return sum(t["status"] == "done" for t in shown["trials"]) if shown else 0


def _running_with_points():
    shown = show_now("fake")
    return bool(shown) and any(t["status"] == "running" and t["last_step"]
                               for t in shown["trials"])


def _fake_trials_alive(tmp_path):
    """This test's fake trials (their --wait-for gates are in its tmp_path): the other worker
    may be running fake trials of its own."""
    out = subprocess.run(["pgrep", "-f", f"{FAKE_TRIAL}.*{tmp_path}/gate-"], capture_output=True,
                         text=True)
    return bool(out.stdout.strip())


def _wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")
