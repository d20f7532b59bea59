"""What LabcoatCallback costs a Hugging Face Trainer and a Lightning loop (the guard on).

    .venv/bin/python benchmarks/callback_overhead.py            # 15 rounds of 40 timed steps
    .venv/bin/python benchmarks/callback_overhead.py --quick    # 1 round of 8 (a smoke run)

Each round trains the same GPT-2 (built locally from a GPT2Config, seed 0) on
the same letter rows twice per library, once with the callback and once without,
alternating which goes first: interleaved in one process, so both arms see the
same machine. Everything else is identical (logging every 10 steps, no
checkpoints: their sealing is measured separately below). The time is the
steady-state training loop: from the start of step `--warmup` to the start of
the last step, taken by a timing callback placed after LabcoatCallback (so every
hook of the callback, the guard's optimizer and forward hooks, guard.record and
the journal writes fall inside). It is the process's CPU time
(``time.process_time``, torch on one thread): on a machine shared with other
work, wall time per step swings by tens of percent between identical runs,
while the CPU time a loop spends is what the callback adds to; the wall-clock
ratio is printed beside it. The ratio is median(with) / median(without) over
the rounds; the range of the per-round paired ratios shows the machine's
noise. "guard ms/step" is the guard's own time (its hooks and guard.record,
timed inside it: ``guard.seconds``), the part of the overhead that does not
drown in that noise. Two model sizes: "tiny" (2 layers, width 32, 15-token
rows, batch 8: a few-ms step, where fixed per-step costs show most) and
"small" (4 layers, width 64, 31-token rows, batch 16).

Sealing: the time `seal_directory` / `seal_file` take for one checkpoint of
the small model (fsync and SHA-256 of every file), against the time the library
took to write it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

SIZES = {"tiny": dict(n_embd=32, n_layer=2, n_head=2, length=16, batch=8),
         "small": dict(n_embd=64, n_layer=4, n_head=4, length=32, batch=16)}


def rows(n: int, length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    start = torch.randint(0, 26, (n, 1), generator=g)
    stride = torch.randint(1, 4, (n, 1), generator=g)
    return (start + stride * torch.arange(length)) % 26


def gpt2(size: dict):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=26, n_positions=size["length"],
                                      n_embd=size["n_embd"], n_layer=size["n_layer"],
                                      n_head=size["n_head"], bos_token_id=None,
                                      eos_token_id=None))


class Data(torch.utils.data.Dataset):
    def __init__(self, ids: torch.Tensor) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def stamp(callbacks: list) -> tuple[float, float, float]:
    """(CPU time, wall time, the guard's own time so far: NaN without it)."""
    guard = callbacks[0].guard if callbacks else None
    return (time.process_time(), time.perf_counter(),
            guard.seconds if guard is not None else float("nan"))


def per_step(starts: dict[int, tuple[float, float, float]], steps: int,
             warmup: int) -> tuple[float, float, float]:
    """(CPU s, wall s, guard's own s) per step from the start of step `warmup` to that of
    `steps`."""
    return tuple((starts[steps][i] - starts[warmup][i]) / (steps - warmup) for i in range(3))


def hf_loop(size: dict, steps: int, warmup: int, labcoat: bool, out: Path,
            ) -> tuple[float, float, float]:
    """(CPU, wall, guard's own) seconds per steady-state Trainer step."""
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    from labcoat.integrations.transformers import LabcoatCallback
    from labcoat.sdk import init

    starts: dict[int, tuple[float, float, float]] = {}
    callbacks = [LabcoatCallback(init(experiment="bench-hf"))] if labcoat else []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            starts[state.global_step] = stamp(callbacks)

    args = TrainingArguments(output_dir=str(out), max_steps=steps + 1, learning_rate=1e-3,
                             per_device_train_batch_size=size["batch"], logging_steps=10,
                             save_strategy="no", report_to="none", use_cpu=True,
                             disable_tqdm=True, log_level="error", seed=0)
    trainer = Trainer(model=gpt2(size), args=args,
                      train_dataset=Data(rows(2048, size["length"])),
                      callbacks=[*callbacks, Timer()])
    trainer.remove_callback(PrinterCallback)  # quiet: the logs are not the subject
    trainer.train()
    return per_step(starts, steps, warmup)


def pl_loop(size: dict, steps: int, warmup: int, labcoat: bool, out: Path,
            ) -> tuple[float, float, float]:
    """(CPU, wall, guard's own) seconds per steady-state Lightning step."""
    import lightning.pytorch as pl

    from labcoat.integrations.lightning import LabcoatCallback
    from labcoat.sdk import init

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.lm = gpt2(size)

        def training_step(self, batch, batch_idx):
            loss = self.lm(**batch).loss
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    starts: dict[int, tuple[float, float, float]] = {}
    callbacks = [LabcoatCallback(init(experiment="bench-pl"))] if labcoat else []

    class Timer(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            starts[trainer.global_step] = stamp(callbacks)

    trainer = pl.Trainer(max_steps=steps + 1, accelerator="cpu", logger=False,
                         log_every_n_steps=10, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=str(out), callbacks=[*callbacks, Timer()])
    loader = torch.utils.data.DataLoader(Data(rows(2048, size["length"])),
                                         batch_size=size["batch"], shuffle=True)
    module = Module()
    trainer.fit(module, loader)
    return per_step(starts, steps, warmup)


def sealing(out: Path) -> list[tuple[str, float, float]]:
    """(library, seconds to write one small-model checkpoint, seconds to seal it)."""
    import lightning.pytorch as pl  # noqa: F401
    from transformers import Trainer, TrainingArguments

    from labcoat.torch import seal_directory, seal_file

    size = SIZES["small"]
    model = gpt2(size)
    args = TrainingArguments(output_dir=str(out / "hf"), max_steps=1, report_to="none",
                             use_cpu=True, disable_tqdm=True, log_level="error",
                             per_device_train_batch_size=2, save_strategy="no")
    trainer = Trainer(model=model, args=args, train_dataset=Data(rows(8, size["length"])))
    trainer.train()
    started = time.perf_counter()
    trainer._save_checkpoint(trainer.model, trial=None)
    wrote = time.perf_counter() - started
    path = next((out / "hf").glob("checkpoint-*"))
    started = time.perf_counter()
    seal_directory(path, step=1)
    hf = ("transformers.Trainer", wrote, time.perf_counter() - started)
    file = out / "model.ckpt"
    started = time.perf_counter()
    torch.save({"state_dict": model.state_dict(),
                "optimizer": trainer.optimizer.state_dict()}, file)
    wrote = time.perf_counter() - started
    started = time.perf_counter()
    seal_file(file, step=1)
    return [hf, ("lightning (torch.save of a .ckpt)", wrote, time.perf_counter() - started)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="1 round of 8 timed steps (a smoke run)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps, args.warmup = 1, 12, 4
    torch.set_num_threads(1)
    os.environ.setdefault("LABCOAT_HOME", tempfile.mkdtemp(prefix="labcoat-bench-"))
    import logging

    for name in ("lightning.pytorch", "lightning.fabric", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    print(f"torch {torch.__version__}, 1 thread; {args.rounds} rounds, steps "
          f"{args.warmup}..{args.steps} timed", flush=True)
    loops = {"transformers.Trainer": hf_loop, "lightning.Trainer": pl_loop}
    print(f"{'loop':22} {'model':6} {'CPU ms/step without':>20} {'with':>7} {'ratio':>7}"
          f" {'paired (min-max)':>17}   {'wall ratio':>10} {'guard ms/step':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, loop in loops.items():
            for label, size in SIZES.items():
                times: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
                for r in range(args.rounds):
                    for labcoat in ((False, True) if r % 2 == 0 else (True, False)):
                        out = Path(tmp) / f"{name}-{label}-{r}-{labcoat}"
                        times[labcoat].append(loop(size, args.steps, args.warmup, labcoat, out))
                cpu = {k: statistics.median(t[0] for t in v) for k, v in times.items()}
                wall = {k: statistics.median(t[1] for t in v) for k, v in times.items()}
                own = statistics.median(t[2] for t in times[True])
                paired = [w[0] / b[0] for w, b in zip(times[True], times[False], strict=True)]
                print(f"{name:22} {label:6} {cpu[False] * 1e3:20.2f} {cpu[True] * 1e3:7.2f} "
                      f"{cpu[True] / cpu[False]:7.3f} {min(paired):8.3f} - {max(paired):.3f}"
                      f"   {wall[True] / wall[False]:10.3f} {own * 1e3:14.3f}", flush=True)
        print("\nsealing one checkpoint of the small model (fsync + SHA-256 of every file)")
        for name, wrote, sealed in sealing(Path(tmp)):
            print(f"{name:34} write {wrote * 1e3:8.1f} ms   seal {sealed * 1e3:8.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
