"""Each cause rule on a realistic snippet, and no cause on a clean log."""

import pytest

from labcoat.diagnose import AttemptEnd, LogLine, cause_of_end, diagnose, match_cause

CLEAN = [
    "*****************************************",
    "node-0:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 "
    "(errno: 98 - Address already in use).",
    "ProcessGroupNCCL initialized with following options: NCCL_ASYNC_ERROR_HANDLING: 1 "
    "TIMEOUT(ms): 1800000",
    "step 1/3 loss 3.1 lr 1e-4 (0.5s)",
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
    "step 2/3 loss 2.9 lr 1e-4 (1.0s)",
    "removed old checkpoint /ckpt/step_1.pt to save disk space",
    "step 3/3 loss 2.7 lr 1e-4 (1.5s)",
    "final exact_match 0.41 in 1.6s",
]
OOM_TRACE = [
    "Traceback (most recent call last):",
    '  File "/home/ada/train.py", line 30, in <module>',
    "    loss = model(x)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 1.12 GiB is free.",
]
SNIPPETS = {
    "out_of_memory": [
        OOM_TRACE,
        ["RuntimeError: [enforce fail at alloc_cpu.cpp:117] . DefaultCPUAllocator: can't "
         "allocate memory: you tried to allocate 8589934592 bytes."],
        ["MemoryError"],
        ["slurmstepd: error: Detected 1 oom_kill event in StepId=123.0. Some of the step tasks "
         "have been OOM Killed."],
        ["[12345.678] Out of memory: Killed process 4242 (python) total-vm:80000000kB"],
    ],
    "collective_timeout": [
        ["[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
         "timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)="
         "600000) ran for 600061 milliseconds before timing out."],
        ["RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by"
         " peer [10.0.0.2]:23456"],
        ["RuntimeError: [Rank 0]: Ranks 3 failed to pass monitoredBarrier in 30000 ms"],
        ["torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
         "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3"],
    ],
    "hardware": [
        ["RuntimeError: CUDA error: uncorrectable ECC error encountered"],
        ["NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."],
        ["[12345.6] NVRM: Xid (PCI:0000:86:00): 48, pid=99, An uncorrectable double bit error "
         "(DBE) has been detected on GPU in the framebuffer"],
    ],
    "nan": [
        ["step 57 | loss nan | grad_norm nan | lr 3.0e-04"],
        ["RuntimeError: Loss is NaN, stopping training"],
        ["FloatingPointError: loss is inf at step 12"],
        ["RuntimeError: Function 'LogBackward0' returned nan values in its 0th output."],
        ["tinylm: guard stopped the run at step 12: rule nonfinite.grad (critical): NaN/Inf "
         "gradient in blocks.0.mlp.up.weight"],
    ],
    "dataloader_worker": [
        ["RuntimeError: DataLoader worker (pid 12345) is killed by signal: Killed."],
        ["ERROR: Unexpected bus error encountered in worker. This might be caused by "
         "insufficient shared memory (shm)."],
        ["RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly"],
    ],
    "disk_full": [
        ["OSError: [Errno 28] No space left on device: '/ckpt/step_500.pt'"],
        ["RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed "
         "writing file data/42: file write failed"],
        ["OSError: [Errno 122] Disk quota exceeded"],
    ],
    "signal": [
        ["Killed"],
        ["srun: error: node-3: task 5: Killed"],
        ["  traceback : Signal 9 (SIGKILL) received by PID 4242"],
        ["slurmstepd: error: *** STEP 1234.0 ON node-1 CANCELLED AT 2024-05-01T12:00:00 ***"],
        ["Fatal Python error: Segmentation fault"],
    ],
    "exception": [
        ["Traceback (most recent call last):", '  File "/home/ada/data.py", line 12, in collate',
         "    ids = [ex['input_ids'] for ex in batch]", "KeyError: 'input_ids'"],
    ],
}
CASES = [(cause, lines) for cause, examples in SNIPPETS.items() for lines in examples]


@pytest.mark.parametrize(("cause", "snippet"), CASES,
                         ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_each_cause_rule_on_a_realistic_snippet(cause, snippet):
    found = diagnose(CLEAN[:5] + snippet)
    assert found.cause == cause, found
    assert found.suspects[0].cause == cause


def test_no_cause_on_a_clean_log():
    found = diagnose(CLEAN, end=AttemptEnd(cause="exit 0", exit_code=0))
    assert found.cause is None and found.suspects == ()
    assert "no cause found" in found.summary


def test_a_launcher_terminating_healthy_ranks_is_not_a_cause():
    line = ("W0501 12:00:00.000000 4100 torch/distributed/elastic/multiprocessing/api.py:897] "
            "Sending process 4242 closing signal SIGTERM")
    assert match_cause(line) is None


def test_the_most_specific_rule_wins_on_a_line():
    hit = match_cause("RuntimeError: DataLoader worker (pid 7) is killed by signal: Killed.")
    assert hit.cause == "dataloader_worker"
    hit = match_cause("NCCL WARN Cuda failure 'uncorrectable ECC error encountered'")
    assert hit.cause == "hardware"


@pytest.mark.parametrize(
    ("cause", "code", "expected"),
    [
        ("hang: no journal line for 300 s", -15, "hang"),
        ("killed by signal SIGKILL", -9, "signal"),
        ("exit 137", 137, "signal"),
        ("exit 143: Terminated", 143, "signal"),
        ("exit 1: torch.OutOfMemoryError: CUDA out of memory.", 1, "out_of_memory"),
        ("exit 1: ValueError: bad", 1, None),
        ("exit 0", 0, None),
        ("interrupted (labcoat run was stopped)", None, None),
        (None, None, None),
    ],
)
def test_how_the_attempt_ended(cause, code, expected):
    hit = cause_of_end(cause, code)
    assert (hit.cause if hit else None) == expected


def test_user_code_frame_is_reported_for_an_exception():
    found = diagnose([LogLine(text=t, stream="stderr") for t in SNIPPETS["exception"][0]])
    assert found.exception == "KeyError: 'input_ids'"
    assert str(found.user_frame) == "/home/ada/data.py:12 in collate"
