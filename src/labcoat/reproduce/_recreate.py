"""Starting a recorded trial again, outside the experiment: same command, params, seeds and
numeric environment, the recorded code, and a scratch directory for its journal.

Used by `labcoat rerun` and `labcoat replay`. Nothing is written to the store: the
process journals into the scratch directory (``$LABCOAT_HOME/reruns`` or the trial's
``replays``), and its checkpoint directory is a fresh one there, so the original trial's
checkpoints and metrics are never touched.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from labcoat import environment as env
from labcoat.errors import LabcoatError
from labcoat.reproduce._worktree import CodeCopy
from labcoat.runner import LocalProcess
from labcoat.sdk import JOURNAL_NAME
from labcoat.store import Experiment, Trial


def scratch_dir(*parts: str) -> Path:
    """A new directory under the labcoat home, named by the time (kept for inspection)."""
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    path = env.home().joinpath(*parts, stamp)
    path.mkdir(parents=True, exist_ok=False)
    return path


def start(experiment: Experiment, trial: Trial, provenance: dict[str, Any], code: CodeCopy,
          run_dir: Path, extra_env: dict[str, str] | None = None,
          extra_path: str | None = None) -> LocalProcess:
    """The trial's recorded command as a subprocess journaling to `run_dir`.

    extra_path: appended to the recorded PYTHONPATH (a replay's probe modules)."""
    command = [code.map(part) for part in provenance.get("command") or []]
    if not command:
        raise LabcoatError(f"trial {experiment.name}/{trial.key} has no recorded command")
    cwd = code.map(provenance.get("cwd") or os.getcwd())
    if not Path(cwd).is_dir():
        raise LabcoatError(f"the trial ran in {cwd}, which is gone; recreate that directory "
                           "(relative paths in its command start there)")
    child = {k: v for k, v in os.environ.items()
             if not k.startswith("LABCOAT_") or k in (env.HOME, env.DB)}
    child.update({
        env.JOURNAL: str(run_dir / JOURNAL_NAME),
        env.EXPERIMENT: experiment.name,
        env.TRIAL: trial.key,
        env.ATTEMPT: "1",
        env.ARM: trial.arm,
        env.SEED: "" if trial.seed is None else str(trial.seed),
        env.PARAMS: json.dumps(provenance.get("params") or trial.params),
        env.CHECKPOINT_DIR: str(run_dir / "checkpoints"),
        "PYTHONUNBUFFERED": "1",
    })
    variables = dict((provenance.get("environment") or {}).get("variables") or {})
    child.pop("PYTHONPATH", None)  # the recorded one, if any, with paths into the worktree
    paths = [code.map(p) for p in str(variables.pop("PYTHONPATH", "")).split(os.pathsep) if p]
    if paths or extra_path:
        child["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [extra_path])])
    child.update({k: str(v) for k, v in variables.items()})
    child.update(extra_env or {})
    try:
        return LocalProcess(command, env=child, run_dir=run_dir, cwd=cwd)
    except OSError as err:
        raise LabcoatError(f"could not start {command[0]!r}: {err.strerror}; the recorded "
                           f"command was {' '.join(command)}") from None
