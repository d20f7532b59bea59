"""Generated multi-rank training logs with injected failures (no downloads).

A *design* fixes what a training job prints: world size, steps, how often and in
which format each rank reports progress (tinylm-like, ``|``-separated with a
per-step time, Megatron-like, or Hugging Face-like where only rank 0 prints),
how the rank is visible (torchrun's ``[default3]:`` tee prefix, PyTorch's
``[rank3]:`` prefix, a ``[rank 3]`` tag in a logging header, or known to the
capture), the launcher (torchrun or srun), fp16 overflow chatter, and whether a
handled, retried download error appears in every run. Clean runs of a design
are the references; a failed run injects one failure at a step and rank:

    oom, exception, disk_full, nan, rank_killed, hang, slow_rank,
    collective_timeout, hardware, dataloader

and prints what PyTorch, NCCL, torchrun or Slurm print in that case, including
the secondary failures of the other ranks (watchdog timeouts, launcher
terminations). Lines are captured the way labcoat's runner does it: one poll
every 0.3 s stamps the time, and a poll's stderr lines sort before its stdout.

The truth of a scenario is (cause, rank, step interval): the step is right if it
lies between the last step the failing rank printed before the failure and the
step it failed in (the logs cannot say more). A rank of None means no rank can
be singled out (e.g. a hang where every rank stopped alike).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from labcoat.diagnose import AttemptEnd, LogLine, MetricPoint, RunEvent

KINDS = ("oom", "exception", "disk_full", "nan", "rank_killed", "hang", "slow_rank",
         "collective_timeout", "hardware", "dataloader")
CAUSE = {"oom": "out_of_memory", "exception": "exception", "disk_full": "disk_full",
         "nan": "nan", "rank_killed": "signal", "hang": "hang", "hardware": "hardware",
         "dataloader": "dataloader_worker", "collective_timeout": "collective_timeout"}
T0 = 1714564800.0  # 2024-05-01 12:00:00 UTC
POLL = 0.3  # the runner's capture poll (labcoat.runner)
SITE = "/opt/conda/lib/python3.11/site-packages"
USER = "/home/ada/proj"


@dataclass(frozen=True)
class Design:
    seed: int
    ranks: int
    steps: int
    print_every: int
    progress: str  # "tinylm" | "pipes" | "megatron" | "hf"
    prefix: str  # "tee" | "rank" | "logging" | "known"
    launcher: str  # "torchrun" | "srun"
    period: float  # seconds per step
    eval_every: int
    ckpt_every: int
    fp16: bool
    retry_distractor: bool
    metrics: bool
    run_id: int

    def host(self, rank: int) -> str:
        return f"node-{rank // 8}"


def make_design(seed: int) -> Design:
    r = random.Random(f"design:{seed}")
    print_every = r.choice((1, 1, 5, 10))
    steps = r.randrange(60, 160)
    ckpt_every = print_every * r.choice((2, 4, 5)) if print_every > 1 else r.choice((10, 20, 25))
    return Design(seed=seed, ranks=r.choice((2, 4, 4, 8, 8, 16)), steps=steps,
                  print_every=print_every,
                  progress=r.choice(("tinylm", "pipes", "pipes", "megatron", "hf")),
                  prefix=r.choice(("tee", "rank", "logging", "known")),
                  launcher=r.choice(("torchrun", "torchrun", "srun")),
                  period=r.uniform(0.3, 1.5), eval_every=ckpt_every * r.choice((1, 2)),
                  ckpt_every=ckpt_every, fp16=r.random() < 0.4,
                  retry_distractor=r.random() < 0.4, metrics=r.random() < 0.5,
                  run_id=r.randrange(1, 99))


@dataclass
class Scenario:
    kind: str
    design: Design
    lines: list[LogLine]
    end: AttemptEnd
    events: list[RunEvent] = field(default_factory=list)
    metrics: list[MetricPoint] = field(default_factory=list)
    cause: str | None = None  # truth
    rank: int | None = None
    steps: tuple[int, int] = (0, 0)  # the reported step is right if inside (inclusive)


class _Sim:
    """Collects (time, rank, stream, text) and renders them as captured `LogLine`s."""

    def __init__(self, design: Design, rng: random.Random) -> None:
        self.d, self.r = design, rng
        self.out: list[tuple[float, int | None, str, str, str]] = []  # + level
        self.pids = {k: 30000 + 7 * k + rng.randrange(100) for k in range(design.ranks)}

    def t(self, step: float) -> float:
        return T0 + 30 + step * self.d.period

    def rank_line(self, time: float, rank: int, text: str, stream: str = "stdout",
                  level: str = "INFO", raw: bool = False) -> None:
        """A line printed by `rank`. raw: printed by Python itself (tracebacks, warnings),
        so a logging header is absent."""
        d = self.d
        if d.prefix == "tee":
            text = f"[default{rank}]:{text}"
        elif d.prefix == "rank":
            text = f"[rank{rank}]: {text}"
        elif d.prefix == "logging" and not raw:
            text = f"{_stamp(time)} - train - {level} - [rank {rank}] {text}"
        self.out.append((time, rank, stream, text, level))

    def launcher_line(self, time: float, text: str, stream: str = "stderr") -> None:
        self.out.append((time, None, stream, text, "INFO"))

    def traceback(self, time: float, rank: int | None, frames: list[tuple[str, int, str, str]],
                  error: str, extra: tuple[str, ...] = ()) -> None:
        """A Python traceback printed by `rank` (None: by the launcher)."""
        lines = ["Traceback (most recent call last):"]
        for path, number, function, code in frames:
            lines += [f'  File "{path}", line {number}, in {function}', f"    {code}"]
        lines += [error, *extra]
        for i, text in enumerate(lines):
            if rank is None:
                self.launcher_line(time + i * 1e-4, text)
            else:
                self.rank_line(time + i * 1e-4, rank, text, "stderr", "ERROR", raw=True)

    def lines(self, last_step: int) -> tuple[list[LogLine], str | None]:
        """Captured lines (poll time; stderr before stdout within a poll; the step the
        journal had reached at that poll) and the last stderr line (what the runner's
        cause string quotes)."""
        d = self.d
        polled = []
        for seq, (time, rank, stream, text, _) in enumerate(sorted(self.out, key=lambda x: x[0])):
            captured = math.ceil((time - T0) / POLL) * POLL + T0
            polled.append((captured, stream, seq, rank, text))
        polled.sort(key=lambda x: (x[0], x[1], x[2]))
        def journal_step(time: float) -> int | None:
            step = min(last_step, int((time - T0 - 30) / d.period))
            return step if step >= 1 else None

        out = [LogLine(text=text, trial="t", attempt=1, stream=stream, time=captured,
                       step=journal_step(captured), rank=rank if d.prefix == "known" else None,
                       host=d.host(rank) if d.prefix == "known" and rank is not None else None)
               for captured, stream, _, rank, text in polled]
        last_err = next((x[3] for x in sorted(self.out, key=lambda x: x[0], reverse=True)
                         if x[2] == "stderr"), None)
        return out, last_err


def _stamp(time: float) -> str:
    whole = int(time)
    hh, mm, ss = (whole // 3600) % 24, (whole // 60) % 60, whole % 60
    return f"2024-05-01 {hh:02d}:{mm:02d}:{ss:02d},{int((time - whole) * 1000):03d}"


def _glog(time: float, pid: int, where: str, level: str = "W") -> str:
    whole = int(time)
    return (f"{level}0501 {(whole // 3600) % 24:02d}:{(whole // 60) % 60:02d}:{whole % 60:02d}."
            f"{int((time - whole) * 1e6):06d} {pid} {where}] ")


# --- what a healthy run prints ----------------------------------------------------------------


def _loss(step: int, steps: int, rank: int, rng: random.Random) -> float:
    return 1.6 + 2.2 * math.exp(-3.0 * step / steps) + rng.gauss(0, 0.03) + 0.002 * rank


def _progress(sim: _Sim, step: int, rank: int, time: float, loss: float,
              slow: float = 1.0) -> None:
    d, r = sim.d, sim.r
    lr = 3e-4 * min(1.0, step / 10) * (0.5 + 0.5 * math.cos(math.pi * step / d.steps))
    shown = "nan" if math.isnan(loss) else f"{loss:.4f}"
    ms = d.period * 1000 * r.uniform(0.85, 0.95) * slow
    gnorm = "nan" if math.isnan(loss) else f"{r.uniform(0.3, 1.2):.3f}"
    if d.progress == "tinylm":
        text = f"step {step}/{d.steps} loss {shown} lr {lr:.2e} ({(time - T0 - 30):.1f}s)"
    elif d.progress == "pipes":
        text = (f"step {step} | loss {shown} | grad_norm {gnorm} | lr {lr:.3e} | "
                f"{ms:.1f} ms/step")
    elif d.progress == "megatron":
        text = (f" iteration {step:8d}/{d.steps:8d} | consumed samples: {step * 256:10d} | "
                f"elapsed time per iteration (ms): {ms:.1f} | learning rate: {lr:.3E} | "
                f"lm loss: {'nan' if math.isnan(loss) else f'{loss:.6E}'} | loss scale: 1.0 | "
                f"grad norm: {gnorm} |")
    else:  # hf: a dict, no step in the text
        text = (f"{{'loss': {shown}, 'grad_norm': {gnorm}, 'learning_rate': {lr:.4e}, "
                f"'epoch': {step / d.steps:.2f}}}")
    sim.rank_line(time, rank, text)


def _prints(design: Design, rank: int) -> bool:
    return design.progress != "hf" or rank == 0


def _startup(sim: _Sim) -> None:
    d, r = sim.d, sim.r
    t = T0 + 1
    if d.launcher == "torchrun":
        sim.launcher_line(t, _glog(t, 4100, "torch/distributed/run.py:779") + "")
        sim.launcher_line(t, "*****************************************")
        sim.launcher_line(t, "Setting OMP_NUM_THREADS environment variable for each process to "
                             "be 1 in default, to avoid your system being overloaded, please "
                             "further tune the variable for optimal performance in your "
                             "application as needed.")
        sim.launcher_line(t, "*****************************************")
    for k in range(d.ranks):
        tk = t + 3 + r.uniform(0, 2)
        node = d.host(k)
        for text in (f"{node}:{sim.pids[k]}:{sim.pids[k]} [{k % 8}] NCCL INFO Bootstrap : "
                     f"Using eth0:10.0.{k // 8}.{k % 8 + 10}<0>",
                     f"{node}:{sim.pids[k]}:{sim.pids[k]} [{k % 8}] NCCL INFO "
                     "cudaDriverVersion 12020",
                     f"{node}:{sim.pids[k]}:{sim.pids[k] + 40} [{k % 8}] NCCL INFO Using "
                     "network IB"):
            sim.rank_line(tk, k, text, raw=True)
        sim.rank_line(tk + 0.1, k, f"torch.distributed initialized: backend=nccl "
                                   f"world_size={d.ranks} rank={k}")
        sim.rank_line(tk + 0.2, k, f"{SITE}/torch/cuda/amp/grad_scaler.py:120: FutureWarning: "
                                   "`torch.cuda.amp.GradScaler(args...)` is deprecated. Please "
                                   "use `torch.amp.GradScaler('cuda', args...)` instead.",
                      "stderr", "WARNING", raw=True)
        sim.rank_line(tk + 0.2, k, "  warnings.warn(", "stderr", "WARNING", raw=True)
    t0 = t + 8
    for key, value in (("lr", "3e-4"), ("batch_size", "32"), ("max_steps", str(d.steps)),
                       ("precision", "fp16" if d.fp16 else "bf16"), ("seed", str(d.seed))):
        sim.rank_line(t0, 0, f"  {key}: {value}")
    sim.rank_line(t0 + 0.5, 0, f"Model has {124439808 + d.seed} parameters")
    sim.rank_line(t0 + 0.6, 0, f"Loading dataset fineweb split train from /data/{d.seed % 9}/"
                               "shards")
    sim.rank_line(t0 + 1.5, 0, "Loading checkpoint shards: 100%|██████████| 2/2 "
                               "[00:02<00:00,  1.05s/it]", "stderr", raw=True)


def _healthy_step(sim: _Sim, step: int, ranks: list[int], *, slow_rank: int | None = None,
                  slow: float = 1.0, nan_from: dict[int, int] | None = None,
                  save: bool = True) -> None:
    d, r = sim.d, sim.r
    base = sim.t(step)
    if step % d.print_every == 0:
        for k in ranks:
            if not _prints(d, k):
                continue
            loss = _loss(step, d.steps, k, r)
            if nan_from and k in nan_from and step >= nan_from[k]:
                loss = float("nan")
            factor = slow if k == slow_rank else 1.0
            _progress(sim, step, k, base + r.uniform(0, 0.05), loss, factor)
    if d.fp16 and r.random() < 0.02:
        for k in ranks:
            sim.rank_line(base + 0.01, k, "Gradient overflow.  Skipping step, loss scaler 0 "
                                          f"reducing loss scale to {2.0 ** r.randint(12, 16)}")
    if 0 in ranks and step % d.eval_every == 0:
        sim.rank_line(base + 0.2, 0, f"eval step {step}: exact_match {r.uniform(0.1, 0.6):.3f}")
    if 0 in ranks and step % d.ckpt_every == 0 and save:
        path = f"/scratch/ckpt/run-{d.run_id}/step_{step:07d}.pt"
        sim.rank_line(base + 0.3, 0, f"Saving checkpoint to {path}")
        sim.rank_line(base + 0.3 + r.uniform(1, 4) * 0.1, 0,
                      f"Saved checkpoint to {path} in {r.uniform(0.5, 3):.1f}s")


def _retry(sim: _Sim, step: int) -> None:
    """A handled error every run of such a design prints (a distractor)."""
    t = sim.t(step) + 0.4
    sim.rank_line(t, 0, "retrying shard download (attempt 1/5): Connection reset by peer",
                  "stderr", "WARNING")
    sim.traceback(t + 0.01, 0, [
        (f"{USER}/data.py", 77, "fetch", "return session.get(url, timeout=30)"),
        (f"{SITE}/requests/sessions.py", 602, "get", 'return self.request("GET", url, **kwargs)'),
        (f"{SITE}/urllib3/connectionpool.py", 715, "urlopen", "httplib_response = self._make_"
                                                              "request("),
    ], "ConnectionResetError: [Errno 104] Connection reset by peer")


def clean(design: Design, seed: int) -> list[LogLine]:
    """A successful run of `design` (a reference)."""
    r = random.Random(f"clean:{design.seed}:{seed}")
    sim = _Sim(design, r)
    _startup(sim)
    ranks = list(range(design.ranks))
    retry_at = r.randrange(2, design.steps // 2)
    for step in range(1, design.steps + 1):
        _healthy_step(sim, step, ranks)
        if design.retry_distractor and step == retry_at:
            _retry(sim, step)
    end = sim.t(design.steps) + 1
    sim.rank_line(end, 0, f"Training finished in {end - T0:.1f}s")
    sim.rank_line(end, 0, f"final exact_match {r.uniform(0.3, 0.6):.3f}")
    return sim.lines(design.steps)[0]


# --- failures ---------------------------------------------------------------------------------


def _user_frames(r: random.Random, inner: list[tuple[str, int, str, str]]
                 ) -> list[tuple[str, int, str, str]]:
    return [(f"{USER}/train.py", r.randint(300, 340), "<module>", "main()"),
            (f"{USER}/train.py", r.randint(200, 280), "main", "loss = train_step(model, batch)"),
            *inner]


def _model_frames(r: random.Random) -> list[tuple[str, int, str, str]]:
    return [(f"{USER}/train.py", r.randint(120, 190), "train_step", "out = model(**batch)"),
            (f"{SITE}/torch/nn/modules/module.py", 1736, "_wrapped_call_impl",
             "return self._call_impl(*args, **kwargs)"),
            (f"{SITE}/torch/nn/modules/module.py", 1747, "_call_impl",
             "return forward_call(*args, **kwargs)"),
            (f"{USER}/model.py", r.randint(40, 99), "forward", "att = (q @ k.transpose(-2, -1))"
                                                               " * self.scale")]


def _react(sim: _Sim, culprit: int, t: float, code: int, *, how: str,
           peers_timeout: bool, decoy: bool = False) -> tuple[int, str]:
    """The other ranks and the launcher after `culprit` failed at time `t` with exit
    `code` (negative: a signal). Returns the attempt's exit code and a note."""
    d, r = sim.d, sim.r
    peers = [k for k in range(d.ranks) if k != culprit]
    later = t + r.uniform(20, 40)  # the watchdog's timeout, compressed
    if peers_timeout:
        for k in peers:
            seq = 1000 + r.randrange(9000)
            sim.rank_line(later + r.uniform(0, 0.5), k,
                          f"[E ProcessGroupNCCL.cpp:616] [Rank {k}] Watchdog caught collective "
                          f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                          f"NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for "
                          f"{600000 + r.randrange(200)} milliseconds before timing out.",
                          "stderr", "ERROR", raw=True)
            sim.rank_line(later + 0.6, k, "[E ProcessGroupNCCL.cpp:1577] [PG 0 Rank "
                                          f"{k}] To avoid data inconsistency, we are taking the "
                                          "entire process down.", "stderr", "ERROR", raw=True)
        end_t = later + 1.0
    else:
        end_t = t + r.uniform(1, 5)
    if d.launcher == "torchrun":
        first, first_code = (culprit, code)
        if decoy:  # a peer aborted by its watchdog is the "first observed failure"
            first, first_code = r.choice(peers), -6
        for k in peers if not peers_timeout else []:
            sim.launcher_line(end_t, _glog(end_t, 4100, "torch/distributed/elastic/"
                                           "multiprocessing/api.py:897")
                              + f"Sending process {sim.pids[k]} closing signal SIGTERM")
        sim.launcher_line(end_t + 0.2, _glog(end_t, 4100, "torch/distributed/elastic/"
                                             "multiprocessing/api.py:869", "E")
                          + f"failed (exitcode: {first_code}) local_rank: {first % 8} (pid: "
                            f"{sim.pids[first]}) of binary: /opt/conda/bin/python3.11")
        _torchrun_summary(sim, end_t + 0.3, first, first_code)
        return 1, how
    # srun: one line per task that ended badly
    for k in [culprit] + (peers if peers_timeout else []):
        k_code = code if k == culprit else -6
        what = {-9: "Killed", -6: "Aborted (core dumped)", -15: "Terminated"}.get(
            k_code, f"Exited with exit code {k_code}")
        sim.launcher_line(end_t + 0.1, f"srun: error: {d.host(k)}: task {k}: {what}")
    return (128 - code if code < 0 else code), how


def _torchrun_summary(sim: _Sim, t: float, rank: int, code: int) -> None:
    d = sim.d
    sim.traceback(t, None, [
        ("/opt/conda/bin/torchrun", 8, "<module>", "sys.exit(main())"),
        (f"{SITE}/torch/distributed/elastic/multiprocessing/errors/__init__.py", 355,
         "wrapper", "return f(*args, **kwargs)"),
        (f"{SITE}/torch/distributed/run.py", 919, "main", "run(args)"),
        (f"{SITE}/torch/distributed/launcher/api.py", 263, "launch_agent",
         "raise ChildFailedError("),
    ], "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ")
    trace = (f"Signal {-code} ({ {9: 'SIGKILL', 6: 'SIGABRT', 15: 'SIGTERM'}.get(-code, 'SIG')}"
             f") received by PID {sim.pids[rank]}" if code < 0 else
             "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
    for text in ("============================================================",
                 "train.py FAILED", "------------------------------------------------------------",
                 "Failures:", "  <NO_OTHER_FAILURES>",
                 "------------------------------------------------------------",
                 "Root Cause (first observed failure):", "[0]:",
                 f"  time      : 2024-05-01_{_stamp(t)[11:19]}", f"  host      : {d.host(rank)}",
                 f"  rank      : {rank} (local_rank: {rank % 8})",
                 f"  exitcode  : {code} (pid: {sim.pids[rank]})", "  error_file: <N/A>",
                 f"  traceback : {trace}",
                 "============================================================"):
        sim.launcher_line(t + 0.01, text)


def failed(design: Design, kind: str, seed: int) -> Scenario:
    """A run of `design` that fails by `kind` (see `KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}; choose one of {', '.join(KINDS)}")
    r = random.Random(f"failed:{design.seed}:{kind}:{seed}")
    sim = _Sim(design, r)
    _startup(sim)
    d = design
    ranks = list(range(d.ranks))
    pe = d.print_every
    culprit = r.randrange(d.ranks)
    lo, hi = int(d.steps * 0.3), int(d.steps * 0.9)
    s = r.randint(lo, hi)  # the failing step
    if kind == "disk_full":
        s = max(d.ckpt_every, (s // d.ckpt_every) * d.ckpt_every)
        culprit = 0 if r.random() < 0.5 else culprit
    if kind in ("nan", "slow_rank"):
        s = max(pe, (s // pe) * pe)
    retry_at = r.randrange(2, max(3, s - 1))
    events: list[RunEvent] = []
    metrics: list[MetricPoint] = []
    truth_rank: int | None = culprit
    slow_from = s if kind == "slow_rank" else None
    slow = r.uniform(2.5, 6.0)
    stall = min(d.steps, s + r.randint(3, 12) * pe) if kind == "slow_rank" else None
    nan_from: dict[int, int] = {}
    if kind == "nan":
        nan_from = {k: s if k == culprit else s + 1 for k in ranks}
    last = s - 1 if kind not in ("disk_full", "nan") else s
    if kind == "slow_rank":
        last = stall - 1
    hang_style = r.choice(("earlier", "alike")) if kind == "hang" else None
    if hang_style == "earlier" and d.progress == "hf":
        hang_style = "alike"  # only rank 0 prints progress: nobody is seen to stop first
    for step in range(1, last + 1):
        _healthy_step(sim, step, ranks, slow_rank=culprit if slow_from and step >= slow_from
                      else None, slow=slow, nan_from=nan_from,
                      save=not (kind == "disk_full" and step == s))
        if d.retry_distractor and step == retry_at:
            _retry(sim, step)
    if hang_style == "earlier" and s % pe == 0:
        # the others printed step s before blocking in its all-reduce; the culprit never did
        for k in ranks:
            if k != culprit and _prints(d, k):
                _progress(sim, s, k, sim.t(s) + r.uniform(0, 0.05), _loss(s, d.steps, k, r))
    elif hang_style == "earlier":
        hang_style = "alike"
    if d.metrics:
        for step in range(1, last + 1):
            value = _loss(step, d.steps, 0, r) if not (kind == "nan" and step >= s) \
                else float("nan")
            metrics.append(MetricPoint(step=step, name="loss", value=value))
    t = sim.t(last) + r.uniform(0.1, 0.6)
    printed = [k for k in range(1, last + 1) if k % pe == 0]
    p = printed[-1] if printed else 0
    steps = (p, s)
    exit_code, cause_text = 1, None
    peers_timeout = r.random() < 0.5

    if kind == "oom":
        if r.random() < 0.75:
            gib = r.choice((1.0, 2.0, 4.0, 8.5))
            sim.traceback(t, culprit, _user_frames(r, _model_frames(r)),
                          f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                          f"{gib:.2f} GiB. GPU {culprit % 8} has a total capacity of 79.15 GiB "
                          f"of which {r.uniform(0.1, 2):.2f} GiB is free. Including non-PyTorch "
                          f"memory, this process has {r.uniform(70, 79):.2f} GiB memory in use. "
                          "If reserved but unallocated memory is large try setting "
                          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
                          "fragmentation.")
            exit_code, _ = _react(sim, culprit, t, 1, how="oom", peers_timeout=peers_timeout)
        else:  # the kernel's OOM killer: no traceback, the launcher sees SIGKILL
            exit_code, _ = _react(sim, culprit, t, -9, how="oom-killer",
                                  peers_timeout=peers_timeout)
            sim.launcher_line(t + 45, "slurmstepd: error: Detected 1 oom_kill event in StepId="
                                      f"{r.randrange(10**5, 10**6)}.0. Some of the step tasks "
                                      "have been OOM Killed.")
    elif kind == "exception":
        choice = r.randrange(5)
        if choice == 0:
            frames = _user_frames(r, [(f"{USER}/data.py", r.randint(20, 60), "collate",
                                       "ids = [ex['input_ids'] for ex in examples]")])
            error = "KeyError: 'input_ids'"
        elif choice == 1:
            frames = _user_frames(r, _model_frames(r))
            error = (f"RuntimeError: shape '[{r.choice((8, 16))}, 512, 12, 64]' is invalid for "
                     f"input of size {r.randrange(10**6, 10**7)}")
        elif choice == 2:
            frames = _user_frames(r, [(f"{USER}/train.py", r.randint(120, 190), "train_step",
                                       "loss = F.cross_entropy(logits, labels)"),
                                      (f"{SITE}/torch/nn/functional.py", 3479, "cross_entropy",
                                       "return torch._C._nn.cross_entropy_loss(")])
            error = (f"ValueError: Expected input batch_size ({r.choice((16, 32))}) to match "
                     f"target batch_size ({r.choice((12, 24))}).")
        elif choice == 3:
            frames = _user_frames(r, [(f"{USER}/data.py", r.randint(60, 90), "__getitem__",
                                       "return np.load(self.files[i])")])
            error = (f"FileNotFoundError: [Errno 2] No such file or directory: "
                     f"'/data/shards/shard_{r.randrange(999):05d}.npy'")
        else:
            frames = _user_frames(r, [(f"{USER}/sched.py", r.randint(10, 40), "lr_at",
                                       "return base * (step - warmup) / (total - warmup)")])
            error = "ZeroDivisionError: division by zero"
        sim.traceback(t, culprit, frames, error)
        exit_code, _ = _react(sim, culprit, t, 1, how="exception", peers_timeout=peers_timeout)
    elif kind == "disk_full":
        path = f"/scratch/ckpt/run-{d.run_id}/step_{s:07d}.pt"
        ts = sim.t(s) + 0.3
        sim.rank_line(ts, culprit, f"Saving checkpoint to {path}"
                      + ("" if culprit == 0 else f".rank{culprit}"))
        variant = r.randrange(3)
        frames = _user_frames(r, [(f"{USER}/train.py", r.randint(60, 90), "save_checkpoint",
                                   "torch.save(state, path)"),
                                  (f"{SITE}/torch/serialization.py", 850, "save",
                                   "_save(obj, opened_zipfile, pickle_module, pickle_protocol)"),
                                  (f"{SITE}/torch/serialization.py", 1114, "_save",
                                   "zip_file.write_record(name, storage, num_bytes)")])
        if variant == 0:
            sim.traceback(ts + 0.5, culprit, frames,
                          "RuntimeError: [enforce fail at inline_container.cc:778] . "
                          f"PytorchStreamWriter failed writing file data/{r.randrange(300)}: "
                          "file write failed")
        elif variant == 1:
            sim.traceback(ts + 0.5, culprit, frames[:3],
                          f"OSError: [Errno 28] No space left on device: '{path}.tmp'")
        else:
            sim.traceback(ts + 0.5, culprit, frames[:3],
                          f"labcoat.torch._errors.CheckpointError: saving the checkpoint of step "
                          f"{s} to {path} failed: [Errno 28] No space left on device")
        exit_code, _ = _react(sim, culprit, ts + 0.5, 1, how="disk", peers_timeout=peers_timeout)
        steps = (s, s)
    elif kind == "nan":
        guarded = d.progress == "hf" or r.random() < 0.5
        if guarded:
            events.append(RunEvent(kind="guard.alert", message=f"loss is nan at step {s}",
                                   step=s, rank=culprit, level="critical",
                                   data={"rule": "nonfinite.loss", "severity": "critical"}))
            sim.rank_line(t, culprit, f"labcoat: guard stopped the run at step {s}: rule "
                                      f"nonfinite.loss (critical): loss is nan at step {s}",
                          "stderr", "CRITICAL", raw=True)
            exit_code, _ = _react(sim, culprit, t, 3, how="guard", peers_timeout=peers_timeout)
        else:
            sim.traceback(t, culprit, _user_frames(r, [(f"{USER}/train.py", r.randint(120, 190),
                                                        "train_step",
                                                        "raise FloatingPointError(f'loss is "
                                                        "{loss} at step {step}')")]),
                          f"FloatingPointError: loss is nan at step {s}")
            exit_code, _ = _react(sim, culprit, t, 1, how="nan", peers_timeout=peers_timeout)
        steps = (s, s)
    elif kind == "rank_killed":
        if d.launcher == "srun" or r.random() < 0.5:
            exit_code, _ = _react(sim, culprit, t, -9, how="kill", peers_timeout=peers_timeout)
        else:
            exit_code, _ = _react(sim, culprit, t, -9, how="kill", peers_timeout=False)
        if d.launcher == "srun":
            exit_code = 137
    elif kind == "hang":
        if hang_style == "alike":
            truth_rank = None
        if r.random() < 0.5 and d.launcher == "torchrun":  # the runner's SIGTERM, relayed
            t_kill = t + 300
            sim.launcher_line(t_kill, _glog(t_kill, 4100, "torch/distributed/elastic/agent/"
                                            "server/api.py:704") + "Received Signals.SIGTERM "
                                            "death signal, shutting down workers")
            for k in ranks:
                sim.launcher_line(t_kill, _glog(t_kill, 4100, "torch/distributed/elastic/"
                                                "multiprocessing/api.py:897")
                                  + f"Sending process {sim.pids[k]} closing signal SIGTERM")
            sim.traceback(t_kill + 0.1, None, [("/opt/conda/bin/torchrun", 8, "<module>",
                                                "sys.exit(main())")],
                          "torch.distributed.elastic.multiprocessing.api.SignalException: "
                          "Process 4100 got signal: 15")
        exit_code, cause_text = -15, "hang: no journal line for 300 s"
        if hang_style == "earlier" and s % pe == 0:
            steps = (p, s)
    elif kind == "slow_rank":
        first_slow = next(k for k in range(slow_from, d.steps + 1) if k % pe == 0)
        steps = (s, first_slow)
        t = sim.t(stall) + r.uniform(0.1, 0.5)
        if r.random() < 0.5:
            exit_code, _ = _react(sim, culprit, t, -6, how="stall", peers_timeout=True)
            # the straggler never entered the collective: it reports nothing
            kind_cause = "collective_timeout"
        else:
            exit_code, cause_text = -15, "hang: no journal line for 300 s"
            kind_cause = "hang"
    elif kind == "collective_timeout":
        if r.random() < 0.7:
            node = d.host(culprit)
            sim.rank_line(t, culprit, f"{node}:{sim.pids[culprit]}:{sim.pids[culprit] + 61} "
                                      f"[{culprit % 8}] NCCL WARN NET/IB : Got completion from "
                                      f"peer 10.0.{r.randrange(4)}.{r.randrange(10, 30)}<"
                                      f"{r.randrange(30000, 60000)}> with error 12, opcode 0, "
                                      "len 0, vendor err 129 (Recv)", "stderr", raw=True)
            later = t + r.uniform(20, 40)
            for k in ranks:
                sim.rank_line(later + r.uniform(0, 0.5), k,
                              f"[E ProcessGroupNCCL.cpp:616] [Rank {k}] Watchdog caught "
                              f"collective operation timeout: WorkNCCL(SeqNum={r.randrange(9999)}"
                              ", OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)="
                              f"600000) ran for {600000 + r.randrange(200)} milliseconds before "
                              "timing out.", "stderr", "ERROR", raw=True)
            if d.launcher == "torchrun":
                decoy = r.choice(ranks)
                _torchrun_summary(sim, later + 2, decoy, -6)
            else:
                for k in ranks:
                    sim.launcher_line(later + 2, f"srun: error: {d.host(k)}: task {k}: Aborted "
                                                 "(core dumped)")
        else:  # a monitored barrier names the rank that never arrived
            sim.traceback(t + 30, 0, _user_frames(r, [(f"{USER}/train.py", 95, "sync",
                                                       "dist.monitored_barrier(timeout=tmo)"),
                                                      (f"{SITE}/torch/distributed/"
                                                       "distributed_c10d.py", 4390,
                                                       "monitored_barrier",
                                                       "return group_to_use.monitored_barrier("
                                                       "timeout, wait_all_ranks=wait_all_ranks)"
                                                       )]),
                          f"RuntimeError: [Rank 0]: Ranks {culprit} failed to pass "
                          "monitoredBarrier in 1800000 ms")
            if culprit == 0:
                truth_rank = 0
        exit_code = 1
    elif kind == "hardware":
        if r.random() < 0.7:
            sim.traceback(t, culprit, _user_frames(r, _model_frames(r)),
                          "RuntimeError: CUDA error: uncorrectable ECC error encountered",
                          ("CUDA kernel errors might be asynchronously reported at some other "
                           "API call, so the stacktrace below might be incorrect.",
                           "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"))
            exit_code, _ = _react(sim, culprit, t, 1, how="ecc", peers_timeout=peers_timeout)
        else:
            sim.traceback(t, culprit, _user_frames(r, _model_frames(r)),
                          "RuntimeError: CUDA error: unspecified launch failure")
            exit_code, _ = _react(sim, culprit, t, 1, how="xid", peers_timeout=peers_timeout)
            sim.launcher_line(t + 50, f"NVRM: Xid (PCI:0000:{r.choice(('3b', '5e', '86'))}:00): "
                                      f"79, pid={sim.pids[culprit]}, GPU has fallen off the bus.")
    elif kind == "dataloader":
        if r.random() < 0.5:
            sim.rank_line(t - 0.05, culprit, "ERROR: Unexpected bus error encountered in worker. "
                                             "This might be caused by insufficient shared memory "
                                             "(shm).", "stderr", raw=True)
            message = ("RuntimeError: DataLoader worker (pid "
                       f"{r.randrange(40000, 60000)}) is killed by signal: Bus error. It is "
                       "possible that dataloader's workers are out of shared memory. Please "
                       "try to raise your shared memory limit.")
        else:
            message = (f"RuntimeError: DataLoader worker (pid {r.randrange(40000, 60000)}) is "
                       "killed by signal: Killed.")
        sim.traceback(t, culprit, [
            (f"{USER}/train.py", r.randint(300, 340), "<module>", "main()"),
            (f"{USER}/train.py", r.randint(200, 280), "main", "for batch in loader:"),
            (f"{SITE}/torch/utils/data/dataloader.py", 701, "__next__",
             "data = self._next_data()"),
            (f"{SITE}/torch/utils/data/dataloader.py", 1448, "_next_data",
             "idx, data = self._get_data()"),
            (f"{SITE}/torch/utils/data/_utils/signal_handling.py", 73, "handler",
             "_error_if_any_worker_fails()")], message)
        exit_code, _ = _react(sim, culprit, t, 1, how="dataloader", peers_timeout=peers_timeout)

    lines, last_err = sim.lines(last)
    if cause_text is None:
        if exit_code == 137:
            cause_text = "exit 137" + (f": {last_err}" if last_err else "")
        else:
            cause_text = f"exit {exit_code}" + (f": {last_err}" if last_err else "")
    cause = CAUSE.get(kind) if kind != "slow_rank" else kind_cause
    end = AttemptEnd(cause=cause_text, exit_code=exit_code, last_step=last)
    return Scenario(kind, design, lines, end, events, metrics, cause, truth_rank, steps)
