"""What every benchmark shares: arguments (`--quick`, `--json`), timing with interleaved
rounds, a temporary LABCOAT_HOME, peer tools' interpreters, JSON results; and, run as a
script, the runner of every benchmark's quick mode (`make bench`).

A benchmark imports it as `import _harness as bench` (its own directory is on sys.path
when it runs as a script):

    parser = bench.parser(__doc__)            # adds --quick and --json
    args = parser.parse_args()
    with bench.temp_home():                   # LABCOAT_HOME in a fresh directory
        times = bench.interleaved({"labcoat": ours, "baseline": theirs}, rounds=5)
    bench.save(args, {name: t.summary() for name, t in times.items()})

Run every benchmark's quick mode (each in a forked child of one process that has
imported numpy, torch and labcoat once, so a quick run costs its work, not its imports):

    .venv/bin/python benchmarks/_harness.py [--only NAME ...] [--jobs 2] [--out DIR]
    .venv/bin/python benchmarks/_harness.py --help-only   # each script's --help (parses)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS_ENV = "LABCOAT_BENCH_RESULTS"  # the runner's folder for each script's JSON
SKIP_MARK = "skipped:"


# --- arguments and results -------------------------------------------------------------


def parser(doc: str | None, **kwargs: Any) -> argparse.ArgumentParser:
    """An ArgumentParser described by the script's docstring, with --quick and --json."""
    kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
    p = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0], **kwargs)
    p.add_argument("--quick", action="store_true",
                   help="a smoke run in seconds: small sizes, peer tools skipped if absent")
    p.add_argument("--json", type=Path, default=None, metavar="FILE",
                   help="also write the results as JSON to FILE")
    return p


def shrink(args: argparse.Namespace, **small: Any) -> argparse.Namespace:
    """With --quick, replace these arguments by the small values given (a smoke run)."""
    if args.quick:
        for name, value in small.items():
            if not hasattr(args, name):
                raise AttributeError(f"shrink: the script has no argument {name!r}")
            setattr(args, name, value)
    return args


def script_name() -> str:
    return Path(sys.argv[0]).stem


def save(args: argparse.Namespace | None, results: dict[str, Any]) -> None:
    """Write `results` as JSON to --json FILE and, under `make bench`, the runner's folder."""
    record = {"script": script_name(), "quick": bool(getattr(args, "quick", False)),
              "results": results}
    targets = [getattr(args, "json", None)]
    if os.environ.get(RESULTS_ENV):
        targets.append(Path(os.environ[RESULTS_ENV]) / f"{script_name()}.json")
    for target in targets:
        if target is not None:
            Path(target).write_text(json.dumps(record, indent=2, default=_plain) + "\n",
                                    encoding="utf-8")


def _plain(value: Any) -> Any:
    if isinstance(value, Timing):
        return value.summary()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    return str(value)


def skip(reason: str, args: argparse.Namespace | None = None) -> None:
    """End the script cleanly: what it needs is absent here (a peer tool, a cluster)."""
    print(f"{SKIP_MARK} {reason}")
    save(args, {"skipped": reason})
    sys.exit(0)


# --- timing ------------------------------------------------------------------------------


@dataclass
class Timing:
    """Wall times of one thing over rounds, in seconds."""

    times: list[float] = field(default_factory=list)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    def summary(self) -> dict[str, float]:
        return {"min": self.min, "median": self.median, "max": self.max,
                "rounds": len(self.times)}

    def __str__(self) -> str:
        return f"min {self.min:.3f} / median {self.median:.3f} / max {self.max:.3f} s"


def timed(fn: Callable[[], Any], rounds: int = 1) -> tuple[Timing, Any]:
    """Call `fn` `rounds` times; its times and its last result."""
    timing, result = Timing(), None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        timing.times.append(time.perf_counter() - start)
    return timing, result


def interleaved(arms: dict[str, Callable[[], Any]], rounds: int) -> dict[str, Timing]:
    """Time each arm once per round, the order rotating every round, so a slow phase of a
    shared machine falls on every arm alike rather than on whichever ran then."""
    names = list(arms)
    timings = {name: Timing() for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            arms[name]()
            timings[name].times.append(time.perf_counter() - start)
    return timings


# --- environment ---------------------------------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_growth(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(seconds, peak resident-set growth in MiB, result) of `fn()`."""
    base, peak, done = _rss(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.005)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    done.set()
    watcher.join()
    return seconds, max(0, max(peak[0], _rss()) - base) / 2**20, result


@contextlib.contextmanager
def temp_home(prefix: str = "labcoat-bench-", keep: Path | None = None) -> Iterator[Path]:
    """LABCOAT_HOME set to a fresh directory (removed after, unless `keep` names one to
    use instead); the previous value is restored."""
    home = Path(keep) if keep is not None else Path(tempfile.mkdtemp(prefix=prefix))
    home.mkdir(parents=True, exist_ok=True)
    before = os.environ.get("LABCOAT_HOME")
    os.environ["LABCOAT_HOME"] = str(home)
    try:
        yield home
    finally:
        if before is None:
            os.environ.pop("LABCOAT_HOME", None)
        else:
            os.environ["LABCOAT_HOME"] = before
        if keep is None:
            shutil.rmtree(home, ignore_errors=True)


def trial_design(directory: Path, *, name: str, steps: int = 5, seeds: int = 2,
                 parallelism: int = 2) -> Path:
    """A design (two arms) whose trials run benchmarks/_trial.py: no torch, milliseconds of
    work, so what is timed is labcoat's."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "design.yaml"
    path.write_text(f"""name: {name}
hypothesis: {{claim: higher quality helps, metric: exact_match, source: items,
             direction: increase}}
command: "{{python}} {BENCH / '_trial.py'} --steps {{steps}} --quality {{quality}} --seed {{seed}}"
params: {{steps: {steps}, quality: 0.3}}
arms:
  base: {{control: true}}
  better: {{params: {{quality: 0.8}}}}
seeds: {seeds}
parallelism: {parallelism}
""", encoding="utf-8")
    return path


def peer_python(env: str, default: str | None = None) -> str | None:
    """A peer tool's interpreter (in its own virtualenv): $`env`, else `default`, if it
    exists there; None otherwise."""
    path = os.environ.get(env) or default
    return path if path and Path(path).exists() else None


def need_peer(args: argparse.Namespace, env: str, default: str | None, tool: str,
              setup: str) -> str:
    """The peer tool's interpreter; with --quick a clean skip when it is absent, else a
    one-line error that says how to create it."""
    python = peer_python(env, default)
    if python is not None:
        return python
    where = os.environ.get(env) or default or f"${env}"
    message = f"no {tool} interpreter at {where}; create it with: {setup} (or set {env})"
    if args.quick:
        skip(message, args)
    raise SystemExit(message)


# --- the runner: every script's quick mode ------------------------------------------------


def scripts() -> list[Path]:
    return sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def _preload() -> None:
    """Import once, in the parent, what most scripts need; each forked child shares it.
    torch._dynamo too: the first optimizer step imports it (1.25 s), and 15 scripts step one
    (their quick runs: 45 s -> 34 s)."""
    for name in ("numpy", "scipy.stats", "torch", "torch._dynamo", "labcoat", "labcoat.store",
                 "labcoat.stats", "labcoat.torch", "labcoat.workloads.tinylm", "labcoat.evals",
                 "labcoat.runner"):
        with contextlib.suppress(ImportError):
            __import__(name)


def _child(path: Path, argv: list[str], log: Path, results: Path) -> None:
    """In a forked child: run the script as __main__, output to `log`; never returns."""
    code = 1
    try:
        os.setsid()  # its own process group, so a timeout ends what it started too
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.environ[RESULTS_ENV] = str(results)
        os.chdir(ROOT)
        sys.argv = [str(path), *argv]
        sys.path.insert(0, str(BENCH))
        import types

        module = types.ModuleType("__main__")
        module.__file__ = str(path)
        sys.modules["__main__"] = module  # pickling by reference (process pools) finds it
        code = 0
        exec(compile(path.read_bytes(), str(path), "exec"), module.__dict__)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - reported in the log, the child then exits
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


@dataclass
class Outcome:
    script: str
    status: str  # ok, skipped, failed, timeout
    seconds: float
    detail: str = ""


def run_all(paths: list[Path], argv: list[str], out: Path, jobs: int = 1,
            timeout: float = 300.0, echo: bool = True, preload: bool = True) -> list[Outcome]:
    """Run each script with `argv` in a forked child, `jobs` at a time; logs and results
    in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    if preload:
        _preload()
    pending, running, done = list(paths), {}, []
    while pending or running:
        while pending and len(running) < jobs:
            path = pending.pop(0)
            log = out / f"{path.stem}.log"
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(path, argv, log, out)
            running[pid] = (path, log, time.monotonic())
        for pid, (path, log, start) in list(running.items()):
            finished, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.monotonic() - start
            if not finished and elapsed < timeout:
                continue
            if not finished:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                outcome = Outcome(path.stem, "timeout", elapsed, f"over {timeout:g} s")
            else:
                code = os.waitstatus_to_exitcode(status)
                text = log.read_text(encoding="utf-8", errors="replace")
                skipped = [ln for ln in text.splitlines() if ln.startswith(SKIP_MARK)]
                if code == 0 and skipped:
                    outcome = Outcome(path.stem, "skipped", elapsed,
                                      skipped[-1][len(SKIP_MARK):].strip())
                elif code == 0:
                    outcome = Outcome(path.stem, "ok", elapsed)
                else:
                    outcome = Outcome(path.stem, "failed", elapsed,
                                      "\n".join(text.strip().splitlines()[-15:]))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # anything it left running
            del running[pid]
            done.append(outcome)
            if echo:
                print(f"{outcome.status:8} {outcome.seconds:7.1f} s  {outcome.script}"
                      + (f"  ({outcome.detail})" if outcome.status == "skipped" else ""),
                      flush=True)
                if outcome.status in ("failed", "timeout"):
                    print("    " + outcome.detail.replace("\n", "\n    "), flush=True)
        time.sleep(0.05)
    (out / "summary.json").write_text(json.dumps(
        [o.__dict__ for o in sorted(done, key=lambda o: o.script)], indent=2) + "\n",
        encoding="utf-8")
    return done


def main() -> None:
    p = argparse.ArgumentParser(description="Run every benchmark's quick mode (make bench).")
    p.add_argument("--only", nargs="+", metavar="NAME", help="these scripts (file stems)")
    p.add_argument("--jobs", type=int, default=1, help="scripts at a time")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per script")
    p.add_argument("--out", type=Path, default=None,
                   help="logs, JSON results and summary.json (default: a temporary folder)")
    p.add_argument("--no-preload", action="store_true",
                   help="import nothing ahead (each child imports what it needs)")
    p.add_argument("--help-only", action="store_true",
                   help="only run each script's --help (every one parses its arguments)")
    args = p.parse_args()
    paths = scripts()
    if args.only:
        unknown = sorted(set(args.only) - {s.stem for s in paths})
        if unknown:
            p.error(f"no benchmark {', '.join(unknown)}; choose from "
                    f"{', '.join(s.stem for s in paths)}")
        paths = [s for s in paths if s.stem in args.only]
    out = args.out or Path(tempfile.mkdtemp(prefix="labcoat-bench-"))
    argv = ["--help"] if args.help_only else ["--quick"]
    start = time.monotonic()
    done = run_all(paths, argv, out, jobs=args.jobs, timeout=args.timeout,
                   preload=not args.no_preload)
    bad = [o.script for o in done if o.status in ("failed", "timeout")]
    print(f"{len(done) - len(bad)}/{len(done)} ran ({sum(o.status == 'skipped' for o in done)} "
          f"skipped) in {time.monotonic() - start:.0f} s; logs and results in {out}")
    if bad:
        sys.exit(f"failed: {', '.join(bad)}")


if __name__ == "__main__":
    main()
