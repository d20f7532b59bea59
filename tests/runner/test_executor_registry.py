"""A new executor is one module in labcoat.runner.executors: plant one (outside the source
tree, on the package's search path) and run a real design through it, with nothing else
edited."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import labcoat.runner.executors as executors_package
from helpers import fake_design
from labcoat.errors import LabcoatError
from labcoat.runner import ExecutorConfig, executor_names, run_design

# What a contributor writes: typed settings, an executor, its registration.
COUNTING = '''
from dataclasses import dataclass
from pathlib import Path

from labcoat.errors import LabcoatError
from labcoat.runner import ExecutorKind, ExecutorSettings, LocalProcess, setting


@dataclass(frozen=True, kw_only=True)
class CountingSettings(ExecutorSettings):
    ledger: str = setting("the file each launch is written to", "")

    def __post_init__(self):
        if not self.ledger:
            raise LabcoatError("--executor counting needs --ledger FILE")


class CountingExecutor:
    name = "counting"

    def __init__(self, ledger):
        self.ledger = Path(ledger)

    def launch(self, command, *, env, run_dir, cwd):
        with open(self.ledger, "a") as f:
            f.write(env["LABCOAT_TRIAL"] + "\\n")
        return LocalProcess(command, env=env, run_dir=run_dir, cwd=cwd)

    def abandon(self, run_dir):
        pass

    def close(self):
        pass


EXECUTOR = ExecutorKind("counting", CountingSettings,
                        lambda settings, resources: CountingExecutor(settings.ledger))
'''


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = tmp_path / "plugins"
    extra.mkdir()
    (extra / "counting.py").write_text(COUNTING, encoding="utf-8")
    monkeypatch.setattr(executors_package, "__path__", [*executors_package.__path__, str(extra)])
    yield
    sys.modules.pop("labcoat.runner.executors.counting", None)


def test_a_planted_module_is_an_executor(planted, home, tmp_path):
    assert executor_names() == ("counting", "local", "ray", "slurm")
    with pytest.raises(LabcoatError, match="--executor counting needs --ledger FILE"):
        ExecutorConfig(name="counting")
    with pytest.raises(LabcoatError, match="--ledger is the file each launch is written to; "
                                           "it needs --executor counting"):
        ExecutorConfig(name="local", options={"ledger": "x"})
    ledger = tmp_path / "ledger.txt"
    config = ExecutorConfig(name="counting", options={"ledger": str(ledger)})
    summary = run_design(fake_design(tmp_path / "d"), executor=config, plain=True)
    assert sorted(summary.done) == sorted(ledger.read_text().split())
    assert len(summary.done) == 4 and not summary.failed


def test_without_the_module_it_is_unknown(home):
    with pytest.raises(LabcoatError, match="'counting' is not an executor; choose local, ray, "
                                           "slurm"):
        ExecutorConfig(name="counting")
