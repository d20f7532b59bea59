"""`labcoat diagnose` and `labcoat logs templates` through the real CLI, on trials run by
`labcoat run` (tests/fixtures/fake_trial.py printing what a failing training job prints)."""

import json

import pytest

from helpers import FAKE_TRIAL, cli, shared_home, use_home

OOM = "torch.OutOfMemoryError: CUDA out of memory"


def _design(tmp_path, name, arms, *, ranks=1, steps=6):
    """Arms: {arm: {param: value}} over oom_at/nan_at/fault_rank (-1: no fault)."""
    lines = "\n".join(f"  {arm}: {{params: {json.dumps(params)}}}" if params else
                      f"  {arm}: {{control: true}}" for arm, params in arms.items())
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""name: {name}
command: "{{python}} {FAKE_TRIAL} --steps {steps} --seed {{seed}} --sleep 0.35 --chatter \
--ranks {ranks} --oom-at {{oom_at}} --nan-at {{nan_at}} --fault-rank {{fault_rank}}"
params: {{oom_at: -1, nan_at: -1, fault_rank: 0}}
arms:
{lines}
seeds: 1
parallelism: 3
restart: {{retries: 0}}
""", encoding="utf-8")
    return path


def _json(*args):
    return json.loads(cli(*args, check=True).stdout)


@pytest.fixture(scope="module")
def boom_home(tmp_path_factory):
    """A home holding experiment "boom", run once for the module (the tests using it only
    read it: diagnose, logs and export do not write to the store)."""
    tmp = tmp_path_factory.mktemp("boom")
    with shared_home(tmp / "home") as path:
        design = _design(tmp, "boom", {"base": {}, "oom": {"oom_at": 4},
                                       "nan": {"nan_at": 3}})
        result = cli("run", str(design))
        assert result.returncode == 1, result.stdout + result.stderr  # two trials failed
    return path


@pytest.fixture
def failing(boom_home, monkeypatch):
    """Experiment "boom": base-s0 succeeds, oom-s0 dies of a CUDA OOM at step 4, nan-s0's
    loss is NaN from step 3 and it raises at step 5."""
    use_home(monkeypatch, boom_home)
    return "boom"


def test_diagnose_an_experiment_names_cause_step_and_what_is_new(failing):
    data = _json("diagnose", failing, "--json")
    assert data["experiment"] == "boom"
    found = {d["trial"]: d for d in data["diagnoses"]}
    assert set(found) == {"oom-s0", "nan-s0"}  # only the failed trials

    oom = found["oom-s0"]
    assert (oom["cause"], oom["attempt"], oom["status"]) == ("out_of_memory", 1, "failed")
    assert oom["step"] in (3, 4)  # its last printed step, or the one it died in
    assert oom["phase"] == "training"
    assert oom["exception"].startswith(OOM)
    assert oom["user_frame"]["file"].endswith("fake_trial.py")
    assert oom["reference_trials"] == ["base-s0"]
    assert any(OOM in t["example"] for t in oom["new_templates"])
    assert not any("step 1/6" in t["example"] for t in oom["new_templates"])  # base prints it
    top = oom["suspects"][0]
    assert top["cause"] == "out_of_memory" and OOM in top["text"] and top["evidence"]

    nan = found["nan-s0"]
    assert nan["cause"] == "nan"
    assert nan["step"] == 3  # where the loss first went NaN, not where the run stopped (5)
    assert nan["exception"] == "FloatingPointError: loss is nan at step 5"
    assert any("first sign of NaN" in reason for reason in nan["evidence"])
    assert {s["cause"] for s in nan["suspects"]} == {"nan"}


def test_nan_losses_are_recorded_not_dropped(failing):
    """SQLite has no NaN; the store keeps it (as NULL) and export writes it as null."""
    lines = cli("export", failing, check=True).stdout.splitlines()
    losses = {p["step"]: p["value"] for p in map(json.loads, lines)
              if p["trial"] == "nan-s0" and p["name"] == "loss"}
    assert sorted(losses) == [1, 2, 3, 4]
    assert losses[2] < 1 and losses[3] is None and losses[4] is None

    text = cli("diagnose", failing, check=True).stdout
    assert "oom-s0 attempt 1" in text and "nan-s0 attempt 1" in text
    assert "cause  out_of_memory" in text and "suspects, most likely first" in text
    assert "absent from 1 successful run(s): base-s0" in text


def test_one_trial_by_path_or_flag_and_a_successful_one(failing):
    by_path = _json("diagnose", f"{failing}/oom-s0", "--json")
    by_flag = _json("diagnose", failing, "--trial", "oom-s0", "--json")
    assert [d["trial"] for d in by_path["diagnoses"]] == ["oom-s0"]
    assert by_path["diagnoses"][0]["suspects"] == by_flag["diagnoses"][0]["suspects"]
    fine = _json("diagnose", f"{failing}/base-s0", "--json")["diagnoses"][0]
    assert (fine["status"], fine["cause"]) == ("done", None)
    assert "no failed trials" not in cli("diagnose", f"{failing}/base-s0", check=True).stdout


def test_templates_count_lines_and_flag_what_only_failed_trials_print(failing):
    rows = _json("logs", "templates", failing, "--json")["templates"]
    assert len({r["template"] for r in rows}) == len(rows)
    progress = [r for r in rows if r["example"].startswith("step 1/6")]
    assert len(progress) == 1  # every step of every trial, one template
    (progress,) = progress
    assert progress["text"] == "step <NUM>/<NUM> | loss <*> | lr <NUM>"
    # base 6 steps, oom 3 (dies in step 4), nan 4 (raises in step 5)
    assert (progress["count"], progress["first_step"]) == (13, 1)
    assert progress["trials"] == ["base-s0", "nan-s0", "oom-s0"]
    assert progress["only_failed"] is False
    (oom,) = [r for r in rows if OOM in r["example"]]
    assert oom["only_failed"] is True and oom["trials"] == ["oom-s0"] and oom["count"] == 1
    assert "<SIZE>" in oom["text"]  # sizes masked: other OOMs share the template

    base = _json("logs", "templates", failing, "--trial", "base-s0", "--json")["templates"]
    assert [r["template"] for r in base] == [progress["template"]]  # ids do not depend on
    assert base[0]["count"] == 6 and base[0]["trials"] == ["base-s0"]  # the selection
    errors = _json("logs", "templates", failing, "--level", "error", "--json")["templates"]
    assert errors and all(r["only_failed"] for r in errors)

    table = cli("logs", "templates", failing, check=True).stdout
    assert "printed only by failed attempts" in table and "step <NUM>/<NUM>" in table
    plain = _json("logs", failing, "--trial", "base-s0", "--json")  # the lines view still works
    assert plain[0]["text"] == "step 1/6 | loss 1.0000 | lr 0.001"


def test_the_rank_that_ran_out_of_memory_is_found_among_timeouts(home, tmp_path):
    design = _design(tmp_path, "ranks", {"base": {}, "oom": {"oom_at": 4, "fault_rank": 2}},
                     ranks=4)
    assert cli("run", str(design)).returncode == 1
    (found,) = _json("diagnose", "ranks", "--json")["diagnoses"]
    assert (found["cause"], found["rank"]) == ("out_of_memory", 2)
    assert found["step"] in (3, 4)
    causes = {s["cause"] for s in found["suspects"]}
    assert {"out_of_memory", "collective_timeout"} <= causes  # the peers' timeouts rank lower
    assert found["suspects"][0]["rank"] == 2
    rows = _json("logs", "templates", "ranks", "--json")["templates"]
    (watchdog,) = [r for r in rows if "Watchdog caught" in r["example"]]
    assert watchdog["ranks"] == [0, 1, 3] and watchdog["only_failed"] is True
    lines = _json("logs", "ranks", "--rank", "2", "--json")  # the rank the line names
    assert lines and all(line["ranks"] == [2] for line in lines)
    assert any("OutOfMemoryError" in line["text"] for line in lines)
    rank2 = _json("logs", "templates", "ranks", "--rank", "2", "--json")["templates"]
    assert not any("Watchdog" in r["example"] for r in rank2)
    assert all(r["ranks"] == [2] for r in rank2)


def test_a_hang_the_runner_stopped_is_dated_by_the_last_heartbeat(home, tmp_path):
    design = tmp_path / "stuck.yaml"
    design.write_text(f"""name: stuck
command: "{{python}} {FAKE_TRIAL} --steps 6 --seed {{seed}} --sleep 0.3 --chatter \
--hang-at {{hang_at}} --heartbeat-timeout 3"
params: {{hang_at: -1}}
arms: {{base: {{control: true}}, stuck: {{params: {{hang_at: 4}}}}}}
seeds: 1
restart: {{retries: 0}}
""", encoding="utf-8")
    assert cli("run", str(design)).returncode == 1
    (found,) = _json("diagnose", "stuck", "--json")["diagnoses"]
    assert found["end"].startswith("hang:") and found["cause"] == "hang"
    assert found["step"] == found["last_step"] == 3  # the last step it logged
    assert found["new_templates"] == []  # it printed nothing unusual: it just stopped
    assert found["suspects"][0]["evidence"] == [f"the runner recorded: {found['end']}"]


@pytest.fixture(scope="module")
def calm_home(tmp_path_factory):
    """A home holding experiment "calm" (two trials, neither fails), run once for the
    module; its tests only read it."""
    tmp = tmp_path_factory.mktemp("calm")
    with shared_home(tmp / "home") as path:
        design = _design(tmp, "calm", {"base": {}, "other": {"fault_rank": 1}}, steps=2)
        cli("run", str(design), check=True)
    return path


@pytest.fixture
def calm(calm_home, monkeypatch):
    use_home(monkeypatch, calm_home)
    return "calm"


def test_an_experiment_without_failures_has_nothing_to_diagnose(calm):
    assert _json("diagnose", "calm", "--json") == {"experiment": "calm", "diagnoses": []}
    out = cli("diagnose", "calm", check=True).stdout
    assert "has no failed or diverged trials" in out and "labcoat diagnose calm/TRIAL" in out
    rows = _json("logs", "templates", "calm", "--json")["templates"]
    assert rows and not any(r["only_failed"] for r in rows)


BAD = [
    (("diagnose", "nope"), "no experiment named 'nope'"),
    (("diagnose", "calm/nope"),
     "experiment 'calm' has no trial 'nope' (trials: base-s0, other-s0)"),
    (("diagnose", "calm", "--trial", "nope"), "has no trial 'nope'"),
    (("diagnose", "calm/base-s0", "--trial", "base-s0"), "the trial is given twice"),
    (("diagnose", "calm/base-s0", "--attempt", "4"), "has no attempt 4 (attempts: 1)"),
    (("diagnose", "calm", "--attempt", "1"), "--attempt needs one trial"),
    (("logs", "templates", "nope"), "no experiment named 'nope'"),
    (("logs", "templates"), "`labcoat logs templates` needs an experiment"),
    (("logs", "templates", "calm", "--trial", "nope"), "has no trial 'nope'"),
    (("logs", "templates", "calm", "--level", "loud"), "'loud' is not a level"),
    (("logs", "templates", "calm", "--grep", "("), "not a valid regular expression"),
    (("logs", "calm", "extra"), "unexpected argument 'extra'"),
]


def test_bad_input_is_one_message_and_exit_code_2(calm):
    for args, message in BAD:
        result = cli(*args)
        said = " ".join(result.stderr.split())
        assert result.returncode == 2, (args, result.stdout + result.stderr)
        assert message in said, (args, said)
        assert "Traceback" not in result.stderr, args
