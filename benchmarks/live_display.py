"""CPU per redraw of `labcoat run`'s live view with thousands of trials.

Baseline, measured in the same run: the old view, a row per trial (forced here by
raising SUMMARY_AT past the trial count), redrawn 4 times a second by Rich's
auto-refresh. Now: the summary (counts per state per arm, running trials, latest
failures), redrawn at most REFRESH_PER_SECOND times a second.

    .venv/bin/python benchmarks/live_display.py [--trials 2000] [--redraws 20] [--quick]
"""

from __future__ import annotations

import io
import time

import _harness as bench
from rich.console import Console

from labcoat.runner import _display
from labcoat.runner._display import Display, TrialRow


def rows(n: int) -> list[TrialRow]:
    """n trials of two arms: two running, 3% failed, 30% done, the rest pending."""
    now = time.time()
    out = []
    for i in range(n):
        status = ("running" if i < 2 else "failed" if i % 33 == 0 else
                  "done" if i % 10 < 3 else "pending")
        started = now - 60 if status != "pending" else None
        out.append(TrialRow(key=f"arm{i % 2}-s{i // 2}", arm=f"arm{i % 2}", status=status,
                            step=100 if started else None, total=300, metric="loss=1.234",
                            started=started, ended=now - 1 if status in ("done", "failed")
                            else None, note="done" if status == "done" else ""))
    return out


def cpu_per_redraw(n: int, redraws: int, summary_at: int) -> float:
    _display.SUMMARY_AT = summary_at
    console = Console(file=io.StringIO(), force_terminal=True, width=120, height=50)
    with Display("labcoat run bench", rows(n), console=console, plain=False) as display:
        start = time.process_time()
        for _ in range(redraws):
            display._live.update(display.view(), refresh=True)
        return (time.process_time() - start) / redraws


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--redraws", type=int, default=20)
    args = bench.shrink(parser.parse_args(), trials=200, redraws=3)
    default = _display.SUMMARY_AT
    before = cpu_per_redraw(args.trials, args.redraws, summary_at=args.trials + 1)
    after = cpu_per_redraw(args.trials, args.redraws, summary_at=default)
    rate = _display.REFRESH_PER_SECOND
    print(f"{args.trials} trials, CPU per redraw: a row per trial {1000 * before:.1f} ms, "
          f"summary {1000 * after:.2f} ms ({before / after:.0f}x less)")
    asked = 100 * 4 * before  # Rich's auto-refresh asked for 4 redraws a second
    print(f"share of a core: before {min(100, asked):.0f}%" + (
          f" (4 redraws/s asked {asked:.0f}%: the redraw thread never catches up)"
          if asked > 100 else " (4 redraws/s)")
          + f", now at most {100 * rate * after:.1f}% ({rate:g} redraws/s)")
    bench.save(args, {"trials": args.trials, "row_per_trial_cpu_s": before,
                      "summary_cpu_s": after, "ratio": before / after})


if __name__ == "__main__":
    main()
