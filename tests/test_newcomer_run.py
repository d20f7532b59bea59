"""`labcoat init` then `labcoat run`, as a newcomer types them (issue 22, points 1 and 6):
a missing extra is one line before anything runs, printed next commands run as printed,
and the run says where its trials run and where the store and logs are."""

import os
import shlex
import subprocess
import sys

import pytest

from helpers import cli, fake_design

# torch absent as after `pip install .`: no finder sees it, so find_spec("torch") is None
# and `import torch` raises ModuleNotFoundError, in labcoat and in its trial processes
HIDE_TORCH = '''import sys


class _Hide:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, attr):
        return getattr(self.finder, attr)


sys.meta_path[:] = [_Hide(f) if hasattr(f, "find_spec") else f for f in sys.meta_path]
'''


def test_run_without_torch_says_which_extra_before_anything_runs(home, tmp_path, monkeypatch):
    hidden = tmp_path / "no_torch"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text(HIDE_TORCH)
    monkeypatch.setenv("PYTHONPATH", str(hidden))
    probe = subprocess.run([sys.executable, "-c",
                            "import importlib.util; print(importlib.util.find_spec('torch'))"],
                           capture_output=True, text=True, env=dict(os.environ))
    assert probe.stdout.strip() == "None", probe  # the shim hides torch
    cli("init", "myexp", cwd=tmp_path, check=True)
    result = cli("run", "myexp/design.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    message = result.stderr.strip()
    assert "labcoat.workloads.tinylm, which needs torch, and torch is not installed" in message
    assert "pip install 'labcoat[torch]'" in message
    assert len(message.splitlines()) <= 3 and "Traceback" not in message  # one line, wrapped
    assert "started" not in result.stdout  # no trial ran
    assert not (home / "runs").exists()


def test_printed_next_commands_run_as_printed_without_labcoat_on_path(
        home, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # `labcoat` is not on it: no venv activated
    init = cli("init", "myexp", cwd=tmp_path, check=True).stdout
    program = shlex.split(init.split("run it with: ", 1)[1])[0]
    assert program != "labcoat" and os.access(program, os.X_OK), init

    design = fake_design(tmp_path / "fast", steps=2, seeds=1)
    run = cli("run", str(design), cwd=tmp_path, check=True).stdout
    assert f"trials run in {tmp_path} (this directory" in run
    assert f"store: {home / 'labcoat.db'}" in run and f"logs: {home / 'runs' / 'fake'}" in run
    command = run.split("next: ", 1)[1].strip()
    assert not command.startswith("labcoat ")
    shown = subprocess.run(shlex.split(command), cwd=tmp_path, capture_output=True, text=True,
                           env=dict(os.environ), timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "Verdict" in shown.stdout or "fake" in shown.stdout


@pytest.mark.slow  # trains tinylm: 6 short trials
@pytest.mark.needs("torch")
def test_the_demo_ends_with_commands_that_run_as_printed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no venv activated
    monkeypatch.delenv("LABCOAT_HOME", raising=False)
    out = cli("demo", "--steps", "6", cwd=tmp_path, timeout=900, check=True).stdout
    assert out.strip().splitlines()[-1].startswith("Verdict for warmup vs control:"), out
    tail = " ".join(out.split("explore them with", 1)[1].split("\n\n", 1)[0].split())
    show, report = (part.strip() for part in tail.split(" or ", 1))
    for command in (show, report):
        assert " labcoat " not in f" {command} "  # a bare labcoat is not on this PATH
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True,
                              text=True, env=dict(os.environ), timeout=120)  # as typed
        assert done.returncode == 0, (command, done.stderr)
        assert "warmup-demo" in done.stdout
