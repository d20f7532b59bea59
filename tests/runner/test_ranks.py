"""Multi-rank trials (design `ranks: N`) under a real torchrun with 2 ranks.

The fake trial runs on each rank (torchrun --no-python: no torch in the trial);
rank 1 is slow, and in the first attempt fails (one arm) or hangs (the other),
so one run shows the failure attribution, the group restart, per-rank journals
and the straggler alert.
"""

from __future__ import annotations

import json
import socket
import sys
from collections import deque

import pytest

from helpers import FAKE_TRIAL, cli
from labcoat import spec, store
from labcoat.errors import LabcoatError
from labcoat.runner._ranks import (
    LEFT_BEHIND_S,
    RankFailure,
    RankGroup,
    Stragglers,
    check_program,
    launch_command,
)
from labcoat.sdk import rank_journal

pytest.importorskip("torch")

STEPS = 6
SLEEP = 0.02
SLOW = 0.1  # rank 1's extra seconds per step


def _events(session, trial, kind):
    return [e for a in trial.attempts for e in session.query(store.Event)
            .filter_by(attempt_id=a.id, kind=kind)]


@pytest.mark.slow  # two rounds of real torchrun rank groups through the runner
def test_a_failed_or_hung_rank_restarts_the_group_naming_rank_and_host(home, tmp_path):
    design = tmp_path / "design.yaml"
    design.write_text(f"""name: ranked
hypothesis: {{claim: quality helps, metric: exact_match, source: items, direction: increase}}
command: "{{python}} {FAKE_TRIAL} --steps {STEPS} --quality {{quality}} --seed {{seed}}
  --sleep {SLEEP} --fail-at {{fail_at}} --hang-at {{hang_at}} --fail-rank 1 --only-attempt 1
  --slow-rank 1 --slow-by {SLOW} --log-work --heartbeat-timeout 4"
params: {{quality: 0.3, fail_at: 4, hang_at: -1}}
arms:
  base: {{control: true}}
  better: {{params: {{quality: 0.8, fail_at: -1, hang_at: 4}}}}
seeds: 1
parallelism: 2
ranks: 2
restart: {{retries: 2, backoff: 0}}
""")
    result = cli("run", str(design), "--plain", check=True)
    host = socket.gethostname()
    causes = {"base-s0": f"exit 3 on rank 1 of 2 (host {host}): boom at step 4",
              "better-s0": f"hang: no journal line for 4 s; rank 1 of 2 (host {host}) went "
                           "silent first at step 3"}
    for cause in causes.values():
        assert f"{cause}; restart 1/2" in result.stdout
    assert "rank 1 is a straggler" in result.stdout

    db = store.open_store()
    with db.session() as session:
        experiment = store.find_experiment(session, "ranked")
        for trial in experiment.trials:
            assert trial.status == "done"
            assert [a.cause for a in trial.attempts] == [causes[trial.key], "exit 0"]
            if trial.key == "base-s0":
                failed = _events(session, trial, "rank.failed")
                assert [(e.rank, e.host, e.data["exitcode"]) for e in failed] == [(1, host, 3)]
                # rank 1's own stderr line, captured with its launcher prefix and rank
                boom = [e for e in _events(session, trial, "log")
                        if "boom at step 4" in e.message]
                assert boom and {e.rank for e in boom} == {1}
            stragglers = [a for a in session.query(store.Alert).filter_by(trial_id=trial.id)
                          if a.rule == "rank.straggler"]
            assert len(stragglers) == 1 and stragglers[0].evidence["rank"] == 1
            assert stragglers[0].evidence["measure"] == "work"
            # one journal per rank; rank 1's journal has step times but no metrics
            run_dir = trial.attempts[-1].run_dir
            rank1 = [json.loads(line) for line in
                     rank_journal(f"{run_dir}/journal.jsonl", 1).read_text().splitlines()]
            assert {r["kind"] for r in rank1} == {"start", "step", "finish"}
            assert {r["rank"] for r in rank1 if r["kind"] != "start"} == {1}
            # metrics are rank 0's alone: one point per step, not one per rank
            points = session.query(store.MetricPoint).filter_by(trial_id=trial.id).all()
            steps = sorted(p.step for p in points if p.name == "loss")
            assert steps == list(range(1, STEPS + 1))
            for rank in (0, 1):
                work = [p.value for p in points if p.name == f"work_s/rank{rank}"]
                assert len(work) == STEPS and set(work) == {SLEEP + (SLOW if rank else 0.0)}
    db.close()


def test_launch_command_wraps_the_design_command_in_torchrun(tmp_path):
    assert launch_command(["prog", "--x"], 1, tmp_path) == ["prog", "--x"]
    argv = launch_command(["prog", "--x", "a b"], 3, tmp_path)
    assert argv[1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3",
                         "--max-restarts=0"]
    assert argv[-4:] == ["--no-python", "prog", "--x", "a b"]


def test_a_killed_rank_is_described_by_its_signal():
    failure = RankFailure(rank=2, world=4, host="h", exitcode=-9, pid=7, tail="")
    assert failure.cause == "killed by signal SIGKILL on rank 2 of 4 (host h)"


def _stragglers(times: dict[int, list[float]], measure: str = "step") -> Stragglers:
    s = Stragglers(world=len(times))
    target = s.step if measure == "step" else s.work
    for rank, values in times.items():
        target[rank] = deque(values, maxlen=20)
    return s


def test_a_rank_silent_long_after_another_finished_is_left_behind():
    """The CI hang: rank 0 finished, rank 1 deadlocked in its teardown with no heartbeat
    timeout declared; the group is stopped LEFT_BEHIND_S after rank 1's last line."""
    group = RankGroup(world=2, started=1000.0)
    group.seen = {0: (1010.0, 120), 1: (1009.0, 120)}
    group.hosts = {1: "vm"}
    assert group.left_behind(1009.0 + 2 * LEFT_BEHIND_S) is None  # nobody finished yet
    group.finished = {0}
    assert group.left_behind(1009.0 + LEFT_BEHIND_S - 1) is None
    assert group.left_behind(1009.0 + LEFT_BEHIND_S + 1) == (
        f"hang: rank 1 of 2 (host vm) went silent at step 120 and stayed silent "
        f"{LEFT_BEHIND_S + 1:.0f} s after rank(s) 0 finished")
    group.finished = {0, 1}
    assert group.left_behind(1009.0 + 2 * LEFT_BEHIND_S) is None  # torchrun is exiting


def test_a_straggler_is_a_rank_far_slower_than_the_median_of_the_others():
    found = _stragglers({0: [0.10] * 6, 1: [0.11] * 6, 2: [0.40] * 6, 3: [0.09] * 6}).check()
    assert [(s.rank, s.measure) for s in found] == [(2, "step")]
    assert found[0].others == pytest.approx(0.10)  # median of 0.10, 0.11, 0.09
    # 1.4x is within the ratio; 3x of a tiny step is within the noise floor; too few steps
    assert _stragglers({0: [0.10] * 6, 1: [0.14] * 6}).check() == []
    assert _stragglers({0: [0.001] * 6, 1: [0.003] * 6}).check() == []
    assert _stragglers({0: [0.10] * 4, 1: [0.40] * 4}).check() == []


def test_work_times_are_preferred_and_a_straggler_is_reported_once():
    s = _stragglers({0: [0.1] * 5, 1: [0.1] * 5})  # synchronous: equal wall times
    s.work = {0: deque([0.02] * 5), 1: deque([0.09] * 4)}
    assert s.check() == []  # rank 1 has not reported 5 work times yet: no verdict
    s.work[1].append(0.09)
    assert [(x.rank, x.measure) for x in s.check()] == [(1, "work")]
    assert s.check() == []


def _design(ranks: str) -> str:
    return f"""name: r
hypothesis: {{claim: c, metric: loss, direction: decrease}}
command: "{{python}} train.py --nproc {{ranks}}"
arms: {{a: {{control: true}}, b: {{}}}}
seeds: 1
{ranks}
"""


def test_ranks_is_validated_with_the_file_and_line(tmp_path):
    assert spec.parse_design(_design("ranks: 4")).ranks == 4
    assert spec.expand(spec.parse_design(_design("ranks: 4")))[0].command[-1] == "4"
    assert spec.expand(spec.parse_design(_design("")))[0].command[-1] == "1"
    for bad in ("ranks: 0", "ranks: 129", "ranks: two"):
        path = tmp_path / "design.yaml"
        path.write_text(_design(bad))
        with pytest.raises(LabcoatError, match=r"design.yaml:6.*ranks"):
            spec.load_design(path)


def test_designs_without_ranks_keep_their_hash():
    # the hash main computed for this design before `ranks:` existed
    text = """name: hashed
hypothesis: {claim: c, metric: loss, direction: decrease}
command: "{python} train.py --seed {seed}"
arms: {a: {control: true}, b: {params: {x: 1}}}
params: {x: 0}
seeds: 2
"""
    assert spec.design_hash(spec.parse_design(text)) == (
        "932e56e7092d9ad0735ffe077a4d65791aa875f3c9993566b9910c8a08a45db7")
    assert spec.design_hash(spec.parse_design(text + "ranks: 2\n")) != (
        "932e56e7092d9ad0735ffe077a4d65791aa875f3c9993566b9910c8a08a45db7")


def test_a_missing_program_is_caught_before_torchrun_hides_it():
    with pytest.raises(FileNotFoundError, match="no-such-program"):
        check_program(["no-such-program", "--x"], 2)
    check_program([sys.executable, "-c", "pass"], 2)
    check_program(["no-such-program"], 1)  # one rank: Popen itself raises, as before
