"""What a user installing without the Makefile meets (issue 22, point 1)."""

import tomllib
from pathlib import Path

from helpers import cli

ROOT = Path(__file__).resolve().parents[1]


def test_demo_without_torch_says_so_before_running_anything(home, tmp_path, monkeypatch):
    hidden = tmp_path / "no_torch"
    hidden.mkdir()
    # sys.modules["torch"] = None makes `import torch` fail and find_spec("torch") None,
    # as in an environment where `pip install .` left torch out
    (hidden / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    monkeypatch.setenv("PYTHONPATH", str(hidden))
    result = cli("demo")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "needs" not in result.stdout and "running" not in result.stdout  # nothing ran
    assert "torch is not installed" in result.stderr and "pip install" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # one message, wrapped at most once


def test_the_all_extra_holds_every_user_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    users = sorted(set(extras) - {"all", "dev", "docs"})  # docs builds the manual
    assert extras["all"] == [f"labcoat[{','.join(users)}]"]
