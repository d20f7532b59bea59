"""What the terminal shows stays whole and inert (issue 22, point 6): `show` prints the
design verbatim (it still parses), `status`, `report` and `compare` never cut or split a
trial, arm or task name at 80 columns, and `logs` shows a trial's escape codes escaped."""

import yaml

from helpers import cli, stored_experiment

LONG_ARM = "an-arm-with-an-extremely-long-name-that-no-80-column-terminal-could-fit-in-a-cell"
LONG_TASK = "a-task-whose-name-is-much-longer-than-any-table-column-of-an-80-column-terminal"
DESIGN = f"""name: long-names
description: a description longer than eighty columns, which a wrapped print would break into two
hypothesis: {{claim: c, metric: exact_match, source: items, direction: increase}}
command: "python train.py --a-very-long-option-name-to-make-the-command-long --seed {{seed}}"
arms:
  base: {{control: true}}
  {LONG_ARM}: {{}}
seeds: 2
"""
ESCAPES = "\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x1b[2J"  # colour, window title, clear screen


def _store() -> None:
    trials = []
    for arm, correct in (("base", 3), (LONG_ARM, 6)):
        for seed in range(2):
            trials.append({
                "key": f"{arm}-s{seed}", "arm": arm, "seed": seed,
                "metrics": {"loss": [(1, 1.0)]},
                "items": {task: {f"q{i}": float(i < correct + seed) for i in range(10)}
                          for task in ("short", LONG_TASK)},
                "logs": [f"step 1 {ESCAPES}"]})
    stored_experiment("long-names", DESIGN, trials)


def _narrow(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # what rich assumes for a pipe or a file


def test_show_prints_the_design_verbatim(home, monkeypatch):
    _store()
    _narrow(monkeypatch)
    out = cli("show", "long-names", check=True).stdout
    assert DESIGN.rstrip() in out
    shown = out[out.index("\n") + 1:out.index("seeds: 2") + len("seeds: 2")]
    assert yaml.safe_load(shown) == yaml.safe_load(DESIGN)


def test_names_are_never_cut_or_split_at_80_columns(home, tmp_path, monkeypatch):
    _store()
    _narrow(monkeypatch)
    status = cli("status", "long-names", check=True).stdout
    for key in (f"{LONG_ARM}-s0", f"{LONG_ARM}-s1"):
        assert key in status
    assert "…" not in status
    assert "long-names" in cli("status", check=True).stdout
    report = cli("report", "long-names", check=True).stdout
    assert LONG_TASK in report and LONG_ARM in report and "…" not in report
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for path, correct in ((a, 3), (b, 7)):
        path.write_text("task,item,score\n" + "".join(
            f"{task},q{i},{float(i < correct)}\n" for task in ("short", LONG_TASK)
            for i in range(10)))
    compared = cli("compare", str(a), str(b), check=True).stdout
    assert LONG_TASK in compared and "…" not in compared


def test_logs_show_escape_codes_escaped(home):
    _store()
    out = cli("logs", "long-names", check=True).stdout
    assert "\x1b" not in out and "\x07" not in out
    assert r"\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x1b[2J" in out
    assert len([line for line in out.splitlines() if "pwned" in line]) == 4


def test_report_from_another_directory_names_the_store_it_read(home, tmp_path, monkeypatch):
    """Without LABCOAT_HOME the store is ./.labcoat: from another directory the message says
    which file was read and how to choose another."""
    _store()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.delenv("LABCOAT_HOME")
    done = cli("report", "long-names", cwd=elsewhere)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())
    assert f"in the store {elsewhere / '.labcoat' / 'labcoat.db'}" in message
    assert "LABCOAT_HOME or LABCOAT_DB chooses the store" in message
    monkeypatch.setenv("LABCOAT_HOME", str(home))
    assert cli("report", "long-names", cwd=elsewhere).returncode == 0
