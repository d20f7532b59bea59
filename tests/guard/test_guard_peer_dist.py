"""Distributed bug classes of TrainCheck's list (benchmarks/traincheck_dist.py) on 2 gloo ranks.

Each rank runs this file as a script: small DDP loops under ``watch()`` defaults,
each bug next to its clean twin, in one process group. A lost gradient transfer,
a garbled initial broadcast, weights lost when loaded onto a rank, DDP's hooks
lost after a dtype round trip, a model run sometimes without its DDP wrapper, a
rank resumed at another step, and a rank that skips one optimizer step. The test
reads each rank's alerts back from a JSON file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 12
FAULT = 3  # not a distributed check step: the damage is seen at the check at step 10


def _lost_gradient(bug: bool, rank: int, model: nn.Module) -> dict[str, Any]:
    ddp = DDP(model)
    state = {"step": 0}

    def hook(_, bucket):  # type: ignore[no-untyped-def]  # DDP rejects string annotations
        buf = bucket.buffer()
        own = buf.clone()
        dist.all_reduce(buf)
        if bug and rank == 1 and state["step"] == FAULT:
            buf.copy_(own)  # the peer's bucket arrived as zeros
        fut = torch.futures.Future()
        fut.set_result(buf.div_(2))
        return fut

    ddp.register_comm_hook(None, hook)
    return {"forward": lambda step: ddp, "before": lambda step: state.update(step=step)}


def _garbled_broadcast(bug: bool, rank: int, model: nn.Module) -> dict[str, Any]:
    weight = model[0].weight
    own = weight.detach().clone()
    ddp = DDP(model)
    if bug and rank == 1:
        with torch.no_grad():
            weight.copy_(own)  # rank 0's copy never landed: stale destination memory
    return {"forward": lambda step: ddp}


def _lost_weights(bug: bool, rank: int, model: nn.Module) -> dict[str, Any]:
    ddp = DDP(model)

    def before(step: int) -> None:
        if step == FAULT:  # re-load every replica from rank 0
            for p in model.parameters():
                dist.broadcast(p.data, src=0)
            if bug and rank == 1:
                model[2].weight.data.zero_()  # one received tensor lost
    return {"forward": lambda step: ddp, "before": before}


def _cast_round_trip(bug: bool, rank: int, model: nn.Module) -> dict[str, Any]:
    ddp = DDP(model)

    def before(step: int) -> None:
        if bug and step == FAULT:
            ddp.double()  # new parameter data: DDP's gradient hooks are left behind
            ddp.float()
    return {"forward": lambda step: ddp, "before": before}


def _wrapped_sometimes(bug: bool, rank: int, model: nn.Module) -> dict[str, Any]:
    ddp = DDP(model)
    return {"forward": lambda step: (model if bug and step % 2 else DDP(model) if bug else ddp)}


def _other_start(bug: bool, rank: int, model: nn.Module) -> dict[str, Any]:
    ddp = DDP(model)  # rank 1 resumed from the checkpoint of step 10, rank 0 from scratch
    return {"forward": lambda step: ddp, "start_step": 10 if bug and rank == 1 else 0}


def _skipped_step(bug: bool, rank: int, model: nn.Module) -> dict[str, Any]:
    ddp = DDP(model)
    return {"forward": lambda step: ddp, "skip": lambda step: bug and rank == 1 and step == FAULT}


SCENARIOS: dict[str, Callable[[bool, int, nn.Module], dict[str, Any]]] = {
    "lost_gradient": _lost_gradient, "garbled_broadcast": _garbled_broadcast,
    "lost_weights": _lost_weights, "cast_round_trip": _cast_round_trip,
    "wrapped_sometimes": _wrapped_sometimes, "other_start": _other_start,
    "skipped_step": _skipped_step,
}


def _run(scenario: Callable[..., dict[str, Any]], bug: bool, rank: int) -> list[dict[str, Any]]:
    from labcoat.torch import watch

    torch.manual_seed(rank)  # replicas start apart: DDP's broadcast makes them equal
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    setup = scenario(bug, rank, model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = watch(model, opt, start_step=setup.get("start_step", 0))
    data = torch.Generator().manual_seed(100 + rank)  # each rank its own shard
    for step in range(1, STEPS + 1):
        setup.get("before", lambda s: None)(step)
        x, y = torch.randn(16, 8, generator=data), torch.randint(0, 3, (16,), generator=data)
        loss = F.cross_entropy(setup["forward"](step)(x), y)
        opt.zero_grad()
        loss.backward()
        if not setup.get("skip", lambda s: False)(step):
            opt.step()
        guard.record(loss=loss.item(), batch=(x, y))
    guard.close()
    return [{"step": a.step, "rule": a.rule, "evidence": a.evidence} for a in guard.alerts]


def worker(rank: int, world: int, port: int, out: Path) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    results = {}
    for name, scenario in SCENARIOS.items():
        for bug in (True, False):
            results[f"{name}/{'bug' if bug else 'clean'}"] = _run(scenario, bug, rank)
            dist.barrier()
    out.write_text(json.dumps(results), encoding="utf-8")
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # a gloo thread still joinable at interpreter teardown aborts in C++


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_distributed_bug_classes_two_ranks_gloo(tmp_path: Path) -> None:
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, __file__, str(rank), "2", str(port),
                               str(tmp_path / f"rank{rank}.json")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
             for rank in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    expected = {  # scenario -> (rule, step it is first seen at) on every rank
        "lost_gradient": ("dist.param_drift", 10),
        "garbled_broadcast": ("dist.param_drift", 1),  # the first-step comparison
        "lost_weights": ("dist.param_drift", 10),
        "cast_round_trip": ("dist.grad_unsynced", 10),
        "wrapped_sometimes": ("dist.grad_unsynced", 1),
        "other_start": ("dist.step_mismatch", 1),  # rank 1 counts from 11
        "skipped_step": ("dist.batch_mismatch", 10),
    }
    for rank, results in enumerate(ranks):
        for name, (rule, step) in expected.items():
            assert results[f"{name}/clean"] == [], (rank, name, results[f"{name}/clean"])
            steps = [a["step"] for a in results[f"{name}/bug"] if a["rule"] == rule]
            if name == "other_start" and rank == 1:
                step += 10
            assert steps and steps[0] == step, (rank, name, results[f"{name}/bug"])
    skipped = [a for a in ranks[0]["skipped_step/bug"] if a["rule"] == "dist.batch_mismatch"]
    assert skipped[0]["evidence"]["values"] == [9, 10]  # backward passes since the step-1 check
    assert skipped[0]["evidence"]["odd_ranks"] == []  # two ranks: no majority to blame


if __name__ == "__main__":
    worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
