"""The distributed checks with a real 2-rank gloo group on CPU (two processes).

Each rank runs this file as a script: a data-parallel loop (gradients
all-reduced by hand, different data per rank) under the guard, through four
scenarios in one process group: clean, a replica whose update drifts, a step
whose gradients are not synchronized, and a straggling rank. The test reads
each rank's alerts back from a JSON file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

SCENARIOS = ("clean", "drift", "unsynced", "straggler", "jitter")
STEPS = 10
ONSET = 5


def worker(rank: int, world: int, port: int, out: Path) -> None:
    from labcoat.torch import watch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    results: dict[str, Any] = {}
    for scenario in SCENARIOS:
        torch.manual_seed(0)  # identical replicas
        model = nn.Sequential(nn.Embedding(20, 16), nn.ReLU(), nn.Linear(16, 20))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        guard = watch(model, opt, check_every=1, distributed_every=1)
        data = torch.Generator().manual_seed(100 + rank)  # each rank its own shard
        for step in range(1, STEPS + 1):
            if scenario == "straggler" and rank == 1:
                time.sleep(0.1)  # e.g. a slow data loader on one host (far above load noise)
            if scenario == "jitter" and rank == 1:
                time.sleep(0.005)  # many times a ~1 ms step, but under the 20 ms floor: noise
            seq = torch.randint(0, 20, (8, 8), generator=data)
            loss = F.cross_entropy(model(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten())
            opt.zero_grad()
            loss.backward()
            if not (scenario == "unsynced" and step == ONSET):  # the all-reduce forgotten once
                for p in model.parameters():
                    dist.all_reduce(p.grad)
                    p.grad /= world
            drift = scenario == "drift" and step == ONSET and rank == 1
            if drift:  # a rank-local bug: this replica steps with another lr once
                opt.param_groups[0]["lr"] = 0.2
            opt.step()
            opt.param_groups[0]["lr"] = 0.1
        guard.close()
        results[scenario] = [{"step": a.step, "rule": a.rule, "evidence": a.evidence}
                             for a in guard.alerts]
        dist.barrier()
    out.write_text(json.dumps(results), encoding="utf-8")
    dist.barrier()
    dist.destroy_process_group()
    # Under CI load a gloo thread can still be joinable when the interpreter tears
    # down, and C++ aborts ("terminate called without an active exception") after
    # the results are written: leave without running destructors.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_replicas_two_ranks_gloo(tmp_path: Path) -> None:
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, __file__, str(rank), "2", str(port),
                               str(tmp_path / f"rank{rank}.json")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
             for rank in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for rank, results in enumerate(ranks):
        assert results["clean"] == [], (rank, results["clean"])
        assert results["jitter"] == [], (rank, results["jitter"])
        drift = [a for a in results["drift"] if a["rule"] == "dist.param_drift"]
        assert [a["step"] for a in drift] == [ONSET + 1], results["drift"]
        assert {a["rule"] for a in results["drift"]} == {"dist.param_drift"}
        assert drift[0]["evidence"]["params"] == ["0.weight", "2.weight", "2.bias"]
        unsynced = results["unsynced"]
        assert unsynced[0]["rule"] == "dist.grad_unsynced" and unsynced[0]["step"] == ONSET
        straggler = [a for a in results["straggler"] if a["rule"] == "dist.straggler"]
        # the first 2 checks are warm-up, then a median over 5 checks
        assert straggler and straggler[0]["step"] == 7 and straggler[0]["evidence"]["rank"] == 1
        assert {a["rule"] for a in results["straggler"]} == {"dist.straggler"}


if __name__ == "__main__":
    worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
