"""The supervisor: crashed and hung trials restart within a retry budget; attempts are recorded."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from helpers import FAKE_TRIAL, cli
from labcoat.runner._restart import PRIOR_MTBF, backoff_seconds, is_failure, mtbf_seconds
from labcoat.spec import Restart
from labcoat.store import Attempt, Experiment, Trial


def _design(tmp_path, flags, restart="{retries: 2, backoff: 0.1}", seeds=1):
    path = tmp_path / "design.yaml"
    path.write_text(f"""name: sup
hypothesis: {{claim: c, metric: loss, direction: decrease}}
command: "{{python}} {FAKE_TRIAL} --steps 6 --sleep 0.05 --seed {{seed}} {flags}"
arms: {{a: {{control: true}}, b: {{}}}}
seeds: {seeds}
parallelism: 2
restart: {restart}
""")
    return path


def _trials():
    return {t["key"]: t for t in json.loads(cli("show", "sup", "--json", check=True).stdout)
            ["trials"]}


def _attempt_causes(key):
    from labcoat import store

    db = store.open_store()
    with db.session() as session:
        trial = next(t for t in store.find_experiment(session, "sup").trials if t.key == key)
        causes = [a.cause for a in trial.attempts]
    db.close()
    return causes


def test_a_crash_restarts_the_trial_which_then_finishes(home, tmp_path):
    record = tmp_path / "dirs.txt"
    result = cli("run", str(_design(tmp_path, f"--fail-at 3 --only-attempt 1 --env-to {record}")),
                 check=True)
    assert "restart 1/2 in 0.1 s" in result.stdout
    trials = _trials()
    assert {t["status"] for t in trials.values()} == {"done"}
    assert trials["a-s0"]["attempts"] == 2
    assert _attempt_causes("a-s0") == ["exit 3: boom at step 3", "exit 0"]
    dirs = record.read_text().split()
    assert len(dirs) == 4 and len(set(dirs)) == 2  # each trial keeps one checkpoint dir
    assert all(d.endswith("/checkpoints") for d in dirs)


def test_the_retry_budget_ends_in_failure(home, tmp_path):
    result = cli("run", str(_design(tmp_path, "--fail-at 2", restart="{retries: 1, backoff: 0}")))
    assert result.returncode == 1
    assert "failed after 1 restart(s): exit 3: boom at step 2" in result.stdout
    trials = _trials()
    assert {t["status"] for t in trials.values()} == {"failed"}
    assert trials["a-s0"]["attempts"] == 2


def test_a_hung_trial_is_killed_and_restarted(home, tmp_path):
    design = _design(tmp_path, "--hang-at 3 --only-attempt 1",
                     restart="{retries: 1, backoff: 0, heartbeat_timeout: 1.5}")
    cli("run", str(design), check=True)
    assert _attempt_causes("a-s0") == ["hang: no journal line for 1.5 s", "exit 0"]


def test_a_trial_can_declare_its_own_heartbeat_timeout(home, tmp_path):
    design = _design(tmp_path, "--hang-at 3 --only-attempt 1 --heartbeat-timeout 1",
                     restart="{retries: 1, backoff: 0}")
    cli("run", str(design), check=True)
    assert _attempt_causes("b-s0")[0] == "hang: no journal line for 1 s"


def test_backoff_doubles_and_is_capped():
    policy = Restart(backoff=2.0)
    assert [backoff_seconds(policy, n) for n in (1, 2, 3, 10)] == [2.0, 4.0, 8.0, 60.0]


def test_mtbf_counts_crashes_and_hangs_but_not_clean_exits():
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def attempt(seconds, cause):
        return Attempt(started_at=start, ended_at=start + timedelta(seconds=seconds), cause=cause)

    trial = Trial(key="t", arm="a", attempts=[attempt(100, "exit 3: boom"),
                                              attempt(50, "hang: no journal line for 5 s"),
                                              attempt(300, "exit 0"),
                                              attempt(20, "interrupted (labcoat run was stopped)")])
    experiment = Experiment(name="e", trials=[trial])
    # prior: one failure per PRIOR_MTBF seconds; observed: 470 s with 2 failures
    assert mtbf_seconds(experiment) == pytest.approx((PRIOR_MTBF + 470) / 3)
    assert not is_failure("exit 0") and is_failure("killed by signal SIGKILL")


def test_the_same_failure_before_any_step_is_not_retried_again(home, tmp_path):
    result = cli("run", str(_design(tmp_path, "--fail-at 1", restart="{retries: 5, backoff: 0}")))
    assert result.returncode == 1
    assert "the same failure twice before any step: not retrying" in result.stdout
    assert _trials()["a-s0"]["attempts"] == 2  # not 6
