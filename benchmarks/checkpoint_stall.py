"""Training stall of asynchronous versus synchronous checkpoint saves, on tinylm.

Both modes save the same state (a tinylm of width 256 and depth 4 with its
AdamW moments, data RNG and global RNGs: about 40 MB) to the same disk, in
the same run, interleaved with real training steps. The stall is the time
the training thread spends inside ``Checkpointer.save``: for a synchronous
save the whole durable write (serialize, fsync, read back and hash, manifest);
for an asynchronous one the copy to CPU memory plus any wait for the previous
write. Saves are spaced so that a write normally finishes before the next.

    .venv/bin/python benchmarks/checkpoint_stall.py [--saves 8] [--width 256] [--depth 4]
                                                    [--gap 10] [--threads 1] [--dir DIR]
                                                    [--quick] [--json FILE]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import _harness as bench
import torch

from labcoat.torch import Checkpointer
from labcoat.workloads.tinylm import (
    Config,
    TrainStream,
    build_model,
    build_optimizer,
    make_eval_set,
    masked_loss,
)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
               stream: TrainStream, batch_size: int) -> None:
    inputs, labels = stream.batch(batch_size)
    loss = masked_loss(model(inputs), labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def measure(asynchronous: bool, cfg: Config, saves: int, gap_steps: int, directory: Path
            ) -> tuple[list[float], list[float], float, int]:
    """Stalls (s) of each save, step times (s), write time of the last save, state bytes."""
    torch.manual_seed(0)
    model = build_model(cfg)
    optimizer = build_optimizer(model, cfg)
    stream = TrainStream(cfg.seed_for("data"), make_eval_set(1).held_out(), cfg.tasks)
    ckpt = Checkpointer(directory, asynchronous=asynchronous, keep_last=2, every=gap_steps)
    ckpt.track(model=model, optimizer=optimizer, data_rng=stream._rng)
    ckpt.restore()
    stalls, step_times = [], []
    step = 0
    # a few steps first so AdamW's moments exist; the first save also allocates the
    # snapshot buffers, so it is reported separately (index 0)
    for _ in range(saves * gap_steps + 2):
        step += 1
        start = time.perf_counter()
        train_step(model, optimizer, stream, cfg.batch_size)
        step_times.append(time.perf_counter() - start)
        if step > 2 and ckpt.should_save(step):
            start = time.perf_counter()
            ckpt.save(step)
            stalls.append(time.perf_counter() - start)
    ckpt.close()
    write_s = ckpt.policy.write_s or 0.0
    size = sum(p.stat().st_size for p in directory.rglob("state.pt")) // 2
    return stalls, step_times, write_s, size


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--saves", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--gap", type=int, default=10, help="training steps between saves")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to write (default: the system temp directory)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of the training thread (1 leaves a core to the writer)")
    args = bench.shrink(parser.parse_args(), saves=3, width=32, depth=1, gap=2)
    torch.set_num_threads(args.threads)
    cfg = Config(width=args.width, depth=args.depth, heads=8, batch_size=32, steps=10_000,
                 warmup=100)
    torch.use_deterministic_algorithms(True)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        sync, sync_steps, _, size = measure(False, cfg, args.saves, args.gap, Path(tmp) / "s")
        asyn, async_steps, write_s, _ = measure(True, cfg, args.saves, args.gap, Path(tmp) / "a")
    sync_med, async_med = statistics.median(sync[1:]), statistics.median(asyn[1:])
    print(f"state: {size / 1e6:.1f} MB per checkpoint (width {args.width}, depth {args.depth}, "
          f"AdamW), {args.saves} saves every {args.gap} steps, {args.threads} torch thread(s), "
          f"torch {torch.__version__}")
    print(f"synchronous save stall:  median {sync_med * 1e3:7.1f} ms  (first {sync[0] * 1e3:.1f})")
    print(f"asynchronous save stall: median {async_med * 1e3:7.1f} ms  (first {asyn[0] * 1e3:.1f}"
          f", allocating the snapshot buffers); background write {write_s * 1e3:.1f} ms")
    print(f"training step: median {statistics.median(sync_steps) * 1e3:.1f} ms without a "
          f"background write, {statistics.median(async_steps) * 1e3:.1f} ms in the async run")
    print(f"ratio async/sync stall: {async_med / sync_med:.3f}  (target <= 0.05)")
    bench.save(args, {"state_bytes": size, "sync_stall_s": sync_med, "async_stall_s": async_med,
                      "write_s": write_s, "ratio": async_med / sync_med})


if __name__ == "__main__":
    main()
