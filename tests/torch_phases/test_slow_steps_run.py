"""`labcoat run` end to end: a tinylm trial whose data loading sleeps 15 ms a batch from step
100 (`--fault slow_data`) raises the `phase.slow` alarm, which `labcoat status` shows (its
clean twin raises none); with
``LABCOAT_PROFILE_ON_SLOW`` in the runner's environment the trial also writes a profile of
the slow steps beside its journal and journals the `phase.profile` event naming it. (The
report, HTML and dashboard views of the alarm: tests/report/test_phase_section.py.)"""

from __future__ import annotations

import json

import pytest

from helpers import cli, slow_data_design

pytestmark = [pytest.mark.needs("torch"), pytest.mark.slow]  # trains tinylm in a subprocess

STEPS, SLOW_FROM = 140, 100
DESIGN = slow_data_design("slowrun", STEPS, SLOW_FROM)


def test_the_alarm_shows_in_status_and_the_slow_steps_are_profiled(home, tmp_path,
                                                                    monkeypatch):
    (tmp_path / "design.yaml").write_text(DESIGN)
    monkeypatch.setenv("LABCOAT_PROFILE_ON_SLOW", "3")
    cli("run", str(tmp_path / "design.yaml"), "--plain", check=True, cwd=tmp_path,
        timeout=300)
    status = cli("status", "slowrun", check=True).stdout
    assert "slow steps (1):" in status, status
    line = next(ln for ln in status.splitlines() if "data +" in ln)
    assert "on rank 0 from step" in line
    step = int(line.split("from step ")[1].split()[0])
    assert SLOW_FROM - 10 <= step <= SLOW_FROM, line
    assert "base-s0" not in "".join(ln for ln in status.splitlines() if "data +" in ln)
    assert not list((home / "runs" / "slowrun").glob("base-s0/attempt-*/profile-*.json"))
    (journal,) = (home / "runs" / "slowrun").glob("slow-s0/attempt-*/journal.jsonl")
    records = [json.loads(x) for x in journal.read_text().splitlines()]
    (event,) = [r for r in records if r["kind"] == "event" and r["event"] == "phase.profile"]
    trace = journal.parent / event["data"]["file"]
    assert event["data"]["phase"] == "data" and trace.exists()
    names = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]}
    assert {"labcoat.phase.data", "labcoat.phase.forward"} <= names
