"""Localization on small multi-rank logs: the right cause, rank and step, with evidence."""

import json

import pytest

from labcoat.diagnose import (
    AttemptEnd,
    DiagnoseError,
    LogLine,
    MetricPoint,
    Reference,
    RunEvent,
    diagnose,
)

WATCHDOG = ("[rank{r}]:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600042 milliseconds before timing out.")


def steps(ranks, first, last, ms=400.0, slow=None):
    """Per-step lines of every rank; slow = (rank, from step, factor)."""
    out = []
    for step in range(first, last + 1):
        for r in ranks:
            factor = slow[2] if slow and r == slow[0] and step >= slow[1] else 1.0
            out.append(f"[rank{r}]: step {step} | loss {3 - step / 50:.3f} | "
                       f"{ms * factor + r:.1f} ms/step")
    return out


def test_oom_on_one_rank_is_found_among_its_peers_timeouts():
    lines = steps(range(4), 1, 12) + [
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "/home/ada/train.py", line 88, in <module>',
        "[rank2]:     loss = model(batch)",
        '[rank2]:   File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", '
        "line 1532, in _call_impl",
        "[rank2]:     return forward_call(*args, **kwargs)",
        "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ] + [WATCHDOG.format(r=r) for r in (0, 1, 3)]
    found = diagnose(lines, end=AttemptEnd(cause="exit 1: ...", exit_code=1))
    assert (found.cause, found.rank, found.step) == ("out_of_memory", 2, 12)
    assert found.suspects[0].rank == 2 and "OutOfMemoryError" in found.suspects[0].text
    assert found.suspects[1].cause == "collective_timeout"
    assert found.suspects[1].ranks == (0, 1, 3)
    assert str(found.user_frame) == "/home/ada/train.py:88 in <module>"
    assert found.exception.startswith("torch.OutOfMemoryError: CUDA out of memory")


def test_a_silently_killed_rank_is_the_one_missing_from_the_timeouts():
    lines = steps(range(4), 1, 7) + steps((0, 2, 3), 8, 8)
    lines += [WATCHDOG.format(r=r) for r in (0, 2, 3)]
    found = diagnose(lines, end=AttemptEnd(cause="exit 137", exit_code=137))
    assert (found.cause, found.rank, found.step) == ("signal", 1, 7)
    assert any("rank 1" in reason for reason in found.evidence)


def test_a_straggler_is_found_by_its_step_times_and_its_onset_is_the_step():
    lines = steps(range(4), 1, 20, slow=(3, 9, 4.0))
    found = diagnose(lines, end=AttemptEnd(cause="hang: no journal line for 300 s",
                                           exit_code=-15, last_step=20))
    assert (found.cause, found.rank, found.step) == ("hang", 3, 9)
    assert "straggler from step 9" in found.evidence[0]


def test_the_launchers_root_cause_names_the_rank_and_host():
    lines = steps(range(8), 1, 5) + [
        "E0501 12:00:00.000000 4100 torch/distributed/elastic/multiprocessing/api.py:869] "
        "failed (exitcode: -9) local_rank: 5 (pid: 4242) of binary: /usr/bin/python3",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "Root Cause (first observed failure):", "[0]:", "  time      : 2024-05-01_12:00:00",
        "  host      : node-1", "  rank      : 13 (local_rank: 5)",
        "  exitcode  : -9 (pid: 4242)", "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 4242",
    ]
    found = diagnose(lines, end=AttemptEnd(cause="exit 1", exit_code=1))
    assert (found.cause, found.rank, found.host) == ("signal", 13, "node-1")
    assert found.evidence == ("the launcher reports rank 13 failed first (exit code -9)",)


def test_no_rank_is_blamed_when_all_stop_alike():
    found = diagnose(steps(range(4), 1, 6),
                     end=AttemptEnd(cause="hang: no journal line for 300 s", last_step=6))
    assert (found.cause, found.rank, found.step) == ("hang", None, 6)


def test_references_discount_what_successful_runs_print_and_show_what_is_new():
    benign = "retrying download (attempt 1/5): Connection reset by peer"
    reference = Reference([LogLine(text=t, trial="ok-1") for t in steps(range(2), 1, 9)
                           + [f"[rank0]: {benign}"]])
    failed = steps(range(2), 1, 4) + [f"[rank0]: {benign}"] + steps(range(2), 5, 8) + [
        "[rank1]: RuntimeError: CUDA error: uncorrectable ECC error encountered"]
    found = diagnose(failed, reference)
    assert (found.cause, found.rank, found.step) == ("hardware", 1, 8)
    benign_suspect = next(s for s in found.suspects if "Connection reset" in s.text)
    assert benign_suspect.discounted and benign_suspect.new is False
    assert [t.example for t in found.new_templates] == [failed[-1]]
    assert found.first_new_step == 8 and found.references == 19
    assert reference.trials == {"ok-1"}
    # without references the retry is not known, but the run went on for 4 more steps
    alone = diagnose(failed[:-1])
    assert alone.cause is None and alone.suspects[0].discounted
    assert "training went on for 4 more printed steps" in alone.suspects[0].evidence[-1]


def test_nan_from_a_guard_event_and_a_metric_jump():
    metrics = [MetricPoint(step=s, name="loss", value=3 - s / 10) for s in range(1, 12)]
    metrics += [MetricPoint(step=12, name="loss", value=9.0),
                MetricPoint(step=13, name="loss", value=float("nan"))]
    events = [RunEvent(kind="guard.alert", message="loss is nan at step 13", step=13, rank=3,
                       data={"rule": "nonfinite.loss"})]
    found = diagnose(steps(range(4), 1, 12), events=events, metrics=metrics)
    assert (found.cause, found.rank, found.step) == ("nan", 3, 13)
    assert found.metric_jump == ("loss", 12)


def test_output_is_plain_data():
    found = diagnose(steps(range(2), 1, 3) + ["[rank1]: Killed"])
    assert json.loads(json.dumps(found.to_dict()))["cause"] == "signal"
    assert str(found).startswith("signal on rank 1 at step 3")


def test_invalid_input_is_refused_clearly():
    with pytest.raises(DiagnoseError, match="not one string"):
        diagnose("step 1\nstep 2")
    with pytest.raises(DiagnoseError, match="line 1 is int"):
        diagnose(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(DiagnoseError, match="end must be an AttemptEnd"):
        diagnose([], end="exit 1")  # type: ignore[arg-type]
    with pytest.raises(DiagnoseError, match=r"metrics\[0\] is dict"):
        diagnose([], metrics=[{"step": 1}])  # type: ignore[list-item]
    with pytest.raises(DiagnoseError, match="reference line 0 is int"):
        Reference([1])  # type: ignore[list-item]


def test_a_nan_starts_where_it_first_shows_and_the_quoted_exception_is_kept():
    lines = [f"step {s} | loss {3 - s / 10:.2f}" for s in range(1, 5)]
    lines += [f"step {s} | loss nan" for s in (5, 6)]
    lines += ["Traceback (most recent call last):",
              '  File "/home/ada/train.py", line 40, in <module>',
              "    raise FloatingPointError('loss is nan')",  # quoted code: not a suspect
              "FloatingPointError: loss is nan"]
    found = diagnose(lines, end=AttemptEnd(cause="exit 1: FloatingPointError: loss is nan",
                                           exit_code=1))
    assert (found.cause, found.step, found.phase) == ("nan", 5, "training")
    assert found.suspects[0].text == "FloatingPointError: loss is nan"  # the runner quotes it
    assert found.exception == "FloatingPointError: loss is nan"
    assert str(found.user_frame) == "/home/ada/train.py:40 in <module>"
    assert not any("raise" in s.text for s in found.suspects)
    assert any("first sign of NaN/Inf is at step 5" in e for e in found.evidence)


@pytest.mark.parametrize(("lines", "phase"), [
    (["loading the model", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"],
     "startup"),
    (["step 10 | loss 2.1", "saving checkpoint to /ckpt/step-10",
      "OSError: [Errno 28] No space left on device"], "checkpoint"),
    (["step 10 | loss 2.1", "running evaluation on 500 items",
      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"], "evaluation"),
])
def test_the_phase_comes_from_the_lines_around_the_failure(lines, phase):
    assert diagnose(lines).phase == phase
    assert diagnose(["step 1 | loss 2.0"]).phase is None  # no cause, no phase


def test_torchrun_tee_around_pytorchs_rank_prefix_is_one_prefix():
    # torchrun --tee 3 wraps what PyTorch >= 2.4 prefixes to an uncaught exception
    lines = steps(range(3), 1, 6) + [
        "[default1]:[rank1]: Traceback (most recent call last):",
        '[default1]:[rank1]:   File "/home/ada/ddp.py", line 20, in <module>',
        "[default1]:[rank1]: ValueError: batch 224 has no labels",
        "[default0]:[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553]"
        " Connection closed by peer [127.0.0.1]:20670",
    ]
    found = diagnose(lines, end=AttemptEnd(cause="exit 1", exit_code=1))
    assert (found.cause, found.rank, found.exception) == (
        "exception", 1, "ValueError: batch 224 has no labels")
    assert str(found.user_frame) == "/home/ada/ddp.py:20 in <module>"


def _torchrun_end(stuck, first, pids):
    """What torchrun prints after rank `first` failed and it stopped the rest (SIGTERM)."""
    out = [f"W1202 16:53:34.820000 31148 torch/distributed/elastic/multiprocessing/api.py:1028]"
           f" Sending process {pids[stuck]} closing signal SIGTERM",
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
           "Failures:", "[1]:", "  host      : localhost",
           f"  rank      : {stuck} (local_rank: {stuck})",
           f"  exitcode  : -15 (pid: {pids[stuck]})  (SIGTERM)",
           f"  traceback : Signal 15 (SIGTERM) received by PID {pids[stuck]}",
           "Root Cause (first observed failure):", "[0]:", "  host      : localhost",
           f"  rank      : {first} (local_rank: {first})",
           f"  exitcode  : 1 (pid: {pids[first]}) "]
    return out


def _gloo_timeout(rank):
    return (f"[default{rank}]:[rank{rank}]: RuntimeError: [/pytorch/third_party/gloo/gloo/"
            "transport/tcp/unbound_buffer.cc:78] Timed out waiting 15000ms for recv operation "
            "to complete")


def test_the_launchers_own_sigterms_do_not_hide_a_rank_that_hung():
    pids = {0: 31151, 1: 31152, 2: 31153}
    lines = [f"[default{r}]:step {s}/20 | loss 1.0 | 150.0 ms" for s in range(1, 7)
             for r in range(3)]
    lines += [_gloo_timeout(0), _gloo_timeout(2)] + _torchrun_end(1, 0, pids)
    found = diagnose(lines, end=AttemptEnd(cause="exit 1: ====", exit_code=1))
    assert (found.cause, found.rank, found.step) == ("collective_timeout", 1, 6)
    sigterm = [s for s in found.suspects if s.cause == "signal"]
    assert sigterm and all(s.discounted for s in sigterm)
    assert any("launcher sent process 31152" in e for s in sigterm for e in s.evidence)


def test_a_slow_rank_that_then_stalls_is_dated_by_everyones_slowdown():
    # synchronous data parallelism: one slow rank makes every rank's step slow
    lines = [f"[default{r}]:step {s}/20 | loss 1.0 | {150.0 if s < 7 else 950.0} ms"
             for s in range(1, 11) for r in range(3)]
    lines += [_gloo_timeout(0), _gloo_timeout(2)]
    found = diagnose(lines, end=AttemptEnd(cause="exit 1", exit_code=1))
    assert (found.cause, found.rank, found.step) == ("collective_timeout", 1, 7)
    assert any("rose 6.3x from step 7" in e for e in found.evidence)
