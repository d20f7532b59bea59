"""The live view of `labcoat run` stays cheap for many trials: a summary per arm and
state, the running trials and the latest failures, redrawn at a bounded rate (issue 22,
point 7; the CPU figures are in benchmarks/README.md, "Live display at scale")."""

import io
import re

from rich.console import Console

from helpers import cli, fake_design
from labcoat.runner import _display
from labcoat.runner._display import SUMMARY_AT, Display, TrialRow


def test_run_with_many_trials_shows_the_summary_not_a_row_each(home, tmp_path, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal, as at a shell: the live view
    monkeypatch.setenv("COLUMNS", "150")
    seeds = SUMMARY_AT // 2 + 1  # two arms: just past the summary's threshold
    design = fake_design(tmp_path, steps=1, seeds=seeds, parallelism=2)
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", cli("run", str(design), check=True).stdout)
    assert f"labcoat run fake ({2 * seeds:,} trials)" in out
    last = out[out.rindex(f"({2 * seeds:,} trials)"):]  # the final view
    assert "base" in last and "better" in last and f"{seeds}" in last
    assert "base-s0 " not in last  # no row per trial
    assert f"{2 * seeds} trial(s) finished now" in out


def _rows(n):
    return [TrialRow(key=f"a{i % 2}-s{i}", arm=f"a{i % 2}",
                     status="running" if i == 3 else "failed" if i in (5, 8) else "pending",
                     ended=float(i) if i in (5, 8) else None) for i in range(n)]


def test_the_summary_lists_running_trials_and_the_latest_failure_first():
    console = Console(file=io.StringIO(), force_terminal=True, width=150)
    display = Display("run x", _rows(2000), console=console, plain=False)
    console.print(display.view())
    text = console.file.getvalue()
    assert "run x (2,000 trials)" in text and "a1-s3" in text
    assert text.index("a0-s8") < text.index("a1-s5")  # latest failure first
    assert "a0-s0 " not in text and "a1-s1999" not in text


def test_redraws_are_bounded_however_often_the_runner_asks(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(_display.time, "monotonic", lambda: clock[0])
    console = Console(file=io.StringIO(), force_terminal=True, width=150)
    with Display("run x", _rows(100), console=console, plain=False) as display:
        drawn = []
        monkeypatch.setattr(display, "view", lambda: drawn.append(1) or "view")
        for _ in range(50):  # 50 asks within one instant: no redraw yet
            display.refresh()
        assert drawn == []
        clock[0] += 1 / _display.REFRESH_PER_SECOND
        for _ in range(50):
            display.refresh()
        assert len(drawn) == 1


def test_plain_output_prints_running_trials_progress_at_intervals(monkeypatch):
    """Piped (plain) output: a line per running trial every PROGRESS_EVERY seconds, so a
    log never goes minutes without news (issue 30: `make demo | cat` was silent ~3 min)."""
    clock = [100.0]
    monkeypatch.setattr(_display.time, "monotonic", lambda: clock[0])
    console = Console(file=io.StringIO(), width=80)
    rows = [TrialRow(key="base-s0", status="running", step=300, total=1500,
                     metric="loss 2.31", started=0.0), TrialRow(key="base-s1")]
    with Display("run x", rows, console=console, plain=True) as display:
        display.refresh()
        assert console.file.getvalue() == ""  # too early
        clock[0] += _display.PROGRESS_EVERY
        display.refresh()
        display.refresh()  # asked again at once: no second line
    lines = console.file.getvalue().splitlines()
    assert len(lines) == 1
    assert "base-s0: running, step 300/1500, loss 2.31" in lines[0]
    assert "eta" in lines[0] and "base-s1" not in lines[0]
