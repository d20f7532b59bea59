"""``python -m labcoat.workloads.tinylm``: train once and report through the labcoat SDK.

Thin by design: parse flags, build a `Config`, call `train` inside a labcoat
run. Under ``labcoat run`` the run's identity comes from the environment;
elsewhere ``labcoat.init`` records an ad-hoc experiment.

Checkpointing is on when ``--checkpoint-dir`` or ``LABCOAT_CHECKPOINT_DIR``
(set by the runner, shared by a trial's attempts) names a directory: the run
then resumes from the newest verified checkpoint there and continues exactly
(see `labcoat.torch.Checkpointer`).

The silent-error guard (`labcoat.torch.watch`) is on unless ``--no-guard``:
alerts go to the journal as ``guard.alert`` events and, by default, a
critical alert (NaN, corrupted weights) stops the run with exit code 3
(`EXIT_GUARD_STOP`) before more compute is wasted. Reference profiles of
clean runs come from ``--guard-reference`` or ``$LABCOAT_GUARD_REFERENCE``.
``--fault NAME --fault-step K`` injects a silent bug (see `_faults`).

Under torchrun (``labcoat run`` with ``ranks: N`` in the design, or
``torchrun --nproc-per-node N -m labcoat.workloads.tinylm``) it trains
data-parallel over gloo; ``--batch-size`` is the global batch, split evenly.
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
from labcoat.torch import Checkpointer, GuardStop
from labcoat.workloads.tinylm._faults import (
    ALL_FAULTS,
    FAULTS,
    HELD_OUT_FAULTS,
    RANK_FAULTS,
    SIZE_FAULTS,
    SLOW_FAULTS,
    Fault,
)
from labcoat.workloads.tinylm._tasks import TASKS
from labcoat.workloads.tinylm._train import Config, train

EXIT_GUARD_STOP = 3  # the guard stopped the run (rerunning gives the same result: don't retry)

_HELP = {
    "width": "residual stream width",
    "depth": "number of transformer blocks",
    "heads": "attention heads (must divide --width)",
    "parametrization": "standard, or mup: muP's width-scaled init, multipliers and per-layer "
                       "Adam lr, so the best --lr transfers across --width (Yang et al. 2022)",
    "mup_base_width": "muP: the width at which it equals the standard parametrization",
    "dropout": "dropout probability (embeddings, attention, residual branches)",
    "steps": "optimizer steps",
    "batch_size": "examples per step",
    "accumulation": "micro-batches per step (gradient accumulation; must divide --batch-size)",
    "seq_len": "training rows are cut to this many tokens (evaluation rows are not)",
    "lr": "peak learning rate (AdamW)",
    "warmup": "linear warmup steps from 0 to --lr (0: no warmup)",
    "schedule": "after warmup: hold --lr, or cosine-decay it to --min-lr-ratio x --lr",
    "min_lr_ratio": "cosine floor as a fraction of --lr",
    "weight_decay": "AdamW weight decay on weight matrices",
    "grad_clip": "max global gradient norm (0: no clipping)",
    "eval_every": "evaluate every N steps, and always at the last step (0: last only)",
    "eval_items": "held-out items per task",
    "eval_budget": "fraction of training time for in-training evals: they score a fixed "
                   "stratified subset sized to fit (the last step scores every item; 0: every "
                   "item at every eval)",
    "threads": "torch threads; None: torch's choice, which follows OMP_NUM_THREADS",
    "seed": "master seed; init, data and dropout seeds derive from it unless given",
    "init_seed": "seed of the weight initialization; None: derived from --seed",
    "data_seed": "seed of the training data order; None: derived from --seed",
    "dropout_seed": "seed of the dropout masks; None: derived from --seed",
}


_CHOICES = {"schedule": ("constant", "cosine"), "parametrization": ("standard", "mup")}


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
        if name in _CHOICES:
            kind: dict[str, Any] = {"choices": _CHOICES[name]}
        else:
            kind = {"type": float if isinstance(default, float) else int}
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=default,
                            help=help_text, **kind)
    parser.add_argument("--untied", action="store_true",
                        help="use a separate output head instead of tying it to the embeddings")
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help="comma-separated subset of tasks to train and evaluate")
    parser.add_argument("--eval-subset", metavar="FILE",
                        help="in-training evals score exactly the items of this `labcoat evals "
                             "subset --out` file (the last step still scores every item)")
    parser.add_argument("--checkpoint-dir", default=os.environ.get(env.CHECKPOINT_DIR),
                        help=f"resume from and save checkpoints in this directory (default: "
                             f"${env.CHECKPOINT_DIR}; neither set: no checkpoints)")
    parser.add_argument("--checkpoint-every", type=int, default=0,
                        help="save every N steps; 0: as often as the measured save cost and the "
                             "failure rate make worthwhile (Young/Daly, at most 2%% overhead)")
    parser.add_argument("--replay-budget", type=float, default=None, metavar="F",
                        help="record for `labcoat replay`: keep every checkpoint and save as "
                             "often as F of training time allows (e.g. 0.07); default: "
                             "$LABCOAT_REPLAY_BUDGET, else off")
    parser.add_argument("--save-final", metavar="PATH",
                        help="write the final model's state_dict here (torch.save)")
    guard = parser.add_argument_group("silent-error guard (labcoat.torch.watch)")
    guard.add_argument("--guard", action=argparse.BooleanOptionalAction, default=True,
                       help="watch the run for silent bugs; alerts go to the journal")
    guard.add_argument("--guard-stop-on", choices=("none", "warning", "error", "critical"),
                       default="critical",
                       help=f"stop the run (exit code {EXIT_GUARD_STOP}) at the first alert of "
                            "this severity or worse")
    guard.add_argument("--guard-reference", metavar="PATH",
                       help="JSON file of reference profiles of clean runs; None: "
                            "$LABCOAT_GUARD_REFERENCE if set")
    guard.add_argument("--guard-check-every", type=int, default=None, metavar="N",
                       help="run the periodic checks every N steps; None: the guard's default")
    guard.add_argument("--guard-causal-every", type=int, default=None, metavar="N",
                       help="probe causality every N steps, a multiple of the check cadence; "
                            "None: the guard's default (about every 100 steps)")
    guard.add_argument("--guard-recompute-every", type=int, default=0, metavar="N",
                       help="recompute every N-th step's gradients and compare bit for bit "
                            "(silent data corruption; 0: off)")
    faults = parser.add_argument_group("fault injection (for testing the guard)")
    faults.add_argument("--fault", choices=ALL_FAULTS, metavar="NAME",
                        help="switch on a silent bug: " + ", ".join(FAULTS) + "; held out "
                             "(written after the guard's rules): " + ", ".join(HELD_OUT_FAULTS)
                             + "; with several ranks (torchrun) also " + ", ".join(RANK_FAULTS)
                             + "; only above some size (for labcoat shrink): "
                             + ", ".join(SIZE_FAULTS) + "; only slower (for the slow-step "
                             "alarm): " + ", ".join(SLOW_FAULTS))
    faults.add_argument("--fault-step", type=int, default=1, metavar="K",
                        help="the optimizer step at which the fault starts")
    faults.add_argument("--fault-at", type=float, default=None, metavar="F",
                        help="start the fault at this fraction of --steps instead (0 < F <= 1; "
                             "the step is round(F x steps), at least 1): it stays at the same "
                             "point of training when --steps changes")
    return parser


def guard_from_args(args: argparse.Namespace) -> dict[str, Any] | bool:
    """The guard options the flags ask for (False: no guard)."""
    if not args.guard:
        return False
    options: dict[str, Any] = {
        "stop_on": None if args.guard_stop_on == "none" else args.guard_stop_on,
        "recompute_every": args.guard_recompute_every,
    }
    if args.guard_reference:
        options["reference_path"] = args.guard_reference
    if args.guard_check_every is not None:
        options["check_every"] = args.guard_check_every
    if args.guard_causal_every is not None:
        options["causal_every"] = args.guard_causal_every
    return options


def config_from_args(args: argparse.Namespace) -> Config:
    fields = {name: getattr(args, name) for name in _HELP}
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    return Config(**fields, tie_embeddings=not args.untied, tasks=tasks,
                  eval_subset=args.eval_subset)


def fault_step(args: argparse.Namespace, cfg: Config) -> int:
    """--fault-step, or --fault-at's fraction of the run's steps."""
    if args.fault_at is None:
        return args.fault_step
    if not 0 < args.fault_at <= 1:
        raise LabcoatError(f"--fault-at {args.fault_at} must be a fraction of --steps in (0, 1], "
                           "e.g. 0.5")
    return max(1, round(args.fault_at * cfg.steps))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
        if args.checkpoint_every < 0:
            raise LabcoatError(f"--checkpoint-every {args.checkpoint_every} must be >= 0 "
                               "(0: let the measured cost and failure rate decide)")
        fault = Fault(args.fault, fault_step(args, cfg)) if args.fault else None
        guard = guard_from_args(args)
    except LabcoatError as err:
        print(f"tinylm: error: {err}", file=sys.stderr)
        return 2
    try:
        with labcoat.init(seed=cfg.seed, params=cfg.to_dict(), total_steps=cfg.steps) as run:
            with contextlib.ExitStack() as stack:  # the checkpointer closes before the run
                ckpt = None
                if args.checkpoint_dir:
                    ckpt = stack.enter_context(Checkpointer(
                        args.checkpoint_dir, run=run, every=args.checkpoint_every or None,
                        replay_budget=args.replay_budget))
                result = train(cfg, run, checkpointer=ckpt, guard=guard, fault=fault,
                               echo=lambda line: print(line, flush=True))
    except GuardStop as stop:
        print(f"tinylm: {stop}", file=sys.stderr)
        return EXIT_GUARD_STOP
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
