"""Generic masking: variable parts become typed placeholders; words stay."""

import pytest

from labcoat.diagnose import mask
from labcoat.diagnose._masking import strip_header


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        ("step 12/300 loss 2.31 lr 1.96e-02", "step <NUM>/<NUM> loss <NUM> lr <NUM>"),
        ("[rank3]: step 5", "[rank<RANK>]: step <NUM>"),
        ("[default7]:loss=2.5", "[default<RANK>]:loss=<NUM>"),
        ("rank 3 and Rank: 12 and local_rank=2", "rank <RANK> and Rank: <RANK> and "
         "local_rank=<RANK>"),
        ("took 450ms, then 12.3s and 3 min", "took <DUR>, then <DUR> and <DUR>"),
        ("ran for 600061 milliseconds", "ran for <DUR>"),
        ("allocate 2.00 GiB of 1.5GB, 2048 MiB, 512 bytes", "allocate <SIZE> of <SIZE>, <SIZE>, "
         "<SIZE>"),
        ("src: /10.250.19.102:54106 dest: 10.0.0.1", "src: /<IP> dest: <IP>"),
        ("saved /ckpt/run-3/step_500.pt and ~/x/y and ./a/b", "saved <PATH> and <PATH> and "
         "<PATH>"),
        ("and/or 3/30 tokens/s", "and/or <NUM>/<NUM> tokens/s"),
        ("at 0x7f3a2b1c mac 00:1a:2b:3c:4d:5e", "at <HEX> mac <HEX>"),
        ("id 123e4567-e89b-12d3-a456-426614174000", "id <UUID>"),
        ("2024-05-01 12:00:01,123 INFO start", "<TS> <TS> INFO start"),
        ("2024-05-01T12:00:01.5Z done", "<TS> done"),
        ("see https://pytorch.org/docs/stable/x.html#y", "see <URL>"),
        ("block blk_-1608999687919862906 on R02-M1-N0-C:J12-U11", "block <ID> on <ID>:<ID>"),
        ("exitcode  : -9 (pid: 1234)", "exitcode : <NUM> (pid: <NUM>)"),
        ("no numbers here", "no numbers here"),
    ],
)
def test_masks_variable_parts_and_keeps_words(line, masked):
    assert mask(line) == masked


def test_masking_is_idempotent():
    for line in ("[rank3]: step 12/300 loss 2.31 (450ms) saved /ckpt/step_12.pt 1.5GB",
                 "Received block blk_-1 of size 67108864 from /10.251.42.84"):
        assert mask(mask(line)) == mask(line)


def test_lines_from_different_ranks_mask_alike():
    assert mask("[rank0]: Watchdog caught collective operation timeout after 600000 ms") == \
        mask("[rank6]: Watchdog caught collective operation timeout after 600012 ms")


def test_mask_rejects_non_text():
    with pytest.raises(TypeError, match="str"):
        mask(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("line", "content"),
    [
        ("2024-05-01 12:00:01,123 - train - INFO - Saving checkpoint to /x/y.pt",
         "Saving checkpoint to <PATH>"),
        ("081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 terminating",
         "PacketResponder <NUM> terminating"),
        ("Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user admin from 1.2.3.4",
         "Invalid user admin from <IP>"),
        ("I0501 12:00:01.123456 140234 train.py:123] Saving checkpoint", "Saving checkpoint"),
        ("INFO:root:Loading dataset c4", "Loading dataset <ID>"),
        ("2024-05-01 12:00:01.123 | INFO     | train:main:42 - step 5", "step <NUM>"),
        # no timestamp or level: nothing is a header
        ("[rank3]: step 5 loss 2.3", "[rank<RANK>]: step <NUM> loss <NUM>"),
        ("  lr: 3e-4", "lr: <NUM>"),
        ("CUDA out of memory. Tried to allocate 2 GiB", "CUDA out of memory. Tried to allocate "
         "<SIZE>"),
    ],
)
def test_headers_are_stripped_generically(line, content):
    assert strip_header(mask(line)) == content
