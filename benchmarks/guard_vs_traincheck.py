"""Guard overhead side by side with TrainCheck: per-step slowdown on the same small loops.

    .venv/bin/python benchmarks/guard_vs_traincheck.py                  # all loops, 5 rounds
    .venv/bin/python benchmarks/guard_vs_traincheck.py --loops mlp --rounds 2   # a short run
    .venv/bin/python benchmarks/guard_vs_traincheck.py --quick   # seconds; no TrainCheck needed

TrainCheck (OrderLab, PyPI ``traincheck``) lives in its own virtual
environment (``--tc-venv``, default ``/tmp/tc-venv``; see benchmarks/README.md
for the install). Each loop is a standalone script written to ``--work``
(TrainCheck instruments a script's source and writes ``_traincheck_*`` copies
beside it, so the scripts never live in the repository). Loops:

- ``mlp``: 256-512-512-10 MLP, batch 128, AdamW (~5 ms steps idle);
- ``cnn``: two conv layers + linear head on 1x28x28, batch 32, AdamW (~3-5 ms);
- ``tinylm``: labcoat's reference workload (``labcoat.workloads.tinylm``
  defaults: width 64, depth 2, batch 64; ~11-15 ms), training steps only, with
  its lr schedule set every step (the schedule it declares to the guard);
- ``ddp``: the MLP under ``DistributedDataParallel`` on 2 gloo ranks (torchrun),
  each rank its own batch of 64.

Every loop calls ``loss.item()`` each step (a loop logs its loss; the guard
needs the value). Arms, each a fresh process, run ``--steps`` steps:

- ``plain``: the loop, labcoat's venv; ``labcoat``: the same loop with
  ``guard = watch(model, opt)`` (tinylm: with tinylm's declared facts, as
  ``python -m labcoat.workloads.tinylm`` runs it) and
  ``guard.record(loss=..., batch=(x, y))`` every step;
- ``tc_plain``: the loop in TrainCheck's venv; ``traincheck``: the loop under
  ``traincheck-collect --invariants <inferred> --models-to-track model`` (the
  checking run TrainCheck's README prescribes: selective instrumentation
  from the invariants, its default policy of 10 warm-up steps then every
  10th step traced; its default ``proxy`` model tracker, ``subclass`` for
  ``ddp``: see ``TC_STYLE``), checked afterwards with ``traincheck-check``
  (offline, not timed);
- ``labcoat_ab`` (labcoat only): plain, guarded, plain models of the loop in ONE
  process, rotating per step as in ``benchmarks/guard.py``: the precise figure
  (no process-to-process noise) that the <= 1.02 tinylm target is judged on.

Each round runs every loop's arms in an order that reverses every round
(ABBA...), so drift in machine load hits arms alike. Per-step slowdown of a
tool = its mean (and median) step time over steps after ``--warm`` divided by
its own venv's plain arm in the same round; the tables give min/median/max
over rounds and the load average (os.getloadavg) seen during the run.

Before the timed rounds, TrainCheck's invariants are inferred once per loop
(``traincheck-collect`` on ``--ref-steps`` steps without invariants, then
``traincheck-infer``), cached in ``--work``; ``--reinfer`` redoes it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import _harness as bench

REPO = Path(__file__).resolve().parents[1]
LOOPS = ("mlp", "cnn", "tinylm", "ddp")
# TrainCheck's model tracker per loop: its default (proxy) everywhere but under DDP, where
# the proxied parameters crash DDP's C++ Reducer (SIGSEGV in ``_ddp_init_helper``, torch
# 2.13); ``sampler`` needs the optimizer built in the script's own source, so ``subclass``.
TC_STYLE = {"mlp": "proxy", "cnn": "proxy", "tinylm": "proxy", "ddp": "subclass"}
ARMS = ("plain", "labcoat", "tc_plain", "traincheck", "labcoat_ab")

# The loop script. Top-level code on purpose: TrainCheck's instrumenter rewrites the
# module's source (wraps the assignment to ``model`` in its Proxy, injects
# ``start_step()`` into the loop that calls .backward()/.step()).
LOOP_SOURCE = textwrap.dedent('''\
    import json, os, sys, time
    import torch
    import torch.nn.functional as F
    from torch import nn

    LOOP = os.environ["GVT_LOOP"]
    TOOL = os.environ["GVT_TOOL"]  # none | labcoat | labcoat_ab
    STEPS = int(os.environ["GVT_STEPS"])
    OUT = os.environ["GVT_OUT"]
    if os.environ.get("GVT_SRC") and os.environ["GVT_SRC"] not in sys.path:
        sys.path.insert(0, os.environ["GVT_SRC"])  # labcoat's source (tinylm) in any venv
    torch.set_num_threads(1)
    DDP = LOOP == "ddp"
    RANK = int(os.environ.get("RANK", "0"))
    if DDP:
        import torch.distributed as dist
        dist.init_process_group("gloo")


    def build_net(seed):
        """The model of LOOP, initialized from `seed`."""
        torch.manual_seed(seed)
        if LOOP in ("mlp", "ddp"):
            return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                 nn.Linear(512, 10))
        if LOOP == "cnn":
            return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
        from labcoat.workloads.tinylm import Config, build_model
        return build_model(Config(threads=1, seed=seed))


    def build_rest(net, seed):
        """(optimizer, next_batch, loss_of, watch options, set_lr(step)) for LOOP's `net`."""
        gen = torch.Generator().manual_seed(1000 + RANK)
        if LOOP in ("mlp", "ddp", "cnn"):
            n = 32 if LOOP == "cnn" else 64 if DDP else 128
            shape = (1, 28, 28) if LOOP == "cnn" else (256,)
            batch = lambda: (torch.randn(n, *shape, generator=gen),
                             torch.randint(0, 10, (n,), generator=gen))
            return (torch.optim.AdamW(net.parameters(), lr=1e-3), batch, F.cross_entropy, {},
                    lambda step: None)
        from labcoat.workloads.tinylm import (Config, TrainStream, build_optimizer,
                                              guard_options, learning_rate, make_eval_set,
                                              masked_loss)
        cfg = Config(threads=1, seed=seed)
        stream = TrainStream(cfg.seed_for("data"),
                             make_eval_set(cfg.eval_items, cfg.tasks).held_out(), cfg.tasks)
        opt = build_optimizer(net, cfg)

        def set_lr(step):  # the schedule tinylm declares to the guard, as its loop applies it
            for group in opt.param_groups:
                group["lr"] = learning_rate(step, cfg) * group.get("lr_scale", 1.0)
        return (opt, lambda: stream.batch(cfg.batch_size), masked_loss, guard_options(cfg),
                set_lr)


    def result(times, extra=None):
        if RANK == 0:
            with open(OUT, "w") as f:
                json.dump({"times": times, "load": os.getloadavg(), **(extra or {})}, f)
        if DDP:
            dist.barrier()
            dist.destroy_process_group()


    if TOOL != "labcoat_ab":
        model = build_net(0)
        opt, next_batch, loss_of, options, set_lr = build_rest(model, 0)
        train_model = torch.nn.parallel.DistributedDataParallel(model) if DDP else model
        guard = None
        if TOOL == "labcoat":
            from labcoat.torch import watch
            guard = watch(model, opt, **options)
        times = []
        last = time.perf_counter()
        for step in range(STEPS):
            set_lr(step + 1)
            x, y = next_batch()
            loss = loss_of(train_model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = loss.item()
            if guard is not None:
                guard.record(loss=value, batch=(x, y))
            now = time.perf_counter()
            times.append(now - last)
            last = now
        extra = {}
        if guard is not None:
            guard.close()
            extra = {"alerts": [[a.step, a.rule] for a in guard.alerts],
                     "guard_seconds": guard.seconds}
        result(times, extra)
    else:  # plain, guarded, plain in one process, rotating per step (benchmarks/guard.py)
        from labcoat.torch import watch
        arms = []
        for name in ("plain_a", "guard", "plain_b"):
            net = build_net(0)
            opt, next_batch, loss_of, options, set_lr = build_rest(net, 0)
            wrapped = torch.nn.parallel.DistributedDataParallel(net) if DDP else net
            guard = watch(net, opt, **options) if name == "guard" else None
            arms.append({"name": name, "net": wrapped, "opt": opt, "batch": next_batch,
                         "loss": loss_of, "guard": guard, "set_lr": set_lr, "times": []})
        for step in range(STEPS):
            for a in arms[step % 3:] + arms[:step % 3]:
                started = time.perf_counter()
                a["set_lr"](step + 1)
                x, y = a["batch"]()
                loss = a["loss"](a["net"](x), y)
                a["opt"].zero_grad()
                loss.backward()
                a["opt"].step()
                value = loss.item()
                if a["guard"] is not None:
                    a["guard"].record(loss=value, batch=(x, y))
                a["times"].append(time.perf_counter() - started)
        g = arms[1]["guard"]
        g.close()
        result(arms[1]["times"], {"plain_a": arms[0]["times"], "plain_b": arms[2]["times"],
                                  "alerts": [[a.step, a.rule] for a in g.alerts],
                                  "guard_seconds": g.seconds})
''')


def _env(args: argparse.Namespace, loop: str, tool: str, steps: int, out: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(GVT_LOOP=loop, GVT_TOOL=tool, GVT_STEPS=str(steps), GVT_OUT=str(out),
               GVT_SRC=str(REPO / "src"), OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    return env


def _python_cmd(python: str, loop: str, script: Path) -> list[str]:
    if loop == "ddp":
        return [python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                str(script)]
    return [python, str(script)]


def _tc_cmd(args: argparse.Namespace, loop: str, script: Path, trace: Path,
            invariants: Path | None) -> list[str]:
    cmd = [str(Path(args.tc_venv) / "bin" / "traincheck-collect"), "--pyscript", str(script),
           "--models-to-track", "model", "--model-tracker-style",
           args.tc_style or TC_STYLE[loop], "--output-dir", str(trace)]
    if loop == "ddp":  # TrainCheck runs a shell script that names the python script
        sh = script.with_suffix(".sh")
        sh.write_text(" ".join(_python_cmd(str(Path(args.tc_venv) / "bin" / "python"), loop,
                                           Path(script.name))) + "\n", encoding="utf-8")
        cmd += ["--shscript", str(sh)]
    if invariants is not None:
        cmd += ["--invariants", str(invariants)]
    return cmd


def _run(cmd: list[str], env: dict[str, str], cwd: Path, log: Path, nice: bool) -> float:
    started = time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.run((["nice"] if nice else []) + cmd, env=env, cwd=cwd, stdout=f,
                              stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}; see {log}")
    return time.perf_counter() - started


def prepare(args: argparse.Namespace, loop: str) -> Path:
    """Write the loop script; infer TrainCheck's invariants for it once (cached)."""
    work = Path(args.work) / loop
    work.mkdir(parents=True, exist_ok=True)
    script = work / f"loop_{loop}.py"
    script.write_text(LOOP_SOURCE, encoding="utf-8")
    invariants = work / "invariants.json"
    if "traincheck" not in args.arms or (invariants.exists() and not args.reinfer):
        return script
    ref = work / "ref_trace"
    shutil.rmtree(ref, ignore_errors=True)
    env = _env(args, loop, "none", args.ref_steps, work / "ref.json")
    cmd = _tc_cmd(args, loop, script, ref, None)
    print("$", " ".join(cmd), f"   # reference trace, {args.ref_steps} steps", flush=True)
    took = _run(cmd, env, work, work / "ref.log", nice=True)
    infer = [str(Path(args.tc_venv) / "bin" / "traincheck-infer"), "-f", str(ref), "-o",
             str(invariants)]
    print("$", " ".join(infer), flush=True)
    took_infer = _run(infer, env, work, work / "infer.log", nice=True)
    count = sum(1 for _ in invariants.open())
    print(f"  {loop}: reference run {took:.0f} s, inference {took_infer:.0f} s, "
          f"{count} invariants", flush=True)
    return script


def run_arm(args: argparse.Namespace, loop: str, arm: str, script: Path, round_: int
            ) -> dict[str, Any]:
    work = script.parent
    out = work / f"{arm}.{round_}.json"
    out.unlink(missing_ok=True)
    tool = {"labcoat": "labcoat", "labcoat_ab": "labcoat_ab"}.get(arm, "none")
    steps = args.steps
    env = _env(args, loop, tool, steps, out)
    python = sys.executable if arm in ("plain", "labcoat", "labcoat_ab") \
        else str(Path(args.tc_venv) / "bin" / "python")
    if arm == "traincheck":
        trace = work / f"tc_trace.{round_}"
        shutil.rmtree(trace, ignore_errors=True)
        cmd = _tc_cmd(args, loop, script, trace, work / "invariants.json")
    else:
        cmd = _python_cmd(python, loop, script)
    if round_ == 0:
        print("$", " ".join(f"{k}={env[k]}" for k in ("GVT_LOOP", "GVT_TOOL", "GVT_STEPS")),
              " ".join(cmd), flush=True)
    wall = _run(cmd, env, work, work / f"{arm}.{round_}.log", nice=args.nice)
    data = json.loads(out.read_text())
    data["wall"] = wall
    if arm == "traincheck":
        data["trace_mb"] = sum(p.stat().st_size for p in trace.rglob("*") if p.is_file()) / 1e6
        if round_ > 0:  # keep one trace (round 0) for traincheck-check
            shutil.rmtree(trace, ignore_errors=True)
    return data


def _stats(times: list[float], warm: int) -> tuple[float, float]:
    t = times[warm:]
    return statistics.fmean(t), statistics.median(t)


def _mmm(values: list[float]) -> str:
    return f"{min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = bench.parser(__doc__)
    parser.add_argument("--loops", default=",".join(LOOPS))
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400, help="steps per arm and round")
    parser.add_argument("--warm", type=int, default=20,
                        help="first steps left out (allocation; TrainCheck's 10 warm-up steps)")
    parser.add_argument("--ref-steps", type=int, default=30,
                        help="steps of TrainCheck's reference run (invariant inference)")
    parser.add_argument("--work", default="/tmp/gvt")
    parser.add_argument("--tc-venv", default="/tmp/tc-venv")
    parser.add_argument("--reinfer", action="store_true")
    parser.add_argument("--tc-style", choices=("proxy", "subclass", "sampler"), default=None,
                        help="TrainCheck's model tracker for every loop (default: TC_STYLE)")
    parser.add_argument("--nice", action="store_true", help="run every arm under nice")
    parser.add_argument("--check", action="store_true",
                        help="run traincheck-check on round 0's traces afterwards (not timed)")
    args = bench.shrink(parser.parse_args(argv), loops="mlp", arms="labcoat_ab", rounds=1,
                        steps=30, warm=5, ref_steps=10, work="/tmp/gvt-quick")
    loops = args.loops.split(",")
    args.arms = args.arms.split(",")
    unknown = sorted(set(loops) - set(LOOPS)) + sorted(set(args.arms) - set(ARMS))
    if unknown:
        parser.error(f"unknown loop/arm {', '.join(unknown)}; loops: {', '.join(LOOPS)}; "
                     f"arms: {', '.join(ARMS)}")
    no_tc = not (Path(args.tc_venv) / "bin" / "traincheck-collect").exists()
    if args.quick and no_tc:  # a smoke run of labcoat's arms
        print(f"TrainCheck is not installed in {args.tc_venv}: its arms are skipped")
        args.arms = [a for a in args.arms if not a.startswith("t")]
    if any(a.startswith("t") for a in args.arms) and no_tc:
        raise SystemExit(f"no traincheck-collect in {args.tc_venv}: install TrainCheck there "
                         "(benchmarks/README.md) or pass --arms plain,labcoat,labcoat_ab")
    started = time.strftime("%Y-%m-%d %H:%M")
    scripts = {loop: prepare(args, loop) for loop in loops}
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for loop in loops:
            order = args.arms if r % 2 == 0 else args.arms[::-1]
            for arm in order:
                results.setdefault((loop, arm), []).append(run_arm(args, loop, arm,
                                                                   scripts[loop], r))
                loads.append(os.getloadavg()[0])
        print(f"round {r + 1}/{args.rounds} done, load {os.getloadavg()[0]:.2f}", flush=True)
    import torch

    print(f"\nguard vs TrainCheck, {started} - {time.strftime('%H:%M')}; torch "
          f"{torch.__version__}, 1 thread; {args.rounds} rounds x {args.steps} steps per arm, "
          f"first {args.warm} left out; 1-min load average during the run: "
          f"{min(loads):.2f}-{max(loads):.2f} (median {statistics.median(loads):.2f}); "
          f"{os.cpu_count()} cores\n")
    print("| loop | tool | plain step (ms, median over rounds) | ratio of means min / median / "
          "max | ratio of medians min / median / max | notes |")
    print("| --- | --- | --- | --- | --- | --- |")
    for loop in loops:
        for tool, base in (("labcoat", "plain"), ("traincheck", "tc_plain")):
            if (loop, tool) not in results or (loop, base) not in results:
                continue
            means, medians, plain_ms, notes = [], [], [], ""
            for run, ref in zip(results[(loop, tool)], results[(loop, base)], strict=True):
                (tm, tmed), (pm, pmed) = _stats(run["times"], args.warm), \
                    _stats(ref["times"], args.warm)
                means.append(tm / pm)
                medians.append(tmed / pmed)
                plain_ms.append(pm * 1e3)
            runs = results[(loop, tool)]
            if tool == "labcoat":
                alerts = sum(len(x["alerts"]) for x in runs)
                notes = f"{alerts} alerts"
            else:
                walls = [x["wall"] for x in runs]
                base_walls = [x["wall"] for x in results[(loop, base)]]
                notes = (f"process wall {statistics.median(walls):.0f} s vs "
                         f"{statistics.median(base_walls):.0f} s plain; trace "
                         f"{statistics.median(x['trace_mb'] for x in runs):.0f} MB")
            print(f"| {loop} | {tool} (separate processes) | {statistics.median(plain_ms):.2f} | "
                  f"{_mmm(means)} | {_mmm(medians)} | {notes} |")
        if (loop, "labcoat_ab") in results:
            means, medians, floor, plain_ms, inside = [], [], [], [], []
            for run in results[(loop, "labcoat_ab")]:
                gm, gmed = _stats(run["times"], args.warm)
                (am, amed), (bm, bmed) = _stats(run["plain_a"], args.warm), \
                    _stats(run["plain_b"], args.warm)
                means.append(gm / ((am + bm) / 2))
                medians.append(gmed / ((amed + bmed) / 2))
                floor.append(bm / am)
                plain_ms.append((am + bm) / 2 * 1e3)
                inside.append(run["guard_seconds"] / len(run["times"]) * 1e6)
            alerts = sum(len(x["alerts"]) for x in results[(loop, "labcoat_ab")])
            print(f"| {loop} | labcoat (in one process, per-step rotation) | "
                  f"{statistics.median(plain_ms):.2f} | {_mmm(means)} | {_mmm(medians)} | "
                  f"A/A floor {_mmm(floor)}; {statistics.median(inside):.0f} us/step inside "
                  f"the guard; {alerts} alerts |")
        if (loop, "tc_plain") in results and (loop, "plain") in results:
            ratio = [_stats(t["times"], args.warm)[0] / _stats(p["times"], args.warm)[0]
                     for t, p in zip(results[(loop, "tc_plain")], results[(loop, "plain")],
                                     strict=True)]
            print(f"| {loop} | (plain in TrainCheck's venv / plain in labcoat's) | | "
                  f"{_mmm(ratio)} | | same loop, no tool |")
    if args.check and "traincheck" in args.arms:
        print()
        for loop in loops:
            work = Path(args.work) / loop
            cmd = [str(Path(args.tc_venv) / "bin" / "traincheck-check"), "-f",
                   str(work / "tc_trace.0"), "-i", str(work / "invariants.json")]
            print("$", " ".join(cmd), flush=True)
            took = _run(cmd, _env(args, loop, "none", 0, work / "x"), work,
                        work / "check.log", nice=True)
            tail = [ln for ln in (work / "check.log").read_text().splitlines()
                    if ln.startswith("Total")]
            print(f"  {loop}: traincheck-check {took:.0f} s; {'; '.join(tail)}")
    bench.save(args, {f"{loop}/{arm}": [x["times"] for x in runs]
                      for (loop, arm), runs in results.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
