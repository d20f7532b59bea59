"""Training-data attribution on tinylm: time and memory per explained eval item.

A tinylm run (one torch thread) is trained with `--checkpoints` checkpoints kept along
training; then `--items` eval items are explained against a pool of `--pool` training
examples given back by index (tinylm.TRAINING_DATA), as `labcoat inside --influence`
does for each trial:

- labcoat TracIn (`inside.tracin`: torch.func per-example gradients, in chunks) and
  self-influence over the pool;
- Captum's ``TracInCP`` on the same checkpoints and pool (the baseline; its
  per-example gradients are a loop over examples), if captum is installed;
- EK-FAC (`inside.ekfac`, Kronfluence) at the last checkpoint, if kronfluence is.

Per item is the whole query's time divided by the items explained (the pool's
gradients, the bulk, are shared by every item). Memory is the peak growth of the
process's resident set during the query (sampled every 5 ms), beside the per-chunk
gradient buffer (chunk x parameters x 4 bytes). The same scores are checked equal
between labcoat and Captum before any time is reported.

    .venv/bin/python benchmarks/influence.py [--steps 300] [--width 64] [--pool 1000]
                                             [--items 20] [--checkpoints 3] [--quick]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import _harness as bench
import numpy as np
import torch

from labcoat import inside
from labcoat.workloads.tinylm import INSIDE, TRAINING_DATA, Config, build_model, train


def main() -> None:
    p = bench.parser(__doc__)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--pool", type=int, default=1000)
    p.add_argument("--items", type=int, default=20)
    p.add_argument("--checkpoints", type=int, default=3)
    p.add_argument("--chunk", type=int, default=64)
    args = bench.shrink(p.parse_args(), steps=30, width=32, pool=64, items=4, checkpoints=2)
    torch.set_num_threads(1)
    cfg = Config(width=args.width, steps=args.steps, eval_items=10, eval_every=0,
                 eval_budget=0, threads=1)
    every = max(1, args.steps // args.checkpoints)
    with tempfile.TemporaryDirectory(prefix="labcoat-bench-influence-") as tmp:
        ck = inside_checkpointer(Path(tmp), every)
        with ck:
            train(cfg, checkpointer=ck)
        from labcoat.torch import load_checkpoint

        steps = sorted(int(d.name[5:]) for d in Path(tmp).glob("step-*"))[-args.checkpoints:]
        checkpoints = [inside.CheckpointWeights(
            step=s, lr=TRAINING_DATA.learning_rate(cfg, s),
            state=load_checkpoint(Path(tmp) / f"step-{s:08d}")["tracked"]["model"])
            for s in steps]
    model = build_model(cfg)
    params = sum(p.numel() for p in model.parameters())
    rng = np.random.default_rng(0)
    pool = sorted(int(i) for i in rng.choice(TRAINING_DATA.training_size(cfg), args.pool,
                                             replace=False))
    train_batch = TRAINING_DATA.training_examples(cfg, pool)
    ids, batches = INSIDE.eval_items(cfg, 1 << 30)
    rows = torch.tensor(sorted(rng.choice(len(ids), args.items, replace=False).tolist()))
    test = tuple(t[rows] for t in batches[0])
    print(f"tinylm width {args.width}, {params} parameters; {len(checkpoints)} checkpoints "
          f"(steps {steps}); pool {args.pool}; {args.items} items; load "
          f"{open('/proc/loadavg').read().split()[:3]}")

    def ours() -> np.ndarray:
        return inside.tracin(model, checkpoints, TRAINING_DATA.loss,
                             inside.chunks(train_batch, args.chunk), test)

    results: dict[str, Any] = {"params": params, "pool": args.pool, "items": args.items,
                               "checkpoints": len(checkpoints),
                               "chunk_buffer_mib": args.chunk * params * 4 / 2**20}
    seconds, mib, scores = bench.peak_growth(ours)
    results["labcoat_tracin"] = {"seconds": seconds, "per_item_s": seconds / args.items,
                                 "peak_mib": mib}
    seconds, mib, _ = bench.peak_growth(lambda: inside.self_influence(
        model, checkpoints, TRAINING_DATA.loss, inside.chunks(train_batch, args.chunk)))
    results["labcoat_self_influence"] = {"seconds": seconds, "peak_mib": mib,
                                         "per_example_ms": 1e3 * seconds / args.pool}
    captum = _captum(model, checkpoints, train_batch, test, args, scores)
    if captum is not None:
        results["captum_tracincp"] = captum
        results["captum_over_labcoat"] = captum["seconds"] / results["labcoat_tracin"]["seconds"]
    try:
        import kronfluence  # noqa: F401
    except ImportError:
        results["ekfac"] = "skipped: kronfluence not installed"
    else:
        seconds, mib, _ = bench.peak_growth(lambda: inside.ekfac(
            model, checkpoints[-1].state, TRAINING_DATA.loss, train_batch, test,
            batch_size=args.chunk))
        results["ekfac"] = {"seconds": seconds, "per_item_s": seconds / args.items,
                            "peak_mib": mib}
    for name, value in results.items():
        print(f"{name}: {value}")
    bench.save(args, results)


def inside_checkpointer(directory: Path, every: int) -> Any:
    from labcoat.torch import Checkpointer

    return Checkpointer(directory, keep_last=1, keep_every=every, every=every,
                        asynchronous=False)


def _captum(model: torch.nn.Module, checkpoints: list, train_batch: tuple, test: tuple,
            args: Any, ours: np.ndarray) -> dict[str, float] | None:
    try:
        from captum.influence import TracInCP
    except ImportError:
        print("captum not installed: no baseline")
        return None
    import warnings

    with tempfile.TemporaryDirectory(prefix="labcoat-bench-captum-") as tmp:
        paths = []
        for k, ck in enumerate(checkpoints):
            paths.append(str(Path(tmp) / f"{k}.pt"))
            torch.save({"state": dict(ck.state), "lr": ck.lr}, paths[-1])

        def load(net: torch.nn.Module, path: str) -> float:
            saved = torch.load(path)
            net.load_state_dict(saved["state"])
            net.eval()
            return saved["lr"]

        def loss(out: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return TRAINING_DATA.loss(lambda _: out, (None, labels))

        def query() -> np.ndarray:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tracin = TracInCP(build_model_like(model), torch.utils.data.TensorDataset(
                    *train_batch), paths, checkpoints_load_func=load, loss_fn=loss,
                    batch_size=args.chunk)
                return tracin.influence(test, show_progress=False).numpy()

        seconds, mib, theirs = bench.peak_growth(query)
    np.testing.assert_allclose(ours, theirs, rtol=2e-3, atol=1e-5 * float(np.abs(ours).max()))
    return {"seconds": seconds, "per_item_s": seconds / args.items, "peak_mib": mib}


def build_model_like(model: torch.nn.Module) -> torch.nn.Module:
    import copy

    return copy.deepcopy(model)


if __name__ == "__main__":
    main()
