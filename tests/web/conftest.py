"""Stores for the dashboard's tests: experiments written straight into a real SQLite
store (tests/helpers.stored_experiment), so no trial process has to run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import stored_experiment, xss_experiment

DESIGN = """name: demo
hypothesis:
  claim: higher quality helps
  metric: exact_match
  source: items
  direction: increase
command: "python train.py --seed {seed} --quality {quality}"
params: {quality: 0.3}
arms:
  base: {control: true}
  better: {params: {quality: 0.8}}
seeds: 3
"""
STEPS = 400


def loss(step: int, arm: str, seed: int) -> float:
    """A known curve per trial, so curves can be checked by brute force."""
    return 2.0 / step ** 0.5 + (0.1 if arm == "base" else 0.0) + 0.01 * seed + (step % 7) * 1e-3


def demo_experiment(name: str = "demo") -> None:
    trials = [{"key": f"{arm}-s{seed}", "arm": arm, "seed": seed, "params": {"quality": q},
               "command": ["python", "train.py", "--seed", str(seed)],
               "metrics": {"loss": [(s, loss(s, arm, seed)) for s in range(1, STEPS + 1)]},
               "items": {task: {f"{task}-{i}": float((i * 7 + seed) % 10 < 10 * q)
                                for i in range(30)} for task in ("alpha", "beta")},
               "alerts": [(50, "update.param_unchanged", "error", "fc1 did not change")],
               "logs": [f"step {s}" for s in (1, 2, 3)]}
              for arm, q in (("base", 0.3), ("better", 0.8)) for seed in range(3)]
    stored_experiment(name, DESIGN.replace("name: demo", f"name: {name}"), trials)


@pytest.fixture(scope="module")
def ui_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """LABCOAT_HOME with experiments `demo`, `other` and the XSS one."""
    home = tmp_path_factory.mktemp("ui") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABCOAT_HOME", str(home))
        mp.delenv("LABCOAT_DB", raising=False)
        demo_experiment("demo")
        demo_experiment("other")
        xss_experiment()
        yield home
