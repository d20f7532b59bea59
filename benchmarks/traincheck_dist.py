"""Peer benchmark, distributed ids: TrainCheck's data-parallel bugs on 2 gloo ranks (CPU).

    .venv/bin/python benchmarks/traincheck_dist.py [--seeds 10] [--quick]

The five distributed ids of OrderLab's TrainCheck-Evaluation-Workloads
(silent-issue-detection/README.md), each re-expressed as one small
data-parallel loop (``DistributedDataParallel`` on a 2-rank gloo group, an
MLP, AdamW, each rank its own data shard) with the bug switched on, and its
clean twin (same loop, bug removed) for false alarms.
The guard runs with ``watch(model, optimizer)`` defaults on the inner module
plus ``guard.record(loss, batch)``; nothing is declared. Two processes run every
case, seed and twin in one process group (process start-up, not the loops,
would otherwise take the time). A run is caught when either rank alerts;
latency is the first alert's step minus the first step the bug can show.

`run(seeds)` returns one dict per id (see its doc) for `traincheck_bugs.py`.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _harness as bench
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 40  # per run; mid-run faults land in [FAULT_FIRST, FAULT_LAST]
FAULT_FIRST, FAULT_LAST = 6, 25
WORLD = 2


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


class Loop:
    """One rank's side of one case: the module the guard watches, its optimizer, and what
    the loop calls each step (``forward_model(step)``: the module the forward goes through;
    ``before(step)``: the case's action at the start of a step)."""

    def __init__(self, model: nn.Module, opt: torch.optim.Optimizer,
                 forward_model: Callable[[int], nn.Module],
                 before: Callable[[int], None] = lambda step: None) -> None:
        self.model, self.opt = model, opt
        self.forward_model, self.before = forward_model, before


def _fault_step(seed: int) -> int:
    return random.Random(seed).randint(FAULT_FIRST, FAULT_LAST)


# --- the cases: (bug, seed, rank) -> Loop; onset(seed) = the first step the bug can show ---

def _lost_gradient(bug: bool, seed: int, rank: int) -> Loop:
    """pytorch-84803 (tensor.to() between two RTX 4090s returns zeros: P2P transfers lose
    data under PCIe ACS/IOMMU). Same mechanism, re-expressed: TrainCheck's reproduction
    zeroes a communicated tensor with 1% probability (monkey-patched ``dist.all_reduce``,
    ``Tensor.to``...); here DDP's gradient all-reduce runs through a communication hook
    and, once, at a seeded step in [6, 25], the bucket rank 1 receives from rank 0 arrives
    as zeros, so rank 1 averages its own gradient with zeros while rank 0 averages both.
    One transfer per seed (not 1%), so every seed has a fault. Clean twin: the same hook,
    nothing lost."""
    torch.manual_seed(seed + 1000 * rank)  # DDP's broadcast makes the replicas equal
    model = _mlp()
    ddp = DDP(model)
    fault = _fault_step(seed)
    state = {"step": 0}

    def hook(_, bucket):  # type: ignore[no-untyped-def]  # DDP rejects string annotations
        buf = bucket.buffer()
        own = buf.clone()
        dist.all_reduce(buf)
        if bug and rank == 1 and state["step"] == fault:
            buf.copy_(own)  # the peer's contribution arrived as zeros: own + 0
        buf.div_(WORLD)
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(buf)
        return fut

    ddp.register_comm_hook(None, hook)

    def before(step: int) -> None:
        state["step"] = step
    return Loop(model, torch.optim.AdamW(model.parameters(), lr=1e-2), lambda s: ddp, before)


def _garbled_broadcast(bug: bool, seed: int, rank: int) -> Loop:
    """pytorch-96600 (on RTX 4090s a tensor moved between devices arrives with wrong,
    plausible-looking values; "the data parallel approach" replicates the model across
    devices this way). Same mechanism, re-expressed: the replication is DDP's construction
    broadcast of rank 0's weights (the replicas start from different seeds); on rank 1 the
    copy of one seeded weight tensor never lands, so it keeps the destination's previous
    content (its own initialization: finite, the right scale, wrong). Injected by wrapping
    ``dist._broadcast_coalesced`` during construction, the way TrainCheck monkey-patches
    the primitives. The bug is there before step 1 (onset 1). Clean twin: the same wrapper,
    every copy lands."""
    torch.manual_seed(seed + 1000 * rank)
    model = _mlp()
    params = list(model.parameters())
    lost = random.Random(seed).randrange(len(params))
    original = dist._broadcast_coalesced

    def lossy(group: Any, tensors: list[torch.Tensor], *args: Any) -> None:
        before = [t.clone() for t in tensors]
        original(group, tensors, *args)
        if bug and rank == 1:
            tensors[lost].copy_(before[lost])  # stale destination memory, not the payload

    dist._broadcast_coalesced = lossy
    try:
        ddp = DDP(model, broadcast_buffers=False)
    finally:
        dist._broadcast_coalesced = original
    return Loop(model, torch.optim.AdamW(model.parameters(), lr=1e-2), lambda s: ddp)


def _lost_weights(bug: bool, seed: int, rank: int) -> Loop:
    """baichuan2-86 (a model loaded onto two cards answers nonsense and raises inf/NaN:
    the same P2P data loss as pytorch-84803, seen on weights crossing cards rather than
    gradients; TrainCheck reproduces it with pytorch-84803's fault injection). Same
    mechanism, re-expressed where data-parallel training loads weights onto the other
    rank mid-run: at a seeded step in [6, 25] the loop re-loads the replicas from rank 0
    (``dist.broadcast`` of every parameter, as Horovod's ``broadcast_parameters`` does
    after rank 0 restores a checkpoint), and the copy of one seeded weight tensor that
    rank 1 receives is zeroed (as TrainCheck's monkey-patches zero a communicated tensor),
    so rank 1 trains a different model from then on. Clean twin: the same re-load,
    nothing lost. (A ``ZeroRedundancyOptimizer``, whose step broadcasts each rank's shard,
    was the first choice; its clean run trips ``update.param_unchanged``: gloo writes the
    received shards without bumping version counters.)"""
    torch.manual_seed(seed + 1000 * rank)
    model = _mlp()
    ddp = DDP(model)
    params = list(model.parameters())
    fault = _fault_step(seed)
    lost = random.Random(seed).randrange(len(params))

    def before(step: int) -> None:
        if step != fault:
            return
        with torch.no_grad():
            for i, p in enumerate(params):
                dist.broadcast(p.data, src=0)
                if bug and rank == 1 and i == lost:
                    p.data.zero_()  # the payload did not survive the link
    return Loop(model, torch.optim.AdamW(model.parameters(), lr=1e-2), lambda s: ddp, before)


def _cast_round_trip(bug: bool, seed: int, rank: int) -> Loop:
    """pytorch-104336 (``ddp_model.cpu(); ddp_model.cuda()`` silently stops DDP's gradient
    all-reduce). Same mechanism, re-expressed on CPU: the round trip gives every parameter
    data of another type, which resets its gradient accumulator, where DDP's reducer hooks
    live; on CPU a dtype round trip (``double()`` then ``float()``, e.g. a temporary fp64
    evaluation) does the same. At a seeded step in [6, 25] the DDP-wrapped model makes the
    round trip; from then on each rank trains on its own gradients. Clean twin: no round
    trip (TrainCheck's ``move_model_to_cpu_and_back=False``). The upstream fix 1 (the round
    trip, then a new DDP) is not the twin: the round trip writes every weight outside the
    optimizer step, which ``update.outside_step`` (version accounting) reports by design."""
    torch.manual_seed(seed + 1000 * rank)
    model = _mlp()
    ddp = DDP(model)
    fault = _fault_step(seed)

    def before(step: int) -> None:
        if bug and step == fault:
            ddp.double()
            ddp.float()
    return Loop(model, torch.optim.AdamW(model.parameters(), lr=1e-2),
                lambda s: ddp, before)


def _wrapped_sometimes(bug: bool, seed: int, rank: int) -> Loop:
    """x-jxmnop-ddp-out-of-sync (a trainer that runs the model sometimes as the bare
    ``nn.Module``, sometimes wrapped in a new ``DistributedDataParallel``). Faithful to
    TrainCheck's ``bug_short.py`` minus Hugging Face: replicas start equal (a pretrained
    model, here one seed), and step s forwards through ``model`` when s-1 is even and
    through a fresh ``DDP(model)`` otherwise, AdamW, so every other step's gradients are
    rank-local (and each new DDP re-broadcasts rank 0's weights over the drift). The bug
    shows from step 1. Clean twin: one DDP wrapper for every step."""
    torch.manual_seed(seed)
    model = _mlp()
    ddp = None if bug else DDP(model)

    def forward_model(step: int) -> nn.Module:
        if ddp is not None:
            return ddp
        return model if (step - 1) % 2 == 0 else DDP(model)
    return Loop(model, torch.optim.AdamW(model.parameters(), lr=1e-2), forward_model)


CASES: dict[str, Callable[[bool, int, int], Loop]] = {
    "pytorch-84803 (gradient transfer lost)": _lost_gradient,
    "pytorch-96600 (weight broadcast garbled)": _garbled_broadcast,
    "baichuan2-86 (weights loaded onto rank 1 lost)": _lost_weights,
    "pytorch-104336 (DDP hooks lost)": _cast_round_trip,
    "x-jxmnop-ddp-out-of-sync": _wrapped_sometimes,
}
ONSETS: dict[Callable[..., Loop], Callable[[int], int]] = {
    _lost_gradient: _fault_step, _lost_weights: _fault_step, _cast_round_trip: _fault_step,
    _garbled_broadcast: lambda s: 1, _wrapped_sometimes: lambda s: 1,
}


def run_case(case: Callable[[bool, int, int], Loop], bug: bool, seed: int,
             rank: int) -> list[tuple[int, str]]:
    """One rank's side of one run: its alerts as (step, rule)."""
    from labcoat.torch import watch

    loop = case(bug, seed, rank)
    guard = watch(loop.model, loop.opt)
    data = torch.Generator().manual_seed(10_000 * seed + rank)  # each rank its own shard
    try:
        for step in range(1, STEPS + 1):
            loop.before(step)
            loop.model.train()
            x, y = torch.randn(32, 16, generator=data), torch.randint(0, 4, (32,), generator=data)
            loss = F.cross_entropy(loop.forward_model(step)(x), y)
            loop.opt.zero_grad()
            loss.backward()
            loop.opt.step()
            guard.record(loss=loss.item(), batch=(x, y))
            if step % 10 == 0:
                loop.model.eval()
                with torch.no_grad():
                    loop.model(x)
    finally:
        guard.close()
    return [(a.step, a.rule) for a in guard.alerts]


def _worker(rank: int, port: int, seeds: int, out: Path) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=120))
    results = []
    for name, case in CASES.items():
        for seed in range(seeds):
            for bug in (True, False):
                alerts = run_case(case, bug, seed, rank)
                results.append({"id": name, "seed": seed, "bug": bug, "alerts": alerts})
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


def run(seeds: int) -> list[dict[str, Any]]:
    """Every case over `seeds` seeds, bug and clean twin, on 2 spawned gloo ranks.

    Returns one dict per id: ``id``, ``seeds``, ``caught`` (bug runs with an alert on
    either rank), ``rules`` (first-alert rules of the bug runs), ``latency`` (worst first
    alert step minus onset over caught seeds, None if none), ``false_alarms`` (clean runs
    with any alert) and ``clean_rules``.
    """
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        outs = [Path(tmp) / f"rank{r}.json" for r in range(WORLD)]
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), str(port),
                                   str(seeds), str(outs[r])],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "OMP_NUM_THREADS": "1"})
                 for r in range(WORLD)]
        for proc in procs:
            _, err = proc.communicate(timeout=1800)
            if proc.returncode != 0:
                raise RuntimeError(f"a rank failed (exit {proc.returncode}):\n{err[-4000:]}")
        ranks = [json.loads(o.read_text(encoding="utf-8")) for o in outs]
    rows = []
    for name, case in CASES.items():
        runs = [[r for r in ranks[k] if r["id"] == name] for k in range(WORLD)]
        caught, rules, lat, fa, clean_rules = 0, set(), [], 0, set()
        for per_rank in zip(*runs, strict=True):
            alerts = sorted(a for r in per_rank for a in r["alerts"])
            if per_rank[0]["bug"]:
                if alerts:
                    caught += 1
                    rules.add(alerts[0][1])
                    lat.append(alerts[0][0] - ONSETS[case](per_rank[0]["seed"]))
            elif alerts:
                fa += 1
                clean_rules.update(a[1] for a in alerts)
        rows.append({"id": name, "seeds": seeds, "caught": caught, "rules": sorted(rules),
                     "latency": max(lat) if lat else None, "false_alarms": fa,
                     "clean_rules": sorted(clean_rules)})
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
        return
    parser = bench.parser(__doc__)
    parser.add_argument("--seeds", type=int, default=10)
    args = bench.shrink(parser.parse_args(), seeds=1)
    rows = run(args.seeds)
    print(f"{'id':42} {'caught':>7} {'rule':24} {'latency':>8} {'false alarms':>13}")
    for r in rows:
        print(f"{r['id']:42} {r['caught']:>3}/{r['seeds']:<3} {','.join(r['rules']) or '-':24} "
              f"{'-' if r['latency'] is None else r['latency']!s:>8} "
              f"{r['false_alarms']:>6}/{r['seeds']}"
              + (f"  ({','.join(r['clean_rules'])})" if r["clean_rules"] else ""))
    bench.save(args, {"seeds": args.seeds, "rows": rows})


if __name__ == "__main__":
    main()
