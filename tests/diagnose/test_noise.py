"""Known noise is flagged (to hide), never what explains a failure."""

import pytest

from labcoat.diagnose import DiagnoseError, is_noise

NOISE = [
    "",
    "*****************************************",
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
    "avoid your system being overloaded",
    " 45%|████▌     | 9/20 [00:01<00:02,  5.10it/s]",
    "Loading checkpoint shards:  50%|█████     | 1/2 [00:01<00:01,  1.1s/it]\r"
    "Loading checkpoint shards: 100%|██████████| 2/2 [00:02<00:00,  1.0s/it]",
    "12/100 [==>...........................] - ETA: 3s - loss: 0.2",
    "/usr/lib/python3/site-packages/torch/x.py:120: FutureWarning: `foo` is deprecated.",
    "/x/y.py:3: UserWarning: TypedStorage is deprecated. It will be removed in the future",
    "node-0:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "Requirement already satisfied: numpy in ./venv/lib/python3.11/site-packages (1.26.4)",
    "[notice] A new release of pip is available: 23.0 -> 24.0",
    "Some weights of GPT2Model were not initialized from the model checkpoint",
    "GPU available: True (cuda), used: True",
    "wandb: Tracking run with wandb version 0.16.0",
    "[default3]:node-0:1234:1234 [3] NCCL INFO Using network IB",
]
SIGNAL = [
    "step 3/30 loss 3.6809 lr 1.96e-02 (2.3s)",
    "progress 100%",
    "WARNING: learning rate is high",
    "/x/y.py:3: UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "node-0:1234:1234 [0] NCCL INFO Call to connect returned Connection timed out, retrying",
    "node-0:1234:1300 [3] NCCL WARN NET/IB : Got completion from peer with error 12",
    "wandb: ERROR Run initialization has timed out",
    "Traceback (most recent call last):",
    '  File "/x/train.py", line 3, in <module>',
]


@pytest.mark.parametrize("line", NOISE)
def test_known_noise_is_flagged(line):
    assert is_noise([line]) == [True]


@pytest.mark.parametrize("line", SIGNAL)
def test_signal_is_not_noise(line):
    assert is_noise([line]) == [False]


def test_the_source_line_under_a_noisy_warning_is_noise_too():
    lines = ["/x/amp.py:12: FutureWarning: `GradScaler` is deprecated.", "  warnings.warn(",
             "/x/y.py:3: UserWarning: grad strides do not match bucket view strides",
             "  return Variable._execution_engine.run_backward(", "step 1 loss 2.0"]
    assert is_noise(lines) == [True, True, False, False, False]


def test_one_flag_per_line_and_bad_input_refused():
    assert is_noise([]) == []
    with pytest.raises(DiagnoseError, match="is_noise\\(\\[line\\]\\)\\[0\\]"):
        is_noise("one line")
    with pytest.raises(DiagnoseError, match="line 1 is bytes"):
        is_noise(["ok", b"x"])  # type: ignore[list-item]
