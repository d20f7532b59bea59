"""Every benchmark keeps working: each parses its arguments, and each `--quick` run (the
one `make bench` does) ends well or skips cleanly for an absent peer tool, writing its JSON
results. Through the harness's own runner (one process, a forked child per script), so
this is what `make bench` runs. Speed is never asserted here (benchmarks/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if not p.name.startswith("_"))
# Quick runs that still take ten seconds or more (training processes, spawned pools,
# several CLI runs); the rest take a few seconds each.
SLOW = {"executors", "goodput", "guard", "guard_vs_traincheck", "load", "mup_transfer",
        "replay", "scaling_fit", "subset_selection", "traincheck_bugs", "traincheck_dist",
        "ui", "callback_overhead", "import_vs_clients", "small_sample_verdicts",
        "influence", "shrink"}


def _harness(out: Path, home: Path, *args: str) -> dict[str, dict]:
    """Run benchmarks/_harness.py; its outcome per script (summary.json)."""
    env = {**os.environ, "LABCOAT_HOME": str(home), "OMP_NUM_THREADS": "1"}
    env.pop("LABCOAT_DB", None)
    done = subprocess.run([sys.executable, str(BENCH / "_harness.py"), "--out", str(out),
                           *args], capture_output=True, text=True, env=env, timeout=900)
    summary = out / "summary.json"
    assert summary.exists(), done.stdout + done.stderr
    return {o["script"]: o for o in json.loads(summary.read_text())}


def _check(outcomes: dict[str, dict], out: Path, scripts: list[str]) -> None:
    assert sorted(outcomes) == sorted(scripts)
    bad = {s: o for s, o in outcomes.items() if o["status"] not in ("ok", "skipped")}
    assert not bad, "\n\n".join(f"{s}: {o['status']}\n{o['detail']}" for s, o in bad.items())
    for script in scripts:
        if "_harness" not in (BENCH / f"{script}.py").read_text(encoding="utf-8"):
            continue  # a script that does not write results through the harness
        result = json.loads((out / f"{script}.json").read_text())
        assert result["script"] == script and result["quick"] is True
        if outcomes[script]["status"] == "skipped":
            assert result["results"]["skipped"] == outcomes[script]["detail"]


def test_every_script_parses_its_arguments_and_offers_quick(tmp_path):
    outcomes = _harness(tmp_path / "out", tmp_path / "home", "--help-only", "--jobs", "2")
    assert sorted(outcomes) == SCRIPTS
    assert {s: o["status"] for s, o in outcomes.items()} == dict.fromkeys(SCRIPTS, "ok")
    for script in SCRIPTS:
        assert "--quick" in (tmp_path / "out" / f"{script}.log").read_text(), script


def test_no_benchmark_imports_the_tests():
    for path in BENCH.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert '"tests"' not in text and "from helpers" not in text, path.name


def test_quick_runs(tmp_path):
    scripts = [s for s in SCRIPTS if s not in SLOW]
    out = tmp_path / "out"
    _check(_harness(out, tmp_path / "home", "--jobs", "2", "--only", *scripts), out, scripts)


@pytest.mark.slow
def test_quick_runs_that_train_or_start_processes(tmp_path):
    scripts = [s for s in SCRIPTS if s in SLOW]
    out = tmp_path / "out"
    _check(_harness(out, tmp_path / "home", "--jobs", "2", "--only", *scripts), out, scripts)


def test_a_failing_or_skipping_script_is_reported_as_such(tmp_path):
    """The runner itself: an exception is a failure with its traceback, harness.skip() a skip
    with its reason, never an "ok"."""
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "_harness.py").write_text((BENCH / "_harness.py").read_text())
    (bench / "broken.py").write_text("import _harness as bench\n"
                                     "args = bench.parser(__doc__).parse_args()\n"
                                     "raise ValueError('rotted')\n")
    (bench / "absent.py").write_text("import _harness as bench\n"
                                     "args = bench.parser(__doc__).parse_args()\n"
                                     "bench.need_peer(args, 'NO_SUCH_PY', '/no/such/python', "
                                     "'peer', 'pip install peer')\n")
    env = {**os.environ, "LABCOAT_HOME": str(tmp_path / "home")}
    env.pop("NO_SUCH_PY", None)
    done = subprocess.run([sys.executable, str(bench / "_harness.py"), "--no-preload", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert done.returncode != 0 and "failed: broken" in done.stderr
    outcomes = {o["script"]: o for o in json.loads((tmp_path / "out" / "summary.json")
                                                   .read_text())}
    assert outcomes["broken"]["status"] == "failed"
    assert "ValueError: rotted" in outcomes["broken"]["detail"]
    assert outcomes["absent"]["status"] == "skipped"
    assert outcomes["absent"]["detail"] == ("no peer interpreter at /no/such/python; create "
                                            "it with: pip install peer (or set NO_SUCH_PY)")
    # without --quick the same absence is an error naming the fix
    full = subprocess.run([sys.executable, str(bench / "absent.py")], capture_output=True,
                          text=True, env=env)
    assert full.returncode != 0 and "pip install peer" in full.stderr
