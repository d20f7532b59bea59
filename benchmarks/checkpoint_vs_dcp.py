"""Training stall and time until durable: labcoat's Checkpointer vs PyTorch DCP.

The same model (an MLP of ``--depth`` Linear layers of ``--width``) with its
AdamW state after real optimizer steps is saved every ``--gap`` training steps
by three arms, interleaved in rounds in one process:

* ``labcoat``: ``Checkpointer`` with its asynchronous default (copy to CPU,
  background write, fsync, read-back SHA-256 manifest: verified on restore);
* ``dcp-async``: ``torch.distributed.checkpoint.async_save`` (gloo process
  group of world size 1, FileSystemWriter, which fsyncs; no hashes);
* ``dcp-save``: ``torch.distributed.checkpoint.save`` (synchronous).

Stall = time the training loop is blocked in the save call plus any wait for
the previous save before the next one (DCP: ``future.result()``; labcoat waits
inside ``save``). Durable = from the save call until its files are fsynced:
DCP, a done-callback on the future; labcoat, the stall of the call plus the
background write time it records (``policy.write_s``); synchronous: the call.

    nice .venv/bin/python benchmarks/checkpoint_vs_dcp.py [--rounds 3] [--saves 4]
        [--gap 10] [--sizes 40,150] [--dir DIR] [--quick] [--json FILE]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import _harness as bench
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict

from labcoat.torch import Checkpointer


def build(mb: int) -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    torch.manual_seed(0)
    width = 1024 if mb <= 60 else 2048
    # params + two AdamW moments = 12 bytes per parameter
    depth = max(1, round(mb * 1e6 / 12 / (width * width + width)))
    model = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(32, width)
    return model, optimizer, x


def step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor) -> None:
    loss = model(x).pow(2).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def run_arm(arm: str, mb: int, saves: int, gap: int, root: Path) -> tuple[list[float], list[float]]:
    model, optimizer, x = build(mb)
    step(model, optimizer, x)  # AdamW state exists
    stalls: list[float] = []
    durable: list[float] = []
    if arm == "labcoat":
        ckpt = Checkpointer(root, keep_last=2, every=gap)
        ckpt.track(model=model, optimizer=optimizer)
        last_write = None
        for i in range(saves + 1):
            for _ in range(gap):
                step(model, optimizer, x)
            t0 = time.perf_counter()
            ckpt.save(i + 1)
            stall = time.perf_counter() - t0
            if i > 0:  # the first save allocates the snapshot buffers: reported apart
                stalls.append(stall)
            if last_write is not None:
                durable.append(last_write + (ckpt.policy.write_s or 0.0))
            last_write = stall if i > 0 else None
        ckpt.close()
        if last_write is not None:
            durable.append(last_write + (ckpt.policy.write_s or 0.0))
        return stalls, durable
    future = None
    pending_wait = 0.0
    for i in range(saves + 1):
        for _ in range(gap):
            step(model, optimizer, x)
        t0 = time.perf_counter()
        if future is not None:
            future.result()
        msd, osd = get_state_dict(model, optimizer)
        state = {"model": msd, "optim": osd}
        path = root / f"step-{i + 1}"
        if arm == "dcp-save":
            dcp.save(state, checkpoint_id=path)
            stall = time.perf_counter() - t0
            if i > 0:
                stalls.append(stall)
                durable.append(stall)
        else:
            done: dict[str, float] = {}
            future = dcp.async_save(state, checkpoint_id=path)
            future.add_done_callback(lambda _f, d=done: d.setdefault("t", time.perf_counter()))
            stall = time.perf_counter() - t0
            if i > 0:
                stalls.append(stall + pending_wait)
            pending_wait = 0.0
            marks = (t0, done)
            if i > 0:
                durable.append(marks)  # type: ignore[arg-type]
    if future is not None:
        future.result()
    if arm == "dcp-async":
        durable = [d["t"] - t for t, d in durable]  # type: ignore[misc]
    return stalls, durable


def fmt(values: list[float]) -> str:
    return (f"{min(values) * 1e3:8.1f} {statistics.median(values) * 1e3:8.1f} "
            f"{max(values) * 1e3:8.1f}")


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--saves", type=int, default=4)
    parser.add_argument("--gap", type=int, default=10)
    parser.add_argument("--sizes", default="40,150")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None)
    args = bench.shrink(parser.parse_args(), rounds=1, saves=2, gap=2, sizes="1")
    torch.set_num_threads(args.threads)
    results = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        dist.init_process_group("gloo", init_method=f"file://{tmp}/pg", rank=0, world_size=1)
        arms = ["labcoat", "dcp-async", "dcp-save"]
        print(f"torch {torch.__version__}, {args.threads} torch thread(s), {args.saves} saves "
              f"every {args.gap} steps x {args.rounds} rounds, load {os.getloadavg()}")
        for mb in (int(s) for s in args.sizes.split(",")):
            stalls = {a: [] for a in arms}
            durable = {a: [] for a in arms}
            for r in range(args.rounds):
                order = arms[r % 3:] + arms[:r % 3]
                for arm in order:
                    root = Path(tmp) / f"{mb}-{arm}-{r}"
                    s, d = run_arm(arm, mb, args.saves, args.gap, root)
                    stalls[arm] += s
                    durable[arm] += d
            model, optimizer, _ = build(mb)
            n = sum(p.numel() for p in model.parameters())
            print(f"\n~{n * 12 / 1e6:.0f} MB state ({n / 1e6:.1f} M params + AdamW moments), "
                  f"load {os.getloadavg()}")
            print(f"{'arm':10} {'stall ms min/med/max':>27}   {'durable ms min/med/max':>27}")
            for arm in arms:
                print(f"{arm:10} {fmt(stalls[arm])}   {fmt(durable[arm])}")
            for peer in ("dcp-async", "dcp-save"):
                ratios = sorted(a / b for a, b in zip(stalls["labcoat"], stalls[peer], strict=True))
                print(f"stall labcoat/{peer}: min {ratios[0]:.3f} median "
                      f"{statistics.median(ratios):.3f} max {ratios[-1]:.3f} (paired by save)")
            results[f"{mb}MB"] = {arm: {"stall": bench.Timing(stalls[arm]),
                                        "durable": bench.Timing(durable[arm])} for arm in arms}
        dist.destroy_process_group()
    bench.save(args, results)


if __name__ == "__main__":
    main()
