"""README's "Guard and checkpoints in a training script", verbatim, run twice in one directory.

What a new user does (issue 30, point 1): copy the example into a script, run it, run it
again. The second run must resume from a recent checkpoint (not step 1), number its steps
as the loop does, and print what the comment says: ``[]`` (no alert on a healthy loop).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Guard and checkpoints in a training script"


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index(HEADING):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README section lost its code block"
    return match.group(1)


def run_script(script: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABCOAT_")}
    env["LABCOAT_HOME"] = str(home)
    return subprocess.run([sys.executable, script.name], cwd=script.parent, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def journal_events(home: Path) -> list[list[dict[str, Any]]]:
    """Each run's journal events, oldest run first."""
    journals = sorted(home.glob("adhoc/readme-torch/*/*/journal.jsonl"))
    return [[r for r in map(json.loads, j.read_text().splitlines()) if r["kind"] == "event"]
            for j in journals]


def test_the_readme_example_run_twice_resumes_late_and_raises_no_alert(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(readme_example())
    home = tmp_path / "home"
    first = run_script(script, home)
    assert first.returncode == 0, first.stderr
    second = run_script(script, home)
    assert second.returncode == 0, second.stderr
    for result in (first, second):
        assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout  # "# [] here"
        assert "labcoat guard:" not in result.stderr and "Traceback" not in result.stderr

    runs = journal_events(home)
    assert len(runs) == 2
    saved = [e["step"] for e in runs[0] if e["event"] == "checkpoint.saved"]
    assert len(saved) > 2, saved  # more than the measuring save at step 1
    (restored,) = [e for e in runs[1] if e["event"] == "checkpoint.restored"]
    assert restored["step"] == saved[-1] >= 100  # the newest kept: at most half the run lost
    # the resumed guard counts steps as the loop does: it closed after step 200
    closed = [e for e in runs[1] if e["event"] == "guard.profile"]
    assert closed and closed[-1]["step"] == 200
    assert not [e for e in runs[0] + runs[1] if e["event"] == "guard.alert"]
