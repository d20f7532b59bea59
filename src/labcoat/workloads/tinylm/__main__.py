"""``python -m labcoat.workloads.tinylm``: train once and report through the labcoat SDK.

Thin by design: parse flags, build a `Config`, call `train` inside a labcoat
run. Under ``labcoat run`` the run's identity comes from the environment;
elsewhere ``labcoat.init`` records an ad-hoc experiment.

Checkpointing is on when ``--checkpoint-dir`` or ``LABCOAT_CHECKPOINT_DIR``
(set by the runner, shared by a trial's attempts) names a directory: the run
then resumes from the newest verified checkpoint there and continues exactly
(see `labcoat.torch.Checkpointer`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import torch

import labcoat
from labcoat import environment as env
from labcoat.errors import LabcoatError
from labcoat.torch import Checkpointer
from labcoat.workloads.tinylm._tasks import TASKS
from labcoat.workloads.tinylm._train import Config, train

_HELP = {
    "width": "residual stream width",
    "depth": "number of transformer blocks",
    "heads": "attention heads (must divide --width)",
    "dropout": "dropout probability (embeddings, attention, residual branches)",
    "steps": "optimizer steps",
    "batch_size": "examples per step",
    "lr": "peak learning rate (AdamW)",
    "warmup": "linear warmup steps from 0 to --lr (0: no warmup)",
    "schedule": "after warmup: hold --lr, or cosine-decay it to --min-lr-ratio x --lr",
    "min_lr_ratio": "cosine floor as a fraction of --lr",
    "weight_decay": "AdamW weight decay on weight matrices",
    "grad_clip": "max global gradient norm (0: no clipping)",
    "eval_every": "evaluate every N steps, and always at the last step (0: last only)",
    "eval_items": "held-out items per task",
    "threads": "torch threads; None: torch's choice, which follows OMP_NUM_THREADS",
    "seed": "master seed; init, data and dropout seeds derive from it unless given",
    "init_seed": "seed of the weight initialization; None: derived from --seed",
    "data_seed": "seed of the training data order; None: derived from --seed",
    "dropout_seed": "seed of the dropout masks; None: derived from --seed",
}


def build_parser() -> argparse.ArgumentParser:
    """Flags mirror `Config` fields (``--batch-size`` -> ``batch_size``); defaults come from it."""
    defaults = Config()
    parser = argparse.ArgumentParser(
        prog="python -m labcoat.workloads.tinylm",
        description="Train a tiny transformer on ten in-process tasks; report exact match per "
                    "task and per item through labcoat.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    for name, help_text in _HELP.items():
        default = getattr(defaults, name)
        if name == "schedule":
            kind: dict[str, Any] = {"choices": ("constant", "cosine")}
        else:
            kind = {"type": float if isinstance(default, float) else int}
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=default,
                            help=help_text, **kind)
    parser.add_argument("--untied", action="store_true",
                        help="use a separate output head instead of tying it to the embeddings")
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help="comma-separated subset of tasks to train and evaluate")
    parser.add_argument("--checkpoint-dir", default=os.environ.get(env.CHECKPOINT_DIR),
                        help=f"resume from and save checkpoints in this directory (default: "
                             f"${env.CHECKPOINT_DIR}; neither set: no checkpoints)")
    parser.add_argument("--checkpoint-every", type=int, default=0,
                        help="save every N steps; 0: as often as the measured save cost and the "
                             "failure rate make worthwhile (Young/Daly, at most 2%% overhead)")
    parser.add_argument("--save-final", metavar="PATH",
                        help="write the final model's state_dict here (torch.save)")
    return parser


def config_from_args(args: argparse.Namespace) -> Config:
    fields = {name: getattr(args, name) for name in _HELP}
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    return Config(**fields, tie_embeddings=not args.untied, tasks=tasks)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
        if args.checkpoint_every < 0:
            raise LabcoatError(f"--checkpoint-every {args.checkpoint_every} must be >= 0 "
                               "(0: let the measured cost and failure rate decide)")
    except LabcoatError as err:
        print(f"tinylm: error: {err}", file=sys.stderr)
        return 2
    try:
        with labcoat.init(seed=cfg.seed, params=cfg.to_dict(), total_steps=cfg.steps) as run:
            with contextlib.ExitStack() as stack:  # the checkpointer closes before the run
                ckpt = None
                if args.checkpoint_dir:
                    ckpt = stack.enter_context(Checkpointer(
                        args.checkpoint_dir, run=run, every=args.checkpoint_every or None))
                result = train(cfg, run, checkpointer=ckpt,
                               echo=lambda line: print(line, flush=True))
    except LabcoatError as err:  # e.g. a checkpoint that does not fit this configuration
        print(f"tinylm: error: {err}", file=sys.stderr)
        return 1
    if args.save_final:
        _save_atomically(result.model.state_dict(), args.save_final)
    per_task = " ".join(f"{t}={a:.2f}" for t, a in result.accuracy.items())
    print(f"final exact_match {result.exact_match:.3f} ({per_task}) in {result.seconds:.1f}s")
    return 0


def _save_atomically(state: dict[str, Any], path: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    torch.save(state, tmp)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
