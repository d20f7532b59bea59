"""Helpers shared by tests: run the real CLI, write small designs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
FAKE_TRIAL = FIXTURES / "fake_trial.py"


def cli(*args: str, cwd: Path | None = None, timeout: float = 300,
        check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run `labcoat ARGS` as a real subprocess with the current environment."""
    result = subprocess.run(
        [sys.executable, "-m", "labcoat.cli", *args], cwd=cwd, env=dict(os.environ),
        capture_output=True, text=True, timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"labcoat {' '.join(args)} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def fake_design(directory: Path, *, name: str = "fake", steps: int = 5, sleep: float = 0.0,
                extra: str = "", seeds: int = 2, parallelism: int = 2,
                variant_quality: float = 0.8) -> Path:
    """Write a design whose trials run tests/fixtures/fake_trial.py (no torch, fast)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "design.yaml"
    path.write_text(
        f"""name: {name}
hypothesis:
  claim: higher quality helps
  metric: exact_match
  source: items
  direction: increase
command: "{{python}} {FAKE_TRIAL} --steps {{steps}} --quality {{quality}} --seed {{seed}} \
  --sleep {sleep} {extra}"
params: {{steps: {steps}, quality: 0.3}}
arms:
  base: {{control: true}}
  better: {{params: {{quality: {variant_quality}}}}}
seeds: {seeds}
parallelism: {parallelism}
""",
        encoding="utf-8",
    )
    return path
