"""Two ranks (real torchrun, DDP over gloo), the last one's data loading 15 ms slower from
step 300: the alarm names rank 1's data phase as the cause, and rank 0's all-reduce wait
as waiting for rank 1, never as a cause. Read from both ranks' journals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from labcoat.monitor import find_slow_steps

pytest.importorskip("torch")


@pytest.mark.slow  # a torchrun group training tinylm for 330 steps
def test_a_slow_rank_is_named_not_the_rank_that_waits_for_it(tmp_path):
    env = dict(os.environ, LABCOAT_HOME=str(tmp_path), OMP_NUM_THREADS="1")
    for var in ("LABCOAT_JOURNAL", "LABCOAT_TRIAL", "LABCOAT_EXPERIMENT", "LABCOAT_DB"):
        env.pop(var, None)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         "2", "-m", "labcoat.workloads.tinylm", "--width", "16", "--depth", "1", "--heads",
         "2", "--batch-size", "8", "--eval-every", "0", "--eval-items", "3", "--tasks",
         "copy,reverse", "--threads", "1", "--steps", "330", "--fault", "slow_data",
         "--fault-step", "300"], env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    times: dict[int, dict[str, dict[int, float]]] = {}
    journals = list(tmp_path.rglob("journal*.jsonl"))
    assert len(journals) == 2
    for journal in journals:
        for line in journal.read_text().splitlines():
            record = json.loads(line)
            if record["kind"] == "phases":
                for name, seconds in record["s"].items():
                    times.setdefault(record.get("rank", 0), {}).setdefault(name, {})[
                        record["step"]] = seconds
    alarms = find_slow_steps(times)
    said = [a.message() for a in alarms]
    # the planted slowdown: rank 1's data phase, found within 20 steps
    cause = next((a for a in alarms if (a.phase, a.rank) == ("data", 1)), None)
    assert cause is not None and cause.cause, said
    assert 290 <= cause.step <= 300 and cause.detected < 320, said
    # from the fault on, rank 0 is never named for compute: its wait is put on rank 1 (or a
    # slowdown is the busy machine's, which its wait for a CPU explains)
    late = [a for a in alarms if a.step >= 285 and a is not cause]
    assert all((a.wait and (a.rank == 1 or a.waits_for == 1)) or a.busy is not None
               for a in late), said
    # rank 0 is never named for the planted phase. Earlier alarms are the machine's: another
    # test sharing the two cores slowed one rank's all-reduce (CI, step 21) or backward
    # (1.6 -> 6.4 ms from step 227), a real slowdown this run cannot tell from a finding
    assert not [a for a in alarms if (a.rank, a.phase) == (0, "data")], said
